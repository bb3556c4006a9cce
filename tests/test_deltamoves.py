"""Delta-moves: a broker's primary link moves while publications flow; none is lost or
delivered twice, and the routing state ends as the new tree's."""
import dataclasses
import json
import random
from collections import deque

import networkx as nx
import pytest

import topologies
from actors.results import read_table
from experiments.cli import main
from protocols.deltamoves import _path_avoiding, plan_moves
from protocols.softlinks import DeltaView, SoftLinkSettings
from workloads.generators import random_mix
from workloads.trace import compile_trace

from .oracle import Pump, expected_deliveries


def random_moves(graph, rng: random.Random, count: int, delta: int = 4) -> list[dict]:
    """``count`` valid moves, each on the tree the earlier ones leave (at times 1, 2, ... s)."""
    links = {b: set(n) for b, n in topologies.neighbours(graph).items()}
    moves = []
    while len(moves) < count:
        a = rng.choice(sorted(links))
        b = rng.choice(sorted(links[a]))
        beyond = [c for c in sorted(links) if c != a and c not in links[a]
                  and 2 <= len(_path_avoiding(links, a, b, c) or ()) <= delta]
        if beyond:
            c = rng.choice(beyond)
            links[a].discard(b), links[b].discard(a), links[a].add(c), links[c].add(a)
            moves.append({"at_us": (len(moves) + 1) * 1_000_000, "broker": a, "from": b, "to": c})
    return moves


def protocol(covering: str, moves=(), strategy: str = "S0", links=None) -> dict:
    soft = SoftLinkSettings(strategy=strategy, adaptive=False, moves=tuple(moves), links=links or {})
    return {"covering": covering, "soft_links": dataclasses.asdict(soft)}


def random_links(graph, rng: random.Random, delta: int = 4) -> dict:
    """Up to two soft links at random for about half the brokers."""
    overlay = topologies.neighbours(graph)
    links = {}
    for broker in sorted(graph):
        view = DeltaView(broker, overlay, delta)
        far = [n for n in view.nodes if view.depth[view.id[n]] >= 2]
        if far and rng.random() < 0.5:
            links[broker] = {"soft": sorted(rng.sample(far, min(len(far), rng.randint(1, 2)))), "candidate": []}
    return links


def moved_tree(graph, moves) -> nx.Graph:
    moved = nx.Graph(graph)
    for move in moves:
        moved.remove_edge(move["broker"], move["from"])
        moved.add_edge(move["broker"], move["to"])
    return moved


def run_with_moves(pump: Pump, records: list[dict], moves: list[dict], at: list[float]) -> Pump:
    """Inject the trace; before the operation at each fraction ``at``, tick the next move's broker."""
    injections = list(compile_trace(records, pump.brokers))
    starts = {int(len(injections) * fraction): move for fraction, move in zip(at, moves)}
    for i, injection in enumerate(injections):
        if i in starts:
            pump.now = max(pump.now, starts[i]["at_us"])
            pump.tick(starts[i]["broker"])
        pump.now = max(pump.now, injection.t_us)
        pump.inject(injection.broker, injection.message)
    return pump


def routing_state(broker) -> dict:
    return {
        "advs": {key: route.last_hop for key, route in broker.advs.items()},
        "subs": {key: route.last_hop for key, route in broker.subs.items()},
        "routed": {hop: sorted(keys) for hop, keys in broker.routed_subs.items() if keys},
    }


def test_plan_moves_follows_the_tree_the_earlier_moves_leave():
    overlay = topologies.neighbours(topologies.line(6))  # B0 - B1 - ... - B5
    moves = [{"at_us": 1, "broker": "B0", "from": "B1", "to": "B3"},  # B1 - B2 - B3 - B0 - ...
             {"at_us": 2, "broker": "B1", "from": "B2", "to": "B0"}]  # B1's side is B0's now
    first, second = plan_moves(overlay, moves, 4)
    assert first.path == ("B1", "B2", "B3") and first.region == ("B0", "B1", "B2", "B3")
    assert second.path == ("B2", "B3", "B0")
    with pytest.raises(ValueError, match=r"moves\[1\].from: B1 is not a primary neighbour of B0"):
        plan_moves(overlay, [moves[0], {"at_us": 2, "broker": "B0", "from": "B1", "to": "B2"}], 4)


@pytest.mark.parametrize("seed", range(5))
def test_a_move_leaves_the_state_a_network_on_the_new_tree_has(seed):
    """Without covering a broker's routing state is a function of the tree and what is active:
    after moves it must equal that of a network that ran the same operations on the new tree."""
    rng = random.Random(seed)
    graph = topologies.random_tree(rng.randint(12, 30), seed)
    moves = random_moves(graph, rng, 2)
    records = random_mix(sorted(graph), seed=seed, operations=300, moves=False)
    moved = run_with_moves(Pump(graph, protocol("none", moves)), records, moves, [0.3, 0.6])
    assert [e["move"] for kind, e in moved.events if kind == "delta_move_done"] == [0, 1]
    rebuilt = Pump(moved_tree(graph, moves), protocol("none")).run(records)
    for name in sorted(graph):
        assert sorted(moved.brokers[name].neighbors) == sorted(rebuilt.brokers[name].neighbors), name
        assert routing_state(moved.brokers[name]) == routing_state(rebuilt.brokers[name]), name
    assert set(moved.deliveries) == expected_deliveries(records)


@pytest.mark.parametrize("covering", ["none", "lazy", "active"])
@pytest.mark.parametrize("seed", range(4))
def test_deliveries_equal_the_oracle_with_moves_between_operations(covering, seed):
    rng = random.Random(f"moves{seed}")
    graph = topologies.random_tree(rng.randint(12, 40), seed)
    moves = random_moves(graph, rng, 3)
    records = random_mix(sorted(graph), seed=seed, operations=400, moves=False)
    pump = run_with_moves(Pump(graph, protocol(covering, moves)), records, moves, [0.25, 0.5, 0.75])
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    done = [e for kind, e in pump.events if kind == "delta_move_done"]
    assert [e["move"] for e in done] == [0, 1, 2]


def anchors_by_key(broker) -> dict:
    view, column = broker.view, broker.prt.columns["anchor"]
    return {key: view.nodes[column[route.slot]] for key, route in broker.subs.items()}


@pytest.mark.parametrize("strategy", ["S1", "S2", "SH"])
@pytest.mark.parametrize("seed", range(4))
def test_anchored_moves_leave_the_views_and_anchors_of_the_new_tree(strategy, seed):
    """Under S1/S2/SH the brokers near a moved link take the new tree's Delta-view and anchors
    (those the rewriting rule gives on that tree), drop the soft links it leaves out of reach
    or makes primary, and forward on it again; deliveries stay exact."""
    rng = random.Random(f"anchored{seed}")
    graph = topologies.random_tree(rng.randint(14, 30), seed)
    moves = random_moves(graph, rng, 3)
    links = random_links(graph, rng)
    records = random_mix(sorted(graph), seed=seed, operations=400, moves=False)
    moved = run_with_moves(Pump(graph, protocol("none", moves, strategy, links)), records, moves, [0.25, 0.5, 0.75])
    assert len(moved.deliveries) == len(set(moved.deliveries))
    assert set(moved.deliveries) == expected_deliveries(records)
    final = moved_tree(graph, moves)
    rebuilt = Pump(final, protocol("none", strategy=strategy)).run(records)
    overlay = topologies.neighbours(final)
    for name in sorted(graph):
        broker, view = moved.brokers[name], DeltaView(name, overlay, 4)
        assert not broker.fallback and broker.finished == {m.index for m in broker.zone_moves}, name
        assert (broker.view.nodes, broker.view.parent) == (view.nodes, view.parent), name
        assert anchors_by_key(broker) == anchors_by_key(rebuilt.brokers[name]), name
        assert all(view.depth[view.id[peer]] >= 2 for peer in broker.soft_links), name
    assert any(kind == "soft_link_closed" for kind, _ in moved.events) or not links


def test_a_broker_that_has_not_heard_a_move_is_over_knows_where_its_new_neighbourhood_lies():
    """B0 moves its link from B1 to B3 (delta 3): B5, behind B0, comes within 3 hops of B4.
    While B4 has not heard the move is over it keeps its old view, yet a copy B5 sends it on
    the new tree (over a link B5 may open once it has heard) comes from B4's side toward B3."""
    graph = nx.Graph([("B5", "B0"), ("B0", "B1"), ("B1", "B2"), ("B2", "B3"), ("B3", "B4")])
    moves = [{"at_us": 0, "broker": "B0", "from": "B1", "to": "B3"}]
    settings = protocol("none", moves, "S1")
    settings["soft_links"]["delta"] = 3

    class NewsLate(Pump):
        late: list = []

        def handle(self, destination, sender, message):
            if destination == "B4" and message.kind == "dmove_over":
                self.late.append((sender, message))
            else:
                super().handle(destination, sender, message)

    pump = NewsLate(graph, settings)
    pump.tick("B0")
    b4, b5 = pump.brokers["B4"], pump.brokers["B5"]
    assert b5.fallback == set() and b5.view.depth[b5.view.id["B4"]] == 3
    assert b4.fallback == {0} and "B5" not in b4.view.id
    assert b4.sender_direction("B5") == b4.hop_index["B3"]
    for sender, message in pump.late:
        Pump.handle(pump, "B4", sender, message)
    assert b4.fallback == set() and b4.view.depth[b4.view.id["B5"]] == 3


class InterleavingPump(Pump):
    """Delivers messages in a random order that keeps every link, and every broker's client
    stream, first in first out: the interleavings real links allow, picked at random. With
    ``slow`` > 0 that share of the links is picked a hundred times less often (long delays)."""

    def __init__(self, graph, protocol: dict, seed: int, slow: float = 0.0, hold=None) -> None:
        super().__init__(graph, protocol)
        self.rng = random.Random(seed)
        self.slow = slow
        self.hold = hold  # (pump, link, first message) -> whether the link waits (while others can go)
        self.links: dict[tuple[str, str], deque] = {}
        self.weights: dict[tuple[str, str], float] = {}

    def _drain(self) -> None:
        while True:
            while self.queue:
                destination, sender, message = self.queue.popleft()
                link = (sender or "", destination)
                if link not in self.links:
                    self.links[link] = deque()
                    self.weights[link] = 0.01 if self.slow and self.rng.random() < self.slow else 1.0
                self.links[link].append((sender, message))
            ready = sorted(link for link, waiting in self.links.items() if waiting)
            if not ready:
                return
            if self.hold is not None:
                ready = [link for link in ready if not self.hold(self, link, self.links[link][0][1])] or ready
            if self.slow:
                link = self.rng.choices(ready, [self.weights[link] for link in ready])[0]
            else:
                link = self.rng.choice(ready)
            sender, message = self.links[link].popleft()
            self._current = link[1]
            self.handle(link[1], sender, message)


def racing_trace(brokers: list[str], rng: random.Random) -> tuple[list[dict], int, int]:
    """Publishers and subscribers on attribute x; then publications on x raced by new
    publishers and subscribers on y (which no x publication matches); then publications on y.
    Returns the records and where the race begins and ends."""
    records = []
    for i in range(4):
        records.append({"t": 0, "op": "advertise", "client": f"P{i}", "broker": rng.choice(brokers), "id": f"A{i}",
                        "filter": "[x,>,0]"})
    for i in range(12):
        records.append({"t": 0, "op": "subscribe", "client": f"S{i}", "broker": rng.choice(brokers), "id": f"S{i}",
                        "filter": f"[x,>,{rng.randint(0, 50)}]"})
    race = len(records)
    for i in range(60):
        records.append({"t": 1, "op": "publish", "client": f"P{i % 4}", "id": f"M{i}", "content": f"[x,{rng.randint(1, 99)}]"})
    for i in range(4):
        records.append({"t": 1, "op": "advertise", "client": f"Q{i}", "broker": rng.choice(brokers), "id": f"Y{i}",
                        "filter": "[y,>,0]"})
        records.append({"t": 1, "op": "subscribe", "client": f"T{i}", "broker": rng.choice(brokers), "id": f"T{i}",
                        "filter": f"[y,>,{rng.randint(0, 50)}]"})
    settled = len(records)
    for i in range(20):
        records.append({"t": 2, "op": "publish", "client": f"Q{i % 4}", "id": f"N{i}", "content": f"[y,{rng.randint(1, 99)}]"})
    return records, race, settled


def run_race(pump: InterleavingPump, records: list[dict], race: int, settled: int, start_moves,
             handled_first: int = 0) -> None:
    """Inject the trace: each operation before ``race`` to quiescence; those from ``race`` to
    ``settled`` queued, not delivered (the first ``handled_first`` of them handled by their
    brokers, what those send queued); then ``start_moves()``, whose drain delivers the move's
    messages and everything queued in a random order; the rest to quiescence."""
    injections = list(compile_trace(records, pump.brokers))
    for i, injection in enumerate(injections):
        if i == settled:
            start_moves()
        if race <= i < race + handled_first:
            pump._current = injection.broker
            pump.handle(injection.broker, None, injection.message)
        elif race <= i < settled:
            pump.queue.append((injection.broker, None, injection.message))
        else:
            pump.inject(injection.broker, injection.message)


def tick_moving_brokers(pump: InterleavingPump, moves: list[dict]) -> None:
    """At the last move's time, 30 rounds of a tick at each moving broker, then everything
    it sets off (moves that wait for a busy broker try again at a later round)."""
    pump.now = moves[-1]["at_us"]
    for _ in range(30):
        for move in moves:
            pump._current = move["broker"]
            pump.brokers[move["broker"]].tick(pump)
        pump._drain()


@pytest.mark.parametrize("covering", ["none", "lazy", "active"])
@pytest.mark.parametrize("seed", range(100))
def test_a_move_raced_by_every_kind_of_message_in_any_order_is_exact(covering, seed):
    """Publications, and publishers and subscribers arriving, race a move in a random order
    of deliveries that keeps links FIFO: every publication reaches exactly its subscribers,
    and those that subscribed during the move receive what is published after it."""
    rng = random.Random(f"race{seed}")
    graph = topologies.random_tree(rng.randint(8, 14), seed)
    moves = random_moves(graph, rng, 1)
    records, race, settled = racing_trace(sorted(graph), rng)
    pump = InterleavingPump(graph, protocol(covering, moves), seed)

    def start_move() -> None:
        pump.now = moves[0]["at_us"]
        pump.tick(moves[0]["broker"])

    run_race(pump, records, race, settled, start_move)
    assert [kind for kind, _ in pump.events if kind.startswith("delta_move")] == ["delta_move_started",
                                                                                  "delta_move_done"]
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)


@pytest.mark.parametrize("covering", ["none", "lazy", "active"])
@pytest.mark.parametrize("seed", range(30))
def test_three_moves_started_at_once_and_raced_in_any_order_are_exact(covering, seed):
    """Three moves whose paths may share brokers start together: those that find a broker
    busy wait (refused locks, tried again at the next tick), and all end, in any order of
    deliveries that keeps links FIFO; the race is as in the one-move test."""
    rng = random.Random(f"race2{seed}")
    graph = topologies.random_tree(rng.randint(6, 12), seed)
    moves = random_moves(graph, rng, 3)
    records, race, settled = racing_trace(sorted(graph), rng)
    pump = InterleavingPump(graph, protocol(covering, moves), seed)
    run_race(pump, records, race, settled, lambda: tick_moving_brokers(pump, moves))
    assert sorted(e["move"] for kind, e in pump.events if kind == "delta_move_done") == [0, 1, 2]
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)


def late_old_copies_and_late_news(pump, link, message) -> bool:
    """Hold, while anything else can go, a publication sent over a soft link from outside a
    move's region to one of its brokers until that broker is about to end the move (copies
    sent on the old tree arrive as late as links allow), the news that a move is over to the
    region's brokers and to every other broker, and every other publication from a client
    until its broker has heard that the moves near it are over (copies on the new tree reach
    brokers that have not heard yet)."""
    sender, broker = link
    receiver = pump.brokers[broker]
    if not sender and message.kind == "pub" and int(message.id[1:]) % 2:
        return not {spec.index for spec in receiver.zone_moves} <= receiver.finished
    if message.kind == "dmove_over":
        spec = receiver.move_specs[message.gen]
        return broker in spec.region or spec.zone.index(broker) % 2 == 1
    if message.kind != "pub" or not sender or sender in receiver.hop_index:
        return False
    for index in receiver.fallback:
        spec, move = receiver.move_specs[index], receiver.move
        if broker in spec.region and sender not in spec.region and index not in receiver.moves_done:
            return not (move is not None and move.spec.index == index and move.end_sent)
    return False


def anchored_race(name: str, seed: int, strategy: str, count: int) -> tuple[InterleavingPump, list[dict]]:
    """``count`` moves started together under ``strategy`` (delta 3, random soft links), raced
    by the racing trace in an adversarial order (late old copies and late news)."""
    rng = random.Random(f"{name}{seed}")
    graph = topologies.random_tree(rng.randint(8, 16), seed)
    moves = random_moves(graph, rng, count, delta=3)
    settings = protocol("none", moves, strategy, random_links(graph, rng, delta=3))
    settings["soft_links"]["delta"] = 3
    records, race, settled = racing_trace(sorted(graph), rng)
    pump = InterleavingPump(graph, settings, seed, slow=0.3, hold=late_old_copies_and_late_news)
    run_race(pump, records, race, settled, lambda: tick_moving_brokers(pump, moves), handled_first=30)
    return pump, records


@pytest.mark.parametrize("strategy", ["S1", "S2", "SH"])
@pytest.mark.parametrize("seed", range(60))
def test_an_anchored_move_raced_in_any_order_is_exact(strategy, seed):
    """As the one-move race, under S1/S2/SH with soft links held: copies skip brokers into,
    across and out of the moving region while it turns."""
    pump, records = anchored_race("anchored-race", seed, strategy, 1)
    assert [e["move"] for kind, e in pump.events if kind == "delta_move_done"] == [0]
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    assert not any(broker.fallback for broker in pump.brokers.values())


@pytest.mark.parametrize("strategy", ["S1", "S2", "SH"])
@pytest.mark.parametrize("seed", range(20))
def test_three_anchored_moves_raced_in_any_order_are_exact(strategy, seed):
    """Three moves at once under S1/S2/SH: moves whose zones share a broker run in order."""
    pump, records = anchored_race("anchored-race3", seed, strategy, 3)
    assert sorted(e["move"] for kind, e in pump.events if kind == "delta_move_done") == [0, 1, 2]
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)


BROKERS = 16


def publishing_trace(seed: int, publications: int = 2400, rate: float = 600.0) -> list[dict]:
    """Publishers and subscribers set up first, then publications from every publisher."""
    rng = random.Random(seed)
    brokers = [f"B{i}" for i in range(BROKERS)]
    records = [{"t": 0.0, "op": "advertise", "client": f"P{p}", "broker": rng.choice(brokers), "id": f"A{p}",
                "filter": "[class,eq,'STOCK'],[symbol,isPresent,''],[price,>,0]"} for p in range(6)]
    filters = ["[class,eq,'STOCK'],[price,>,{a}]", "[class,eq,'STOCK'],[price,>,{a}],[price,<,{b}]",
               "[class,eq,'STOCK'],[symbol,eq,'S{s}']"]
    for s in range(40):
        text = rng.choice(filters).format(a=rng.randint(1, 60), b=rng.randint(60, 100), s=rng.randint(0, 9))
        records.append({"t": 0.5, "op": "subscribe", "client": f"C{s}", "broker": rng.choice(brokers),
                        "id": f"S{s}", "filter": text})
    for i in range(publications):
        records.append({"t": round(1.0 + i / rate, 6), "op": "publish", "client": f"P{i % 6}", "id": f"M{i}",
                        "content": f"[class,'STOCK'],[symbol,'S{rng.randint(0, 9)}'],[price,{rng.randint(1, 99)}]"})
    return records


def scenario_with_moves(seed: int, covering: str, times: list[str]) -> tuple[dict, list[dict], list[dict]]:
    graph = topologies.random_tree(BROKERS, seed)
    moves = random_moves(graph, random.Random(seed), len(times))
    given = [{"at": at, "broker": m["broker"], "from": m["from"], "to": m["to"]} for at, m in zip(times, moves)]
    scenario = {
        "name": "moves", "seed": seed, "duration": "6s",
        "topology": {"generator": {"name": "random_tree", "n": BROKERS, "seed": seed}, "link": {"latency": "15ms"}},
        "workload": {"trace": "ops.jsonl"},
        "protocol": {"covering": covering, "soft_links": {"strategy": "S0", "adaptive": False, "moves": given}},
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "100ms"},
    }
    return scenario, publishing_trace(seed), moves


def run_scenario(write_scenario, tmp_path, scenario: dict, records: list[dict], *sets: str) -> dict:
    path = write_scenario(scenario, {"ops.jsonl": "\n".join(json.dumps(r) for r in records)})
    out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    assert main(["run", str(path), "--out", str(out), *(a for s in sets for a in ("--set", s))]) == 0
    return {t: read_table(out, t).to_pandas() for t in ("deliveries", "messages", "samples", "events")}


def move_times(events, kind: str) -> dict[int, int]:
    """Per move, when the event ``kind`` happened (the last time, for a move that waited)."""
    rows = events[events.kind == kind]
    return {json.loads(detail)["move"]: t for detail, t in zip(rows.detail, rows.t_us)}


def exact_with_four_moves(rows: dict, records: list[dict]) -> tuple:
    """Asserts the run delivered exactly the oracle's pairs and made its four moves; its
    events and messages."""
    pairs = list(zip(rows["deliveries"].pub_id, rows["deliveries"].sub_id))
    assert len(pairs) == len(set(pairs)), "a publication delivered twice to one subscription"
    assert set(pairs) == expected_deliveries(records)
    events = rows["events"]
    assert sorted(json.loads(d)["move"] for d in events[events.kind == "delta_move_done"].detail) == [0, 1, 2, 3]
    return events, rows["messages"]


@pytest.mark.parametrize("covering", ["none", "lazy", "active"])
@pytest.mark.parametrize("seed", [1, 3])
def test_moves_under_load_lose_and_duplicate_nothing(write_scenario, tmp_path, covering, seed):
    # two moves close together (they may share brokers: the later waits), two later on
    scenario, records, moves = scenario_with_moves(seed, covering, ["1.5s", "1.6s", "2.5s", "3.5s"])
    events, messages = exact_with_four_moves(run_scenario(write_scenario, tmp_path, scenario, records), records)
    # publications were under way while each move lasted, and later ones took the new links
    started, ended = move_times(events, "delta_move_started"), move_times(events, "delta_move_done")
    pubs = messages[messages.kind == "pub"]
    for index in range(len(moves)):
        assert ((pubs.t_arrive_us > started[index]) & (pubs.t_arrive_us < ended[index])).sum() > 20
    final = moved_tree(topologies.random_tree(BROKERS, seed), moves)
    last = pubs[(pubs.t_arrive_us > max(ended.values()) + 100_000) & pubs.sender.notna()]
    assert all(final.has_edge(s, b) for s, b in zip(last.sender, last.broker))
    initial = topologies.random_tree(BROKERS, seed)
    assert any(not initial.has_edge(s, b) for s, b in zip(last.sender, last.broker))


@pytest.mark.parametrize("strategy", ["S1", "S2", "SH"])
def test_anchored_moves_under_load_with_adaptive_links_lose_and_duplicate_nothing(write_scenario, tmp_path,
                                                                                  strategy):
    """The engine, 600 publications/s, soft links re-ranked every half second over a
    2,000 msg/s uplink, four moves: exact, and copies skip brokers before and after."""
    scenario, records, moves = scenario_with_moves(1, "none", ["1.5s", "1.6s", "2.5s", "3.5s"])
    scenario["protocol"]["soft_links"].update(
        strategy=strategy, adaptive=True, round="500ms", profile_window="400ms", block="1s")
    scenario["topology"]["uplink"] = {"capacity": 2000}
    scenario["duration"] = "12s"  # the uplinks' queues drain
    events, messages = exact_with_four_moves(run_scenario(write_scenario, tmp_path, scenario, records), records)
    initial, final = topologies.random_tree(BROKERS, 1), moved_tree(topologies.random_tree(BROKERS, 1), moves)
    pubs = messages[(messages.kind == "pub") & messages.sender.notna()]
    ended = max(move_times(events, "delta_move_done").values())
    skipped = [not (initial if t < 1_500_000 else final).has_edge(s, b)
               for s, b, t in zip(pubs.sender, pubs.broker, pubs.t_arrive_us) if t < 1_500_000 or t > ended]
    assert sum(skipped[: len(skipped) // 2]) > 50 and sum(skipped[len(skipped) // 2:]) > 50
    assert (events.kind == "soft_link_opened").sum() > 0


def test_moves_amid_subscription_churn_match_the_oracle(write_scenario, tmp_path):
    graph = topologies.random_tree(20, 2)
    records = random_mix(sorted(graph), seed=2, operations=300, spacing=0.4, moves=False)
    moves = random_moves(graph, random.Random(2), 8)
    given = [{"at": f"{12 * (i + 1)}s", "broker": m["broker"], "from": m["from"], "to": m["to"]}
             for i, m in enumerate(moves)]
    scenario = {
        "name": "churn", "seed": 2, "duration": "125s",
        "topology": {"generator": {"name": "random_tree", "n": 20, "seed": 2}, "link": {"latency": "15ms"}},
        "workload": {"trace": "ops.jsonl"},
        "protocol": {"covering": "active", "soft_links": {"strategy": "S0", "adaptive": False, "moves": given}},
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "100ms"},
    }
    rows = run_scenario(write_scenario, tmp_path, scenario, records)
    pairs = list(zip(rows["deliveries"].pub_id, rows["deliveries"].sub_id))
    assert len(pairs) == len(set(pairs)) and set(pairs) == expected_deliveries(records)
    assert (rows["events"].kind == "delta_move_done").sum() == 8


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("covering, strategy", [("active", "S0"), ("none", "SH")])
def test_identical_results_across_host_counts_with_moves(write_scenario, tmp_path, ray_session, covering, strategy):
    scenario, records, _ = scenario_with_moves(2, covering, ["1.5s", "1.6s", "2.5s"])
    scenario["protocol"]["soft_links"].update(strategy=strategy, adaptive=strategy != "S0", round="500ms",
                                              profile_window="400ms")
    scenario["duration"] = "3.5s"
    records = [r for r in records if r["t"] < 3.0]
    host_counts = (0, 2) if strategy == "S0" else (0, 2, "all")
    results = {hosts: run_scenario(write_scenario, tmp_path, scenario, records, f"runtime.hosts={hosts}")
               for hosts in host_counts}
    events = results[0]["events"]
    assert (events.kind == "delta_move_done").sum() == 3
    assert strategy == "S0" or (events.kind == "soft_link_opened").sum() > 0
    for hosts in host_counts[1:]:
        for table, rows in results[0].items():
            assert sorted_rows(results[hosts][table]) == sorted_rows(rows), (hosts, table)


def sorted_rows(frame) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in frame.to_dict("records"))
