"""Soft links against the brute-force oracle, and their forwarding rules on hand-built cases."""
import dataclasses
import functools
import json
import random

import networkx as nx
import pytest

import topologies
from protocols.language import parse_publication
from protocols.messages import Message
from protocols.softlinks import DeltaView, SoftLinkSettings
from workloads.generators import random_mix

from .oracle import Pump, expected_deliveries


def random_links(graph, delta: int, rng: random.Random, most: int = 3) -> dict:
    """Up to ``most`` soft links per broker, to random brokers two to ``delta`` hops away."""
    overlay, links = topologies.neighbours(graph), {}
    for broker in sorted(graph):
        view = DeltaView(broker, overlay, delta)
        far = [n for n in view.nodes if view.depth[view.id[n]] >= 2]
        rng.shuffle(far)
        if far[: rng.randint(0, most)]:
            links[broker] = {"soft": sorted(far[: rng.randint(1, most)]), "candidate": []}
    return links


def protocol(covering: str = "none", **soft) -> dict:
    soft.setdefault("adaptive", False)
    return {"covering": covering, "soft_links": dataclasses.asdict(SoftLinkSettings(**soft))}


def pubs_sent(sent: list) -> int:
    """The publication messages among the (time, broker, kind, id) a run sent."""
    return sum(1 for _, _, kind, _ in sent if kind == "pub")


@functools.cache
def random_static_case(seed: int) -> tuple:
    """A random tree, Delta, static soft links and a workload of 300 operations, with the
    oracle's pairs: the same for every strategy and covering mode of one seed."""
    rng = random.Random(f"soft{seed}")
    graph = topologies.random_tree(rng.randint(15, 50), seed)
    delta = rng.randint(2, 4)
    links = random_links(graph, delta, rng)
    records = random_mix(sorted(graph), seed=seed, operations=300)
    return graph, delta, links, records, expected_deliveries(records)


@functools.cache
def primary_tree_sent(seed: int, covering: str) -> list:
    """What the brokers send without soft links, in order (one run per seed and covering mode)."""
    graph, _, _, records, _ = random_static_case(seed)
    return Pump(graph, {"covering": covering}).run(records).sent


@pytest.mark.parametrize("covering", ["none", "lazy", "active"])
@pytest.mark.parametrize("strategy", ["S0", "S1", "S2", "SH"])
@pytest.mark.parametrize("seed", range(4))
def test_deliveries_equal_oracle_with_random_static_links(strategy, covering, seed):
    graph, delta, links, records, expected = random_static_case(seed)
    pump = Pump(graph, protocol(covering, strategy=strategy, delta=delta, fanout=20, links=links)).run(records)
    assert len(pump.deliveries) == len(set(pump.deliveries)), "duplicate deliveries"
    assert set(pump.deliveries) == expected
    base = primary_tree_sent(seed, covering)
    if strategy == "S0":
        assert pump.sent == base
    else:  # copies skip brokers: fewer publication messages than the primary tree's
        assert pubs_sent(pump.sent) < pubs_sent(base)


def chain(n: int) -> nx.Graph:
    return topologies.line(n)


def test_anchors_stay_within_delta_of_each_broker_on_a_chain():
    graph = chain(8)  # B0 - B1 - ... - B7
    records = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"},
        {"t": 1, "op": "subscribe", "client": "S", "broker": "B7", "id": "S", "filter": "[x,>,5]"},
    ]
    pump = Pump(graph, protocol(delta=2)).run(records)
    for k in range(7):
        broker = pump.brokers[f"B{k}"]
        route = broker.subs[("S", 0)]
        anchor = broker.view.nodes[broker.prt.columns["anchor"][route.slot]]
        assert anchor == ("B7" if 7 - k <= 2 else f"B{k + 2}"), k


# B0 - B1 - B2 - B3 - B5, and B2 - B4 - B6: a branch that forks at B2
FORK = [("B0", "B1"), ("B1", "B2"), ("B2", "B3"), ("B3", "B5"), ("B2", "B4"), ("B4", "B6")]


def fork_case(strategy: str, soft: list[str], subscribers: list[str], also_advertising: str | None = None,
              utilisation: float = 0.0) -> Pump:
    """B0's client P publishes once; ``also_advertising`` draws subscriptions there too;
    ``utilisation``: every broker's uplink utilisation as its last tick saw it."""
    graph = nx.Graph(FORK)
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"}]
    if also_advertising:
        records.append({"t": 0, "op": "advertise", "client": "Q", "broker": also_advertising, "id": "AQ",
                        "filter": "[x,>,0]"})
    records += [{"t": 1, "op": "subscribe", "client": f"S{b}", "broker": b, "id": f"S{b}", "filter": "[x,>,5]"}
                for b in subscribers]
    records.append({"t": 2, "op": "publish", "client": "P", "id": "M", "content": "[x,9]"})
    pump = Pump(graph, protocol(strategy=strategy, delta=4, links={"B0": {"soft": soft, "candidate": []}}))
    for broker in pump.brokers.values():
        broker.uplink_utilisation = utilisation
    pump.run(records)
    assert sorted(pump.deliveries) == sorted(("M", f"S{b}") for b in subscribers)
    return pump


def copies(pump: Pump, sender: str) -> list[str]:
    """Where ``sender`` sent copies of the one publication."""
    return sorted(d for s, d, kind, _ in pump.sent if kind == "pub" and s == sender)


def test_s1_sends_one_copy_to_the_farthest_held_broker_on_the_common_prefix():
    pump = fork_case("S1", ["B2", "B3", "B4"], ["B5", "B6"])
    assert copies(pump, "B0") == ["B2"]
    assert copies(pump, "B2") == ["B3", "B4"]


def test_s2_sends_a_copy_toward_each_anchor_over_the_nearest_held_link():
    pump = fork_case("S2", ["B2", "B3", "B4"], ["B5", "B6"])
    assert copies(pump, "B0") == ["B3", "B4"]
    assert copies(pump, "B3") == ["B5"] and copies(pump, "B4") == ["B6"]
    assert not copies(pump, "B2"), "a skipped broker sees nothing"


def test_s2_drops_a_target_beyond_another_target():
    pump = fork_case("S2", ["B2", "B3"], ["B2", "B5"])
    assert copies(pump, "B0") == ["B2"]  # B3 lies beyond B2, which matches itself


def test_an_unheld_anchor_maps_to_its_nearest_held_ancestor():
    pump = fork_case("S2", ["B2"], ["B5", "B6"])
    assert copies(pump, "B0") == ["B2"]


def test_a_copy_over_a_soft_link_is_not_sent_back_toward_its_sender():
    pump = fork_case("S2", ["B3", "B4"], ["B5", "B6"], also_advertising="B5")
    assert copies(pump, "B0") == ["B3", "B4"]
    # B3 matches B6's subscription too (it went on toward B5's advertisement), from B2: the
    # branch toward the sender B0
    assert pump.brokers["B3"].subs[("SB6", 0)].last_hop == "B2"
    assert copies(pump, "B3") == ["B5"]


@pytest.mark.parametrize("utilisation, expected", [(0.5, ["B3", "B4"]), (0.8, ["B2"]), (0.95, ["B2"])])
def test_sh_is_s2_below_high_utilisation_and_s1_from_there(utilisation, expected):
    pump = fork_case("SH", ["B2", "B3", "B4"], ["B5", "B6"], utilisation=utilisation)
    assert copies(pump, "B0") == expected


def test_s0_is_the_primary_tree():
    pump = fork_case("S0", ["B2", "B3", "B4"], ["B5", "B6"])
    assert copies(pump, "B0") == ["B1"]


def test_covering_keeps_a_covered_subscription_with_another_anchor():
    """B5's broad subscription covers B6's narrow one at B2, but their anchors differ: B0 must
    still learn of B6's, or a copy to B3 would skip the fork at B2."""
    graph = nx.Graph(FORK)
    records = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"},
        {"t": 1, "op": "subscribe", "client": "W", "broker": "B5", "id": "wide", "filter": "[x,>,1]"},
        {"t": 2, "op": "subscribe", "client": "N", "broker": "B6", "id": "narrow", "filter": "[x,>,5]"},
        {"t": 3, "op": "publish", "client": "P", "id": "M", "content": "[x,9]"},
    ]
    links = {"B0": {"soft": ["B3"], "candidate": []}}
    pump = Pump(graph, protocol("active", strategy="S1", delta=4, links=links)).run(records)
    assert sorted(pump.deliveries) == [("M", "narrow"), ("M", "wide")]
    assert ("narrow", 0) in pump.brokers["B0"].subs


def test_delta_view_holds_the_tree_within_delta_hops():
    graph = topologies.balanced_tree(2, 4)
    view = DeltaView("B1", topologies.neighbours(graph), 2)
    expected = nx.single_source_shortest_path_length(graph, "B1", cutoff=2)
    assert {n: view.depth[view.id[n]] for n in view.nodes} == expected
    assert view.nodes[view.meet(view.id["B7"], view.id["B8"])] == "B3"
    assert view.nodes[view.branch[view.id["B8"]]] == "B3"
    assert [view.nodes[a] for a in view.ancestors(view.id["B7"])] == ["B3"]


# ---------------------------------------------------------------------- in the runtime


def adaptive_scenario(strategy: str = "SH", brokers: int = 30, operations: int = 700, spacing: float = 0.02,
                      round_s: float = 2.0) -> dict:
    """random_mix with links re-ranked every ``round_s`` (sampled every half round)."""
    return {
        "name": "soft",
        "seed": 4,
        "duration": f"{operations * spacing:g}s",
        "topology": {"generator": {"name": "random_tree", "n": brokers, "seed": 1}, "link": {"latency": "2ms"}},
        "workload": {"generator": {"name": "random_mix", "publishers": 4, "subscribers": 20,
                                   "operations": operations, "spacing": spacing}},
        "protocol": {"covering": "active", "soft_links": {
            "strategy": strategy, "delta": 3, "fanout": 5, "candidates": 3, "round": round_s,
            "profile_window": round_s, "block": 2 * round_s}},
        "runtime": {"hosts": 0, "costs": "zero", "sample_interval": round_s / 2},
    }


def run_rows(tmp_path, path, name: str, *overrides: str) -> dict:
    from actors.results import read_table
    from experiments.cli import main

    out = tmp_path / name
    sets = [arg for value in overrides for arg in ("--set", value)]
    assert main(["run", str(path), "--out", str(out), *sets]) == 0
    return {t: read_table(out, t).to_pylist() for t in ("deliveries", "messages", "samples", "events")}


@pytest.mark.parametrize("strategy", ["S1", "SH"])
def test_adaptive_links_open_and_deliveries_stay_exact(write_scenario, tmp_path, strategy):
    scenario = adaptive_scenario(strategy)
    rows = run_rows(tmp_path, write_scenario(scenario), "run")
    generator = dict(scenario["workload"]["generator"])
    del generator["name"]
    records = random_mix([f"B{i}" for i in range(30)], seed=4, **generator)
    pairs = [(d["pub_id"], d["sub_id"]) for d in rows["deliveries"]]
    assert len(pairs) == len(set(pairs)) and set(pairs) == expected_deliveries(records)
    opened = [e for e in rows["events"] if e["kind"] == "soft_link_opened"]
    assert opened, "no soft link opened"
    overlay = topologies.neighbours(topologies.random_tree(30, 1))
    skipped = [m for m in rows["messages"] if m["kind"] == "pub" and m["sender"] is not None
               and m["sender"] not in overlay[m["broker"]]]
    assert skipped, "no copy travelled over a soft link"
    assert {m["kind"] for m in rows["messages"]} >= {"soft_open"}
    held = [s["soft_links"] for s in rows["samples"]]
    assert max(held) > 0
    assert all(len(overlay[s["broker"]]) + s["soft_links"] <= 5 for s in rows["samples"])  # fanout 5, every sample
    first_round = scenario["protocol"]["soft_links"]["round"] * 1e6
    # a sample is written before the tick that runs the round at its time
    assert all((s["gainful_peers"] is None) == (s["t_us"] <= first_round) for s in rows["samples"])
    assert max(s["gainful_peers"] or 0 for s in rows["samples"]) > 0


@pytest.mark.ray
@pytest.mark.slow
def test_identical_results_across_host_counts_with_links_changing(write_scenario, tmp_path, ray_session):
    # short: every window under hosts "all" is a round of calls between 12 actors
    path = write_scenario(adaptive_scenario("S2", brokers=12, operations=300, spacing=0.004, round_s=0.4))
    results = {hosts: run_rows(tmp_path, path, f"hosts-{hosts}", f"runtime.hosts={hosts}") for hosts in (0, 2, "all")}
    assert any(e["kind"] == "soft_link_opened" for e in results[0]["events"])
    for hosts in (2, "all"):
        for table, rows in results[0].items():
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(results[hosts][table], key=key) == sorted(rows, key=key), f"{table}, hosts={hosts}"


def test_rounds_profile_candidates_then_hold_the_best_gaining_links():
    graph = nx.Graph(FORK)
    records = [{"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"}]
    records += [{"t": 1, "op": "subscribe", "client": f"S{b}", "broker": b, "id": f"S{b}", "filter": f"[x,>,{low}]"}
                for b, low in (("B5", 5), ("B6", 0))]
    pump = Pump(graph, protocol(strategy="S2", adaptive=True, fanout=4, candidates=3))
    pump.run(records)
    b0 = pump.brokers["B0"]

    def publish(t_s: float, count: int, x: int = 9) -> None:
        pump.now = int(t_s * 1e6)
        for i in range(count):
            pump.inject("B0", Message("pub", f"M{t_s}-{i}", publication=parse_publication(f"[x,{x}]"), client="P"))

    publish(25, 5)
    gains = {b0.view.nodes[n]: g for n, g in b0.link_gains(30_000_000).items()}
    # five publications went toward B2 (1 hop skipped), B3 and B4 (2 hops), B5 and B6 (3 hops)
    assert gains == {"B2": 5, "B3": 10, "B4": 10, "B5": 15, "B6": 15}
    assert b0.link_gains(60_000_000) == {}  # outside the 20 s profile window
    assert b0.gainful_peers is None  # no round yet
    pump.now = 30_000_000
    pump.tick("B0")  # the first round: candidates only, the three best gaining (ties by name)
    assert b0.candidate_links == ["B3", "B5", "B6"] and b0.soft_links == []
    assert b0.gainful_peers == 5  # B2 to B6: every broker two or more hops away was sent toward
    publish(50, 4)
    pump.sent.clear()
    pump.now = 60_000_000
    pump.tick("B0")  # fanout 4 leaves room for three soft links beside the primary one
    assert b0.soft_links == ["B3", "B5", "B6"]
    assert sorted(d for s, d, kind, _ in pump.sent if kind == "soft_open") == ["B3", "B5", "B6"]
    assert [e for e in pump.events if e[0] == "soft_link_opened"][0][1] == {"peer": "B3", "gain": 8}
    publish(61, 1)
    assert copies(pump, "B0") == ["B5", "B6"]
    publish(75, 4, x=3)  # only B6's subscription matches: B3 and B5 gain nothing
    pump.now = 90_000_000
    pump.tick("B0")
    assert b0.soft_links == ["B2", "B4", "B6"] and b0.candidate_links == []
    assert b0.gainful_peers == 3  # the last window's publications went toward B6 alone: B2, B4 and B6 gain
    assert b0.blocked_until == {"B3": 210_000_000, "B5": 210_000_000}
