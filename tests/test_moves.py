"""Moving subscribers get each publication at most once, and exactly once while settled.

The workload sets up publishers and subscribers first, then publishes from every publisher
while the subscribers keep moving between brokers, over long links and through queues, so
that publications are in flight at every move. A subscription is settled from the end of its
(re)subscription's travel (the last broker to handle its `sub` after the move) until its next
move; every publication published then must reach it exactly once.
"""
import json
import random

import pytest

from actors.results import read_table
from experiments.cli import main
from topologies import random_tree

from .oracle import Pump, expected_deliveries

BROKERS = 16
FILTERS = ["[class,eq,'STOCK'],[price,>,{a}]", "[class,eq,'STOCK'],[price,>,{a}],[price,<,{b}]",
           "[class,eq,'STOCK'],[symbol,eq,'S{s}']"]


def moving_trace(seed: int, subscribers: int = 30, publications: int = 3000, rate: float = 600.0) -> list[dict]:
    rng = random.Random(seed)
    brokers = [f"B{i}" for i in range(BROKERS)]
    records = [{"t": 0.0, "op": "advertise", "client": f"P{p}", "broker": rng.choice(brokers), "id": f"A{p}",
                "filter": "[class,eq,'STOCK'],[symbol,isPresent,''],[price,>,0]"} for p in range(4)]
    for s in range(subscribers):
        text = rng.choice(FILTERS).format(a=rng.randint(1, 60), b=rng.randint(60, 100), s=rng.randint(0, 9))
        records.append({"t": 0.5, "op": "subscribe", "client": f"C{s}", "broker": rng.choice(brokers),
                        "id": f"S{s}", "filter": text})
    start, ops = 1.0, []
    for i in range(publications):
        content = f"[class,'STOCK'],[symbol,'S{rng.randint(0, 9)}'],[price,{rng.randint(1, 99)}]"
        ops.append((start + i / rate, "publish", f"P{i % 4}", {"id": f"M{i}", "content": content}))
    end = start + publications / rate
    for s in range(subscribers):
        t = start + rng.uniform(0, 0.3)
        while t < end:
            ops.append((t, "move", f"C{s}", {"broker": rng.choice(brokers)}))
            t += rng.uniform(0.1, 0.6)
    ops.sort(key=lambda op: op[0])
    records += [{"t": round(t, 6), "op": op, "client": client, **fields} for t, op, client, fields in ops]
    return records


def settled_pairs(records: list[dict], messages) -> set[tuple[str, str]]:
    """The oracle's pairs whose publication was published while its subscriber was settled."""
    subs_of, moves = {}, {}
    for r in records:
        if r["op"] == "subscribe":
            subs_of.setdefault(r["client"], []).append(r["id"])
        elif r["op"] == "move":
            moves.setdefault(r["client"], []).append(round(r["t"] * 1e6))
    handled = messages[messages.kind == "sub"].groupby("msg_id")
    windows = {}
    for client, sub_ids in subs_of.items():
        cuts = moves.get(client, [])
        for sub_id in sub_ids:
            rows = handled.get_group(sub_id)
            spans = [(0, cuts[0] if cuts else None)]
            for move, following in zip(cuts, cuts[1:] + [None]):
                travel = rows[(rows.t_arrive_us >= move) & ((rows.t_arrive_us < following) if following else True)]
                spans.append((int(travel.t_end_us.max()) if len(travel) else move, following))
            windows[sub_id] = spans
    published = {r["id"]: round(r["t"] * 1e6) for r in records if r["op"] == "publish"}
    return {(pub, sub) for pub, sub in expected_deliveries(records)
            if any(since <= published[pub] and (until is None or published[pub] < until)
                   for since, until in windows[sub])}


def run_moving(write_scenario, tmp_path, protocol: dict, seed: int = 1):
    records = moving_trace(seed)
    scenario = {
        "name": "moving", "seed": seed,
        "topology": {"generator": {"name": "random_tree", "n": BROKERS, "seed": seed}, "link": {"latency": "15ms"}},
        "workload": {"trace": "ops.jsonl"},
        "protocol": protocol,
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "1s"},
    }
    trace = "\n".join(json.dumps(r) for r in records)
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(scenario, {"ops.jsonl": trace})), "--out", str(out)]) == 0
    return records, out


@pytest.mark.parametrize("protocol", [
    {"covering": "none"},
    {"covering": "active"},
    {"covering": "packing"},
    {"covering": "active", "pruning": {"variant": "selective"}},
    {"covering": "active", "pruning": {"variant": "incremental"}},
], ids=["none", "active", "packing", "selective", "incremental"])
def test_moving_subscribers_get_each_publication_once(write_scenario, tmp_path, protocol):
    records, out = run_moving(write_scenario, tmp_path, protocol)
    deliveries = read_table(out, "deliveries").to_pandas()
    messages = read_table(out, "messages").to_pandas()
    pairs = list(zip(deliveries.pub_id, deliveries.sub_id))
    assert len(pairs) == len(set(pairs)), "a publication delivered twice to one subscription"
    expected = expected_deliveries(records)
    assert set(pairs) <= expected
    settled = settled_pairs(records, messages)
    assert settled <= set(pairs)
    moves = sum(r["op"] == "move" for r in records)
    assert moves > 400 and len(settled) > 0.6 * len(expected) > 10_000
    # the moves raced publications: flushes held old subscriptions while copies were in flight
    assert messages.queue_len.max() >= 5
    drained = [json.loads(d) for d in read_table(out, "events").to_pandas().query("kind == 'move_drained'").detail]
    assert len(drained) == moves
    assert_one_marker_out_per_link(messages)


def assert_one_marker_out_per_link(messages) -> None:
    """On every link, each flush marker is answered before the next one arrives: moves that
    overlap share markers instead of each sending its own."""
    markers = messages[messages.kind == "move_flush"]
    answers = messages[messages.kind == "move_flushed"]
    for (sender, broker), sent in markers.groupby(["sender", "broker"]):
        arrived = sorted(sent.t_arrive_us)
        answered = sorted(answers[(answers.sender == broker) & (answers.broker == sender)].t_arrive_us)
        assert len(answered) == len(arrived)
        for i, (marker, answer) in enumerate(zip(arrived, answered)):
            assert marker < answer and (i + 1 == len(arrived) or answer <= arrived[i + 1])


@pytest.mark.parametrize("stack", ["active", "incremental"])
def test_moves_in_the_sync_pump_deliver_exactly_the_oracle(stack):
    """Without time every flush completes at once: exactly the oracle's pairs, once each."""
    graph = random_tree(BROKERS, seed=3)
    protocol = {"covering": "active"}
    if stack == "incremental":
        protocol["pruning"] = {"variant": "incremental"}
    records = moving_trace(2, subscribers=20, publications=600)
    pump = Pump(graph, protocol).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    flushes = [s for s in pump.sent if s[2] == "move_flush"]
    assert len(flushes) > 0 and len(flushes) == sum(s[2] == "move_flushed" for s in pump.sent)
