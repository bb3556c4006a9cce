"""Pruning (selective, incremental): exact deliveries, critical distances, the propagation rule
on a hand-made line, settings validation, and the small burst scenarios against active covering."""
import networkx as nx
import numpy as np
import pytest

import topologies
from protocols.language import parse_filter
from protocols.pruning import DeliveryWindows, PruningSettings, WindowEntry, critical_distance
from protocols.stack import make_broker
from workloads.generators import covering_degree, mobile_rush_hour, random_mix, workflow

from .oracle import Pump, expected_deliveries
from .test_broker import OVERLAYS

VARIANTS = ("selective", "incremental")


def protocol(variant: str, covering: str = "active", **settings) -> dict:
    return {"covering": covering, "pruning": PruningSettings(variant=variant, **settings)}


def check_covering_tables(pump: Pump) -> None:
    """Per neighbour: sent = routed - withheld + preserved, and preserved entries are dead."""
    for broker in pump.brokers.values():
        for hop, routed in broker.routed_subs.items():
            sent, withheld = set(broker.covering_sent[hop].keys()), set(broker.covering_withheld[hop].keys())
            preserved = set(broker.pruning_preserved[hop])
            assert not sent & withheld and not preserved & set(routed), (broker.name, hop)
            assert sent | withheld == set(routed) | preserved, (broker.name, hop)
            assert not preserved & set(broker.subs)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", sorted(OVERLAYS))
@pytest.mark.parametrize("seed", range(3))
def test_random_workloads_deliver_exactly(variant, shape, seed):
    graph = OVERLAYS[shape](5 + 11 * seed, seed)
    records = random_mix(sorted(graph), seed=seed, operations=400)
    pump = Pump(graph, protocol(variant, min_count=0)).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    check_covering_tables(pump)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("covering", ["active", "packing"])
@pytest.mark.parametrize("seed", range(3))
def test_burst_workloads_deliver_exactly_and_preserve(variant, covering, seed):
    graph = topologies.enterprise55()
    records = covering_degree(sorted(graph), graph, seed=seed, subscriptions=220, degree=10, subscribe_interval=0.5,
                              publications=400, publish_interval=0.3, unsubscriptions=12,
                              unsubscribe_interval=0.2, unsubscribe_after=5.0)
    assert any(r["op"] == "publish" and r["t"] > max(u["t"] for u in records if u["op"] == "unsubscribe")
               for r in records)
    pump = Pump(graph, protocol(variant, covering)).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected_deliveries(records)
    check_covering_tables(pump)
    assert any(kind == "subscription_preserved" for kind, _ in pump.events)


def test_critical_distance_on_hand_made_windows():
    distances = [0, 0, 1, 2, 5]
    assert critical_distance(distances, 0.2) == 0
    assert critical_distance(distances, 0.4) == 0
    assert critical_distance(distances, 0.6) == 1
    assert critical_distance(distances, 0.8) == 2
    assert critical_distance(distances, 0.9) == 5
    assert critical_distance(distances, 1.0) == 5
    assert critical_distance([3], 0.9) == 3


def test_tuple_lists_per_publisher_and_variant():
    def shb(variant, **settings):
        return make_broker("B0", ["B1"], protocol(variant, **settings))

    entries = [("P1", d, c) for d, c in [(1, 0), (1, 1), (2, 0), (4, 0), (1, 0)]] + [("P2", 3, 0)]
    window = [WindowEntry(i, f"M{i}", p, d, c) for i, (p, d, c) in enumerate(entries)]
    assert shb("selective", threshold=0.9).prune_tuples(window) == (("P1", 4), ("P2", 3))
    assert shb("selective", threshold=0.6).prune_tuples(window) == (("P1", 1), ("P2", 3))
    # the largest count is 1: too little, so no tuples (the paper), or a traditional unsubscription
    assert shb("selective", min_count=2).prune_tuples(window) == ()
    assert shb("selective", min_count=2, no_statistics="unsubscribe").prune_tuples(window) is None
    assert shb("incremental").prune_tuples(window) == (("P1", 1, 4), ("P2", 3, 3))
    assert shb("selective").prune_tuples([]) == ()  # nothing recorded
    assert shb("selective", no_statistics="unsubscribe").prune_tuples([]) is None
    assert shb("incremental").prune_tuples([]) == ()


def test_delivery_windows_expire_and_give_each_subscription_its_own():
    windows = DeliveryWindows(window_us=100)
    windows.record(0, "M0", "P1", 2, 0, np.array([3, 5]))
    windows.record(50, "M1", "P22", 0, 1, np.array([5]))
    windows.record(99, "M2", "P1", 1, 0, np.array([3, 5, 7]))
    size = {"M0": 16 + 2 + 2, "M1": 16 + 2 + 3, "M2": 16 + 2 + 2}  # 16 + the two ids' lengths
    assert (windows.entries, windows.nbytes) == (6, 2 * size["M0"] + size["M1"] + 3 * size["M2"])
    windows.expire(100)  # M0, delivered at 0, is 100 us old: out
    assert (windows.entries, windows.nbytes) == (4, size["M1"] + 3 * size["M2"])
    assert windows.take(5, 120) == [WindowEntry(50, "M1", "P22", 0, 1), WindowEntry(99, "M2", "P1", 1, 0)]
    assert (windows.entries, windows.nbytes) == (2, 2 * size["M2"])
    assert windows.take(5, 120) == []  # taken once
    windows.record(170, "M3", "P1", 0, 0, np.array([5]))  # the slot's next subscription starts afresh
    assert windows.take(5, 170) == [WindowEntry(170, "M3", "P1", 0, 0)]
    assert windows.take(3, 200) == []  # M2 expired at 199
    assert (windows.entries, windows.nbytes) == (0, 0)


def line_case(variant: str, narrow: int, later=(), queue_len: int = 0, **settings) -> Pump:
    """B0 - B1 - B2 - B3, publisher P at B3. S ([x,>,0]) and ``narrow`` disjoint
    subscriptions it covers at B0; T (identical to S) at B2, so publications match twice at B2 only. Then S
    is unsubscribed, then the ``later`` records. Every broker sees ``queue_len`` waiting."""
    graph = nx.path_graph(["B0", "B1", "B2", "B3"])
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B3", "id": "A", "filter": "[x,>=,0]"},
               {"t": 1, "op": "subscribe", "client": "cS", "broker": "B0", "id": "S", "filter": "[x,>,0]"},
               {"t": 2, "op": "subscribe", "client": "cT", "broker": "B2", "id": "T", "filter": "[x,>,0]"}]
    records += [{"t": 3, "op": "subscribe", "client": f"c{i}", "broker": "B0", "id": f"N{i}",
                 "filter": f"[x,>=,{10 + i}],[x,<,{11 + i}]"} for i in range(narrow)]
    records += [{"t": 4 + i, "op": "publish", "client": "P", "id": f"M{i}", "content": f"[x,{5 + i}]"} for i in range(5)]
    records += [{"t": 20, "op": "unsubscribe", "client": "cS", "id": "S"},
                {"t": 21, "op": "publish", "client": "P", "id": "late", "content": "[x,10.5]"}, *later]
    pump = Pump(graph, protocol(variant, **settings))
    pump.queue_len = queue_len
    pump.run(records)
    assert set(pump.deliveries) == expected_deliveries(records)
    return pump


def test_selective_unsubscription_stops_where_publications_last_matched_twice():
    pump = line_case("selective", narrow=3)
    # distances recorded at B0: B3 matched 1 (1), B2 matched S and T (0), B1 (1), B0 (2)
    unsubs = [(sender, dest) for sender, dest, kind, msg_id in pump.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2")]
    assert ("S", 0) in pump.brokers["B2"].pruning_preserved["B3"]
    assert ("S", 0) in pump.brokers["B3"].subs  # kept upstream as the aggregate
    released = [(sender, dest) for sender, dest, kind, msg_id in pump.sent
                if kind == "sub" and msg_id.startswith("N") and sender != "B0" and dest != "B0"]
    assert released and all(dest != "B3" for _, dest in released)  # the burst stops at B2
    assert ("late", "S") not in pump.deliveries and ("late", "N0") in pump.deliveries
    # window sizes as sampled: S's window went with it; T (6 publications) and N0 (1) remain
    sizes = {name: b.protocol_samples() for name, b in pump.brokers.items()}
    assert (sizes["B0"]["window_entries"], sizes["B2"]["window_entries"]) == (1, 6)
    assert sizes["B2"]["window_bytes"] == 6 * 16 + sum(len(f"M{i}") for i in range(5)) + len("late") + 6 * len("P")


def test_without_statistics_the_tree_is_preserved_where_it_holds_subscriptions_back():
    pump = line_case("selective", narrow=3, min_count=2)  # the largest recorded count is 1
    assert not [1 for _, _, kind, msg_id in pump.sent if kind == "unsub" and msg_id == "S"]
    assert ("S", 0) in pump.brokers["B0"].pruning_preserved["B1"]  # it covers N0-N2 there
    assert not [1 for sender, _, kind, msg_id in pump.sent if kind == "sub" and msg_id.startswith("N") and sender == "B0"]


def test_traditional_unsubscription_without_statistics_when_asked():
    pump = line_case("selective", narrow=3, min_count=2, no_statistics="unsubscribe")
    unsubs = [(sender, dest) for sender, dest, kind, msg_id in pump.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2"), ("B2", "B3")]
    assert not any(b.pruning_preserved[h] for b in pump.brokers.values() for h in b.neighbors)


def test_statistics_older_than_the_window_are_forgotten():
    # publications at 4-8 s, unsubscription at 20 s: nothing recorded any more
    preserved = line_case("selective", narrow=3, window_us=5_000_000)
    assert not [1 for _, _, kind, msg_id in preserved.sent if kind == "unsub" and msg_id == "S"]
    assert ("S", 0) in preserved.brokers["B0"].pruning_preserved["B1"]
    traditional = line_case("selective", narrow=3, window_us=5_000_000, no_statistics="unsubscribe")
    unsubs = [(sender, dest) for sender, dest, kind, msg_id in traditional.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2"), ("B2", "B3")]


def test_incremental_removes_where_few_subscriptions_would_be_triggered():
    few = line_case("incremental", narrow=3)  # lg M < 1 everywhere: traditional all the way
    unsubs = [(s, d) for s, d, kind, msg_id in few.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2"), ("B2", "B3")]
    many = line_case("incremental", narrow=12)  # 1 <= lg M < 3.7: pruneDis2 (phi 0.9) = 2
    unsubs = [(s, d) for s, d, kind, msg_id in many.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2")]
    assert ("S", 0) in many.brokers["B2"].pruning_preserved["B3"]


def test_incremental_defers_big_unsubscriptions_while_congested():
    pump = line_case("incremental", narrow=12, queue_len=50, congested_queue=40)
    unsubs = [(s, d) for s, d, kind, msg_id in pump.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1")]  # B1 would trigger 12: it waits
    assert ("S", 0) in pump.brokers["B1"].subs and pump.brokers["B1"].pruning_deferred
    assert [d["sub_id"] for kind, d in pump.events if kind == "unsubscription_deferred"] == ["S"]
    pump.tick("B1")  # still congested: nothing happens
    assert ("S", 0) in pump.brokers["B1"].subs
    pump.queue_len = 0
    pump.tick("B1")
    unsubs = [(s, d) for s, d, kind, msg_id in pump.sent if kind == "unsub" and msg_id == "S"]
    assert unsubs == [("B0", "B1"), ("B1", "B2")] and ("S", 0) in pump.brokers["B2"].pruning_preserved["B3"]


def test_preserved_entry_is_withdrawn_once_it_covers_nothing():
    later = [{"t": 30 + i, "op": "unsubscribe", "client": f"c{i}", "id": f"N{i}"} for i in range(3)]
    later += [{"t": 40, "op": "unsubscribe", "client": "cT", "id": "T"},
              {"t": 41, "op": "publish", "client": "P", "id": "last", "content": "[x,50]"}]
    pump = line_case("selective", narrow=3, later=later)
    assert not pump.brokers["B2"].pruning_preserved["B3"]
    assert not pump.brokers["B3"].subs
    assert not [d for d in pump.sent if d[3] == "last" and d[2] == "pub"]  # nobody wants it: it stays at B3


@pytest.mark.parametrize("given, message", [
    ({"variant": "fancy"}, "variant: expected one of selective, incremental"),
    ({"treshold": 0.9}, "treshold: unknown key"),
    ({"threshold": 1.5}, "threshold: expected fractions in (0, 1]"),
    ({"thresholds": [0.6]}, "thresholds: expected two fractions"),
    ({"min_count": -1}, "min_count: expected a non-negative integer"),
])
def test_bad_settings_name_the_key(given, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        PruningSettings.parse(given, lambda value, key: int(value))


def test_settings_defaults_and_window():
    settings = PruningSettings.parse({"variant": "incremental", "window": "30s"}, lambda v, k: 30_000_000)
    assert (settings.variant, settings.window_us, list(settings.thresholds)) == ("incremental", 30_000_000, [0.6, 0.9])


def with_matching_publications(records: list[dict], every: int = 2) -> list[dict]:
    """``records`` and, for every ``every``-th subscription, a publication that matches it
    (a value meeting each predicate), published by the first publisher while it is there: the
    rush hour's random publications match owned subscriptions too rarely to test delivery."""
    publisher = next(r["client"] for r in records if r["op"] == "advertise")
    last = max(r["t"] for r in records)
    subscriptions = [r for r in records if r["op"] == "subscribe"][::every]
    extra = []
    for k, sub in enumerate(subscriptions):
        values = {}
        for predicate in parse_filter(sub["filter"]).predicates:
            offset = {"=": 0, "<": -1, ">": 1}[predicate.op]
            values[predicate.attr] = predicate.value + offset
        content = ",".join(f"[{a},{v}]" for a, v in values.items())
        extra.append({"t": round(sub["t"] + (last - sub["t"]) * (k % 7 + 1) / 8, 6), "op": "publish",
                      "client": publisher, "id": f"X{k}", "content": content})
    return sorted(records + extra, key=lambda r: r["t"])


@pytest.mark.parametrize("subscriptions, moves", [("independent", "handoff"), ("owned", "resubscribe")])
@pytest.mark.parametrize("stack", ["active", *VARIANTS])
def test_mobile_rush_hour_delivers_exactly(stack, subscriptions, moves):
    """Subscribers commute and wander between the leaves of a star (each operation complete
    before the next: the sync pump) with SIENA-style subscriptions: drawn independently and
    handed over on a move, or under roots that own their covered sets and withdrawn and made
    again 2 s later on a move (the paper-setup variant: a root away releases its whole set)."""
    graph = topologies.star(9)
    records = mobile_rush_hour(sorted(graph), graph, seed=2, publishers=8, subscribers=300, subscribe_interval=0.01,
                               publish_min=0.5, publish_max=2.0, morning_start=10.0, morning_end=20.0,
                               afternoon_start=30.0, afternoon_end=40.0, duration=50.0,
                               subscriptions=subscriptions, roots=6, moves=moves,
                               travel=2.0 if moves == "resubscribe" else 0.0)
    records = with_matching_publications(records)
    pump = Pump(graph, {"covering": "active"} if stack == "active" else protocol(stack)).run(records)
    expected = expected_deliveries(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected and len(expected) >= 300
    if stack != "active":
        check_covering_tables(pump)


@pytest.mark.parametrize("stack", ["active", *VARIANTS])
def test_workflow_delivers_exactly(stack):
    """Per-instance subscriptions come and go under monitors and auditors that cover them."""
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=2)
    records = workflow(sorted(graph), graph, seed=2, small=6, medium=6, large=3, trigger_min=10.0, trigger_max=20.0,
                       audit_interval=30.0, audit_length=10.0, duration=80.0)
    pump = Pump(graph, {"covering": "active"} if stack == "active" else protocol(stack)).run(records)
    expected = expected_deliveries(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected and len(expected) > 500
    assert {sub[0] for _, sub in expected} == {"T", "M", "A", "W"}  # triggers, monitors, auditors, waits
    if stack != "active":
        check_covering_tables(pump)


@pytest.mark.parametrize("stack", ["active", *VARIANTS])
def test_the_papers_workflow_delivers_exactly(stack):
    """Activity subscriptions that stay, covered by auditors that come and go."""
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=2)
    records = workflow(sorted(graph), graph, subscriptions="per_activity", seed=2, small=6, medium=6, large=3,
                       trigger_min=10.0, trigger_max=20.0, audit_interval=30.0, audit_length=10.0, duration=80.0)
    pump = Pump(graph, {"covering": "active"} if stack == "active" else protocol(stack)).run(records)
    expected = expected_deliveries(records)
    assert len(pump.deliveries) == len(set(pump.deliveries))
    assert set(pump.deliveries) == expected and len(expected) > 500
    assert {sub[0] for _, sub in expected} == {"A", "M"}  # activities and monitors, auditors
    if stack != "active":
        check_covering_tables(pump)
