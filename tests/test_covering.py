"""Covering (lazy, active): exact deliveries, what crosses one link, smaller tables."""
import networkx as nx
import pytest

import topologies

from workloads.generators import random_mix
from workloads.trace import compile_trace

from .oracle import Pump, expected_deliveries
from .test_broker import OVERLAYS


@pytest.mark.parametrize("mode", ["lazy", "active", "packing"])
@pytest.mark.parametrize("shape", sorted(OVERLAYS))
@pytest.mark.parametrize("seed", range(4))
def test_deliveries_equal_oracle(mode, shape, seed):
    graph = OVERLAYS[shape](5 + 11 * seed, seed)
    records = random_mix(sorted(graph), seed=seed, operations=400)
    pump = Pump(graph, {"covering": mode}).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    for broker in pump.brokers.values():
        for hop, routed in broker.routed_subs.items():
            sent, withheld = set(broker.covering_sent[hop].keys()), set(broker.covering_withheld[hop].keys())
            assert not sent & withheld and sent | withheld == set(routed), (broker.name, hop)


def link_case(mode, operations):
    """B0 (subscribers) - B1 (publisher); returns what B0 sent B1 after the setup."""
    graph = nx.path_graph(["B0", "B1"])
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B1", "id": "A", "filter": "[x,>=,0]"}]
    for i, (op, sub_id, text) in enumerate(operations, start=1):
        record = {"t": i, "op": op, "client": "S", "id": sub_id}
        if op == "subscribe":
            record.update(broker="B0", filter=text)
        records.append(record)
    pump = Pump(graph, {"covering": mode})
    pump.run(records)
    return [(kind, msg_id) for sender, _, kind, msg_id in pump.sent if sender == "B0"]


BROAD, NARROW = "[x,>,1]", "[x,>,5]"


def test_lazy_withholds_covered_and_releases_on_unsubscribe():
    sent = link_case("lazy", [("subscribe", "S1", BROAD), ("subscribe", "S2", NARROW), ("unsubscribe", "S1", None)])
    assert sent == [("sub", "S1"), ("sub", "S2"), ("unsub", "S1")]


def test_lazy_keeps_older_covered_subscriptions_downstream():
    sent = link_case("lazy", [("subscribe", "S2", NARROW), ("subscribe", "S1", BROAD)])
    assert sent == [("sub", "S2"), ("sub", "S1")]


def test_active_withdraws_what_a_new_coverer_covers():
    sent = link_case("active", [("subscribe", "S2", NARROW), ("subscribe", "S1", BROAD), ("unsubscribe", "S1", None)])
    assert sent == [("sub", "S2"), ("sub", "S1"), ("unsub", "S2"), ("sub", "S2"), ("unsub", "S1")]


@pytest.mark.parametrize("mode", ["lazy", "active"])
def test_subscription_covered_twice_is_released_when_both_are_gone(mode):
    sent = link_case(mode, [("subscribe", "S1", "[x,>,1]"), ("subscribe", "S2", "[x,>,2]"),
                            ("subscribe", "S3", "[x,>,5]"), ("unsubscribe", "S1", None),
                            ("unsubscribe", "S2", None)])
    # S3 stays withheld behind S2 when S1 goes, and is released only when S2 goes too
    assert sent == [("sub", "S1"), ("sub", "S2"), ("unsub", "S1"), ("sub", "S3"), ("unsub", "S2")]


@pytest.mark.parametrize("mode", ["lazy", "active"])
def test_identical_subscriptions_travel_once(mode):
    sent = link_case(mode, [("subscribe", "S1", BROAD), ("subscribe", "S2", BROAD), ("unsubscribe", "S1", None)])
    assert sent == [("sub", "S1"), ("sub", "S2"), ("unsub", "S1")]


def test_released_subscriptions_name_their_cause():
    graph = nx.path_graph(["B0", "B1"])
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B1", "id": "A", "filter": "[x,>=,0]"},
               {"t": 1, "op": "subscribe", "client": "S", "broker": "B0", "id": "S1", "filter": BROAD},
               {"t": 2, "op": "subscribe", "client": "S", "broker": "B0", "id": "S2", "filter": NARROW},
               {"t": 3, "op": "unsubscribe", "client": "S", "id": "S1"}]
    pump = Pump(graph, {"covering": "active"})
    messages = []
    original = pump.send
    pump.send = lambda destination, message: (messages.append(message), original(destination, message))
    pump.run(records)
    assert [(m.kind, m.id, m.cause) for m in messages if m.kind in ("sub", "unsub")] == [
        ("sub", "S1", None), ("sub", "S2", "S1"), ("unsub", "S1", None)]


def test_covering_shrinks_routing_tables():
    graph = topologies.random_tree(30, 3)
    records = [r for r in random_mix(sorted(graph), seed=5, operations=600, subscribers=30, moves=False)
               if r["op"] != "unsubscribe"]
    sizes = {}
    for mode in ("none", "lazy", "active"):
        pump = Pump(graph, {"covering": mode}).run(records)
        sizes[mode] = sum(b.prt_size for b in pump.brokers.values())
    assert sizes["active"] < sizes["lazy"] < sizes["none"]


def burst_records(n_covered: int) -> list[dict]:
    """A broad subscription covering ``n_covered`` disjoint narrow ones (so all of them are
    released when it goes), then a publication for each narrow one."""
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B3", "id": "A", "filter": "[x,>=,0]"},
               {"t": 1, "op": "subscribe", "client": "S", "broker": "B0", "id": "ROOT", "filter": "[x,>,0]"}]
    records += [{"t": 2 + i, "op": "subscribe", "client": f"C{i}", "broker": "B0", "id": f"N{i}",
                 "filter": f"[x,>=,{i + 1}],[x,<,{i + 2}]"} for i in range(n_covered)]
    t = 3 + n_covered
    records.append({"t": t, "op": "unsubscribe", "client": "S", "id": "ROOT"})
    records += [{"t": t + 1 + i, "op": "publish", "client": "P", "id": f"M{i}", "content": f"[x,{i + 1.5}]"}
                for i in range(n_covered)]
    return records


def test_packing_sends_the_burst_as_one_batch_per_link_and_delivers_the_same():
    graph = nx.path_graph(["B0", "B1", "B2", "B3"])
    records = burst_records(10)
    burst = {}
    for mode in ("active", "packing"):
        pump = Pump(graph, {"covering": mode})
        injections = compile_trace(records, graph)
        for injection in injections[:-11]:
            pump.inject(injection.broker, injection.message)
        before = len(pump.sent)
        for injection in injections[-11:]:
            pump.inject(injection.broker, injection.message)
        burst[mode] = [(kind, msg_id) for _, _, kind, msg_id in pump.sent[before:] if kind != "pub"]
        assert sorted(pump.deliveries) == sorted(expected_deliveries(records))
        assert len(pump.deliveries) == 10
    # per link: ten released subscriptions and the unsubscription, or one batch and the unsubscription
    assert sorted(burst["active"]) == sorted([("sub", f"N{i}") for i in range(10)] * 3 + [("unsub", "ROOT")] * 3)
    assert burst["packing"] == [("sub_batch", "ROOT"), ("unsub", "ROOT")] * 3
