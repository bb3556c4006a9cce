"""Publisher relocation (POP, GRAPE): exact deliveries while publishers migrate, the selection
rules on hand-built trees, and identical results across host counts."""
import dataclasses
import itertools
import json
from collections import defaultdict
from types import SimpleNamespace

import networkx as nx
import pytest

from actors.results import read_table
from actors.storage import RunDir
from experiments.check import check
from experiments.cli import main
from protocols.language import parse_publication
from protocols.messages import Message
from protocols.relocation import BrokerTrace, RelocationSettings, grape_choice, grape_scores, pop_next
from protocols.routing import LOCAL
from protocols.stack import make_broker
from workloads.generators import GENERATORS

from .conftest import PROJECT_ROOT
from .oracle import Pump, expected_deliveries, scenario_records

SCENARIOS = PROJECT_ROOT / "experiments" / "scenarios"


def protocol(covering: str = "none", pruning: dict | None = None, **relocation) -> dict:
    return {"covering": covering, "pruning": pruning,
            "relocation": dataclasses.asdict(RelocationSettings(**relocation))}


# ---------------------------------------------------------------------- selection rules

# O - A, A - B, A - C; three traced publications: B delivered #0 and #1 (twice), C #2
TREE = [
    BrokerTrace("O", None, 0b000, 0, 0, 0),
    BrokerTrace("A", "O", 0b000, 0, 2, 10),
    BrokerTrace("B", "A", 0b011, 2, 30, 10),
    BrokerTrace("C", "A", 0b100, 1, 4, 1),
]


def test_grape_scores_count_the_smallest_subtrees_and_the_delays_by_hand():
    scores = grape_scores(TREE)
    assert {name: messages for name, (messages, _) in scores.items()} == {"O": 6, "A": 3, "B": 2, "C": 4}
    # from A: to B 2 + (10 + 30) twice, to C 2 + (1 + 4) once
    delays = {name: delay for name, (_, delay) in scores.items()}
    assert delays == pytest.approx({"O": 121 / 3, "A": 91 / 3, "B": 107 / 3, "C": 98 / 3})


@pytest.mark.parametrize("metric, weight, expected", [
    ("load", 100, "B"),  # the lowest load
    ("delay", 100, "A"),  # the lowest delay
    ("load", 0, "A"),  # every candidate kept: the lowest delay
    ("load", 60, "A"),  # loads within 40% of the range from the best: B (2) and A (3); A has the lower delay
    ("load", 80, "B"),  # within 20%: B alone
    ("delay", 0, "B"),  # every candidate kept: the lowest load
])
def test_grape_keeps_the_candidates_within_the_weight_then_takes_the_best_other_metric(metric, weight, expected):
    assert grape_choice(grape_scores(TREE), metric, weight, current="O") == expected


def test_grape_stays_put_on_a_tie():
    scores = {"O": (3, 5.0), "A": (3, 5.0)}
    assert grape_choice(scores, "load", 100, current="O") == "O"
    assert grape_choice(scores, "load", 100, current="A") == "A"


def test_pop_next_closest_broker_outweighs_everything_else():
    assert pop_next({LOCAL: 1, 0: 5, 1: 3}, None, 0) == 0  # 5 > 1 + 3
    assert pop_next({LOCAL: 1, 0: 5, 1: 3}, None, 1) is None  # 5 is not above 1 + 3 + 1
    assert pop_next({LOCAL: 0, 0: 9, 1: 4}, came_from=0, upstream=2) == 1  # the walk's origin side is upstream
    assert pop_next({}, None, 0) is None


def test_hysteresis_asks_a_move_to_gain_its_margin():
    """Ours, off by default (the paper has no damping): POP's neighbour must exceed the rest by
    more than the margin, GRAPE's choice must improve the current broker's primary metric by more."""
    assert pop_next({LOCAL: 1, 0: 5, 1: 3}, None, 0, hysteresis=20) == 0  # 5 > 4 * 1.2
    assert pop_next({LOCAL: 1, 0: 5, 1: 3}, None, 0, hysteresis=30) is None  # 5 is not above 4 * 1.3
    scores = {"O": (10, 2.0), "A": (8, 3.0)}
    assert grape_choice(scores, "load", 100, current="O") == "A"
    assert grape_choice(scores, "load", 100, current="O", hysteresis=15) == "A"  # 8 < 10 * 0.85
    assert grape_choice(scores, "load", 100, current="O", hysteresis=25) == "O"  # 8 is not below 10 * 0.75
    assert grape_choice(scores, "delay", 100, current="A", hysteresis=25) == "O"  # 2.0 < 3.0 * 0.75
    for key, value in (("hysteresis", 100), ("hysteresis", -1), ("average_weight", 0), ("average_weight", 1.5),
                       ("average_weight", "median")):
        with pytest.raises(ValueError, match=key):
            RelocationSettings.parse({key: value}, None)
    assert RelocationSettings.parse({"average_weight": "mean"}, None).average_weight is None


def test_under_a_steady_workload_the_papers_pop_keeps_moving_and_a_mean_with_a_margin_settles(tmp_path):
    """The test-sized enterprise scenario run for 90 s at a steady rate (traces of 10): the
    paper's POP moves its publishers to the end, its running averages following the last few
    traced publications, whose subscriber counts are heavy-tailed; with every trace averaged
    alike and a 20% margin (ours) POP's publishers, and GRAPE's with the margin, stop moving
    within the first 40 s. Every run stays exact."""
    late = {}
    for label, scenario, options in (
            ("paper", "pop", []),
            ("mean_margin", "pop", ["protocol.relocation.average_weight=mean", "protocol.relocation.hysteresis=20"]),
            ("grape_margin", "grape_load", ["protocol.relocation.hysteresis=20"])):
        out = tmp_path / label
        assert main(["run", str(SCENARIOS / f"relocation_small_enterprise_{scenario}.yaml"), "--out", str(out),
                     "--set", "workload.generator.publications=435", "--set", "duration=90s",
                     *[arg for option in options for arg in ("--set", option)]]) == 0
        events = read_table(out, "events").to_pandas()
        moves = events[events.kind == "publisher_migrated"]
        late[label] = int((moves.t_us >= 40_000_000).sum())
        assert len(moves) > 0 and check(RunDir(out))["exact"], label
    assert late == {"paper": late["paper"], "mean_margin": 0, "grape_margin": 0} and late["paper"] > 16


def test_pop_walks_to_the_next_closest_broker_and_the_publisher_resumes_there():
    # B0 - B1 - B2 - B3 and B1 - B4; 1 subscriber at B2, 3 at B3, 2 at B4: the walk goes
    # B0 -> B1 (6 > 0) -> B2 (4 > 2 + 0 behind) and stops (3 is not above 1 local + 2 behind)
    graph = nx.Graph([("B0", "B1"), ("B1", "B2"), ("B2", "B3"), ("B1", "B4")])
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"}]
    for i, broker in enumerate(["B2", "B3", "B3", "B3", "B4", "B4"]):
        records.append({"t": 1, "op": "subscribe", "client": f"S{i}", "broker": broker, "id": f"S{i}",
                        "filter": "[x,>,0]"})
    records += [{"t": 2 + i, "op": "publish", "client": "P", "id": f"M{i}", "content": f"[x,{i + 1}]"}
                for i in range(12)]
    pump = Pump(graph, protocol(algorithm="pop", trace_threshold=5)).run(records)
    migrated = [detail for kind, detail in pump.events if kind == "publisher_migrated"]
    assert [(m["origin"], m["target"]) for m in migrated] == [("B0", "B2")]
    assert sorted(pump.deliveries) == sorted(expected_deliveries(records))
    # from the 6th publication on the publisher publishes at B2: no copy of M5 reaches B0
    assert not [s for s in pump.sent if s[1] == "B0" and s[2:] == ("pub", "M5")]
    assert pump.brokers["B2"].advs[("A", 0)].last_hop is None
    assert pump.brokers["B0"].advs[("A", 0)].last_hop == "B1"


def traced_per_window(trace_cap, rate: int = 5, windows: int = 4) -> list[int]:
    """POP at one broker: a publisher publishing ``rate`` a second for ``windows`` windows of
    60 s; how many of its publications each window traces (selection never starts)."""
    broker = make_broker("B0", [], protocol(algorithm="pop", trace_threshold=10 ** 9, trace_cap=trace_cap))
    counts = [0] * windows
    for i in range(windows * 60 * rate):
        now = i * 1_000_000 // rate
        message = Message("pub", f"M{i}", publication=parse_publication("[x,1]"), client="P", t_pub=now)
        traced = broker._traced_at_source(broker._publisher("P", SimpleNamespace(now=now)), message,
                                          SimpleNamespace(now=now))
        counts[now // 60_000_000] += traced.header("trace") is not None
    return counts


def test_pop_traces_at_most_its_cap_in_a_window_as_the_paper_specifies():
    """The paper's rule: a publication traced with probability 1 - T/N, T traced so far in
    the window, N = 50: at most 50 a window, most of them; the earlier rule (N the previous
    window's publications) traced every one of the first window and about 63% after."""
    capped = traced_per_window(50)
    assert all(40 <= count <= 50 for count in capped), capped
    assert all(count <= 10 for count in traced_per_window(10))
    earlier = traced_per_window(None)
    assert earlier[0] == 300 and all(150 <= count <= 230 for count in earlier[1:]), earlier
    with pytest.raises(ValueError, match="trace_cap"):
        RelocationSettings.parse({"trace_cap": 0}, None)
    assert RelocationSettings.parse({"trace_cap": "previous_window"}, None).trace_cap is None


def test_trace_state_counts_the_values_each_record_holds():
    from protocols.relocation import _PopTrace, _SessionRecord

    broker = make_broker("B0", ["B1", "B2"], protocol(algorithm="pop"))
    assert broker.trace_state() == 0 and broker.protocol_samples()["trace_state"] == 0
    broker._publisher("P", SimpleNamespace(now=0))  # 13 fields, from its name to its session index
    broker.pop_traces["M1"] = _PopTrace("P", "B1", 2, {"B2"}, {1: 3})  # client, upstream, local, 1 waiting, 1 count
    broker.pop_averages["P"] = ("B1", 4, {1: 1.5, LOCAL: 2.0})  # where from, how many, 2 averages
    # parent, latency, deliveries, processing, traced, a 71-bit vector (2 words), 1 child
    broker.grape_sessions["s"] = _SessionRecord("B1", 10, {"B2"}, delivered=(1 << 70) | 1)
    broker.grape_collecting["s"] = ({"B2"}, [BrokerTrace("B2", "B0", 0b1, 1, 3.0, 10)])  # 1 waited for, 6 values
    assert broker.trace_state() == 13 + 5 + 4 + 8 + 7


# ---------------------------------------------------------------------- exact deliveries


def quotes(brokers, seed: int, **params) -> list[dict]:
    params = {"symbols": 6, "subscribers": 80, "publications": 40, "publish_interval": 0.5,
              "distribution": "enterprise", **params}
    return GENERATORS["stock_quotes"](brokers, seed=seed, **params)


@pytest.mark.parametrize("algorithm", ["grape", "pop"])
@pytest.mark.parametrize("covering, pruning", [
    ("none", None), ("lazy", None), ("active", None), ("packing", None), ("active", {"variant": "selective"}),
])
@pytest.mark.parametrize("seed", range(3))
def test_deliveries_equal_oracle_while_publishers_migrate(algorithm, covering, pruning, seed):
    from protocols.pruning import PruningSettings

    from topologies import random_tree

    graph = random_tree(14, seed)
    records = quotes(sorted(graph), seed)
    pruned = None if pruning is None else dataclasses.asdict(PruningSettings(**pruning))
    pump = Pump(graph, protocol(covering, pruned, algorithm=algorithm, trace_threshold=6)).run(records)
    assert any(kind == "publisher_migrated" for kind, _ in pump.events)
    assert sorted(pump.deliveries) == sorted(expected_deliveries(records))


@pytest.mark.parametrize("algorithm", ["grape", "pop"])
@pytest.mark.parametrize("distribution", ["enterprise", "random"])
def test_subscribers_on_few_brokers_draw_the_publishers_to_them(algorithm, distribution):
    """The paper's X: with every subscriber on one broker, each publisher ends its migrations
    there; on four brokers deliveries stay exact; on a random tree and on a fanout-4 tree cut
    to 15 brokers."""
    from topologies import balanced_tree, random_tree

    for graph, x in itertools.product((random_tree(14, 1), balanced_tree(4, 2, brokers=15)), (1, 4)):
        records = quotes(sorted(graph), 1, subscriber_brokers=x, distribution=distribution)
        pump = Pump(graph, protocol("active", algorithm=algorithm, trace_threshold=6)).run(records)
        assert sorted(pump.deliveries) == sorted(expected_deliveries(records)), x
        ends = {d["publisher"]: d["target"] for kind, d in pump.events if kind == "publisher_migrated"}
        if x == 1:
            publishers = {r["client"] for r in records if r["op"] == "advertise"}
            (gathering,) = {r["broker"] for r in records if r["op"] == "subscribe"}
            assert set(ends) == publishers and set(ends.values()) == {gathering}


def test_a_fanout_four_tree_holds_the_binary_trees_63_brokers():
    """The paper compares fanouts 2 and 4 at one broker count: the fanout-4 tree keeps its
    first 63 brokers breadth first (root, 4, 16, then 42 of the last level's 64)."""
    import topologies

    tree = topologies.balanced_tree(fanout=4, depth=3, brokers=63)
    assert nx.is_tree(tree) and sorted(tree) == sorted(topologies.balanced_tree(fanout=2, depth=5))
    depth = nx.shortest_path_length(tree, "B0")
    assert [sum(1 for d in depth.values() if d == level) for level in range(4)] == [1, 4, 16, 42]
    assert all(tree.degree(b) <= 5 for b in tree) and tree.degree("B0") == 4


def relocation_scenario(algorithm: str = "grape", covering: str = "active", brokers_depth: int = 3,
                        publish_interval: float = 0.02) -> dict:
    """Publications 20 ms apart, migrations of several hops over 2 ms links: publishers pause
    while they publish, and their waiting publications follow them."""
    return {
        "name": "relocation",
        "seed": 3,
        "topology": {"generator": {"name": "balanced_tree", "fanout": 2, "depth": brokers_depth},
                     "link": {"latency": "2ms"}},
        "workload": {"generator": {"name": "stock_quotes", "symbols": 8, "subscribers": 120, "publications": 80,
                                   "publish_interval": publish_interval, "distribution": "enterprise"}},
        "protocol": {"covering": covering, "relocation": {"algorithm": algorithm, "trace_threshold": 10}},
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "0.5s"},
    }


def run_rows(tmp_path, path, name: str, *overrides: str) -> dict:
    from actors.results import read_table
    from experiments.cli import main

    out = tmp_path / name
    sets = [arg for value in overrides for arg in ("--set", value)]
    assert main(["run", str(path), "--out", str(out), *sets]) == 0
    return {t: read_table(out, t).to_pylist() for t in ("deliveries", "messages", "samples", "events")}


@pytest.mark.parametrize("algorithm, covering", [
    ("grape", "none"), ("grape", "active"), ("grape", "packing"), ("pop", "active"), ("pop", "lazy"),
])
def test_migrations_lose_duplicate_and_reorder_nothing(write_scenario, tmp_path, algorithm, covering):
    scenario = relocation_scenario(algorithm, covering)
    path = write_scenario(scenario)
    rows = run_rows(tmp_path, path, "run")
    pairs = [(d["pub_id"], d["sub_id"]) for d in rows["deliveries"]]
    assert len(pairs) == len(set(pairs)) and set(pairs) == expected_deliveries(scenario_records(path))
    received = defaultdict(list)  # (subscription, publisher) -> quote numbers in delivery order
    for d in sorted(rows["deliveries"], key=lambda d: (d["t_deliver_us"], d["pub_id"])):
        symbol, number = d["pub_id"].rsplit("-", 1)
        received[(d["sub_id"], symbol)].append(int(number))
    assert all(numbers == sorted(numbers) for numbers in received.values())
    migrations = [json.loads(e["detail"]) for e in rows["events"] if e["kind"] == "publisher_migrated"]
    assert migrations and all(m["t_end_us"] > m["t_start_us"] for m in migrations)
    published_while_paused = [
        d for d in rows["deliveries"] for m in migrations
        if d["pub_id"].startswith(m["publisher"].removeprefix("P-") + "-") and m["t_start_us"] < d["t_pub_us"] < m["t_end_us"]
    ]
    assert published_while_paused, "no publication waited for a migration to end"
    kinds = {m["kind"] for m in rows["messages"]}
    assert {"migration_adv", "migration_done"} <= kinds
    assert ({"trace_collect", "trace_report"} if algorithm == "grape" else {"trace_reply", "pop_walk"}) <= kinds
    states = [s["trace_state"] for s in rows["samples"]]
    assert None not in states and max(states) > 0


@pytest.mark.ray
@pytest.mark.slow
def test_identical_results_across_host_counts_with_publishers_migrating(write_scenario, tmp_path, ray_session):
    from actors.results import read_table

    scenario = relocation_scenario("grape", "active", brokers_depth=2)  # 7 brokers: hosts "all" is 7 actors
    scenario["workload"]["generator"].update(subscribers=60, publications=40, start=2.0)
    path = write_scenario(scenario)
    results = {hosts: run_rows(tmp_path, path, f"hosts-{hosts}", f"runtime.hosts={hosts}") for hosts in (0, 2, "all")}
    migrations = [json.loads(e["detail"]) for e in results[0]["events"] if e["kind"] == "publisher_migrated"]
    host = {r["broker"]: r["host"] for r in read_table(tmp_path / "hosts-2", "brokers").to_pylist()}
    assert any(host[m["origin"]] != host[m["target"]] for m in migrations), "no migration crossed hosts"
    for hosts in (2, "all"):
        for table, rows in results[0].items():
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(results[hosts][table], key=key) == sorted(rows, key=key), f"{table}, hosts={hosts}"


@pytest.mark.parametrize("faults, migrating_off", [
    # B10 slowed while its publishers migrate off it; B5's publisher migrates off it before B5
    # crashes; a link goes down long after: faults pending at every migration
    ([{"t": "4s", "kind": "slow", "broker": "B10", "factor": 3, "until": "7s"},
      {"t": "5.3s", "kind": "crash", "broker": "B5", "restart_after": "1s"},
      {"t": "9s", "kind": "link_down", "a": "B1", "b": "B3", "until": "10s"}], {"B10", "B5"}),
    # B4 crashes while its publisher's migration is under way and while it relays two others:
    # the paused publisher goes to its target, the relayed migrations are sent again at B4's
    # restart, which holds none of their advertisements
    ([{"t": "5.212s", "kind": "crash", "broker": "B4", "restart_after": "1s"},
      {"t": "9s", "kind": "link_down", "a": "B1", "b": "B3", "until": "10s"}], set()),
], ids=["slow-and-pending-crash", "crash-mid-migration"])
def test_publishers_migrating_through_faults_deliver_exactly_outside_them(write_scenario, tmp_path, faults,
                                                                        migrating_off):
    scenario = relocation_scenario("grape", "active")
    scenario.update(duration="12s", faults=faults)
    rows = run_rows(tmp_path, write_scenario(scenario), "run")
    migrated = [json.loads(e["detail"]) for e in rows["events"] if e["kind"] == "publisher_migrated"]
    assert migrating_off <= {m["origin"] for m in migrated if 5_000_000 < m["t_start_us"] < 5_300_000}
    result = check(RunDir(tmp_path / "run"))
    assert result["exact"], result
    assert {k for k, v in result["excused"].items() if v} == {"fault"}
    if not migrating_off:  # the publisher paused at B4 publishes at B9 from the crash on
        sent_at = {m["broker"] for m in rows["messages"] if m["sender"] is None and m["msg_id"].startswith("S006-")
                   and m["t_arrive_us"] > 5_212_000}
        assert sent_at == {"B9"}
        resent = [m for m in rows["messages"] if m["kind"] == "migration_adv" and m["t_arrive_us"] > 6_212_000]
        assert {m["broker"] for m in resent} == {"B4", "B9"} and len(resent) == 4


def test_grape_load_gathers_the_publishers_at_the_high_rated_broker_and_delay_at_their_median(tmp_path, monkeypatch):
    """``bench_relocation.py --placements`` on the test-sized enterprise runs: GRAPE load puts
    more publishers on H than static does and cuts the hops to H; GRAPE delay ends its
    publishers nearer their deliveries' weighted median than static's are."""
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "bench"))
    import bench_relocation

    where = {}
    for setting in ("static", "grape_load", "grape_delay"):
        out = tmp_path / setting
        assert main(["run", str(SCENARIOS / f"relocation_small_enterprise_{setting}.yaml"), "--out", str(out),
                     "--set", "runtime.hosts=0"]) == 0
        where[setting] = bench_relocation.placements(out, json.loads((out / "manifest.json").read_text()))
    static, load, delay = where["static"], where["grape_load"], where["grape_delay"]
    assert load["at_h"] > static["at_h"] and load["from_h"] < static["from_h"]
    assert load["high_hops"] < static["high_hops"] / 2
    assert delay["from_median"] < static["from_median"] / 2
