"""The base broker against the brute-force oracle on random overlays and workloads."""
import dataclasses
import random

import networkx as nx
import pytest

import topologies
from protocols.messages import Message
from workloads.generators import random_mix

from .oracle import Pump, expected_deliveries


OVERLAYS = {
    "line": lambda n, seed: topologies.line(n),
    "star": lambda n, seed: topologies.star(n),
    "tree": topologies.random_tree,
}


@pytest.mark.parametrize("shape", sorted(OVERLAYS))
@pytest.mark.parametrize("seed", range(6))
def test_deliveries_equal_oracle(shape, seed):
    n = random.Random(f"{shape}{seed}").randint(2, 60)
    graph = OVERLAYS[shape](n, seed)
    records = random_mix(sorted(graph), seed=seed, operations=300)
    pump = Pump(graph).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries)), "duplicate deliveries"
    expected = expected_deliveries(records)
    assert set(pump.deliveries) == expected
    assert len(expected) > 20  # the workload really delivers something


def test_tables_empty_after_everything_is_withdrawn():
    graph = topologies.random_tree(20, 1)
    records = random_mix(sorted(graph), seed=4, operations=200)
    held_subs = {r["id"]: r["client"] for r in records if r["op"] == "subscribe"}
    held_advs = {r["id"]: r["client"] for r in records if r["op"] == "advertise"}
    for r in records:
        if r["op"] == "unsubscribe":
            del held_subs[r["id"]]
        if r["op"] == "unadvertise":
            del held_advs[r["id"]]
    t = records[-1]["t"] + 1
    records += [{"t": t, "op": "unsubscribe", "client": c, "id": i} for i, c in held_subs.items()]
    records += [{"t": t, "op": "unadvertise", "client": c, "id": i} for i, c in held_advs.items()]
    pump = Pump(graph).run(records)
    for broker in pump.brokers.values():
        assert broker.prt_size == 0 and broker.srt_size == 0, broker.name
        assert all(not routed for routed in broker.routed_subs.values())


def test_unadvertise_keeps_the_clients_own_subscriptions():
    graph = nx.path_graph(["B0", "B1", "B2"])
    records = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A1", "filter": "[x,>,0]"},
        {"t": 1, "op": "subscribe", "client": "S", "broker": "B2", "id": "S1", "filter": "[x,>,5]"},
        {"t": 2, "op": "unadvertise", "client": "P", "id": "A1"},
        {"t": 3, "op": "advertise", "client": "P", "id": "A2", "filter": "[x,>,1]"},
        {"t": 4, "op": "publish", "client": "P", "id": "M1", "content": "[x,7]"},
    ]
    pump = Pump(graph).run(records)
    assert pump.deliveries == [("M1", "S1")]
    # while A1 was gone, S1 was withdrawn from B1 and B0 and stayed only at its own broker
    assert ("B2", "B1", "unsub", "S1") in pump.sent and ("B1", "B0", "unsub", "S1") in pump.sent


def test_publication_hops_and_nonconforming_drop():
    graph = nx.path_graph(["B0", "B1", "B2", "B3"])
    records = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A1", "filter": "[x,>,0]"},
        {"t": 1, "op": "subscribe", "client": "S", "broker": "B3", "id": "S1", "filter": "[x,>,5]"},
        {"t": 2, "op": "publish", "client": "P", "id": "M1", "content": "[x,7]"},
        {"t": 3, "op": "publish", "client": "P", "id": "M2", "content": "[x,7],[y,1]"},
    ]
    pump = Pump(graph)
    hops = []
    pump.deliver = lambda pub, sub_id, client: hops.append((pub.id, pub.hops))
    pump.run(records)
    assert hops == [("M1", 3)]
    assert pump.events == [("nonconforming_publication", {"pub_id": "M2", "client": "P"})]


def test_a_forwarded_copy_differs_only_in_hops():
    """``forwarded`` builds the copy field by field (faster than ``replace``): it must keep up
    with every field of ``Message``."""
    values = {f.name: f"{f.name}-value" for f in dataclasses.fields(Message)}
    values["hops"] = 4
    message = Message(**values)
    assert message.forwarded() == dataclasses.replace(message, hops=5)


@pytest.mark.parametrize("protocol", [
    {}, {"covering": "lazy"}, {"covering": "packing"},
    {"covering": "active", "pruning": {"variant": "selective", "min_count": 0}},
], ids=["base", "lazy", "packing", "selective"])
def test_brokers_pickled_midway_carry_on_identically(protocol):
    """Host snapshots pickle brokers of composed classes; a restored network behaves the same."""
    import pickle

    from workloads.trace import compile_trace

    graph = OVERLAYS["tree"](15, 1)
    records = random_mix(sorted(graph), seed=1, operations=300)
    straight, resumed = Pump(graph, protocol), Pump(graph, protocol)
    injections = list(compile_trace(records, straight.brokers))
    for pump, cut in ((straight, None), (resumed, len(injections) // 2)):
        for i, injection in enumerate(injections):
            if i == cut:
                pump.brokers = pickle.loads(pickle.dumps(pump.brokers))
            pump.now = injection.t_us
            pump.inject(injection.broker, injection.message)
    assert resumed.deliveries == straight.deliveries and resumed.sent == straight.sent
    assert set(straight.deliveries) == expected_deliveries(records)
