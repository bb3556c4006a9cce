"""The experiment generators: enterprise overlay shape, covering degree and match share as asked."""
import networkx as nx
import pytest

import topologies
from protocols.index import FilterIndex
from protocols.language import matches, parse_filter, parse_publication
from workloads.generators import covering_degree, mobile_monitors, zipf_groups


def test_enterprise_shapes():
    for generate, brokers, edges in ((topologies.enterprise55, 55, 32), (topologies.enterprise49, 49, 26)):
        graph = generate()
        roles = [graph.nodes[n]["role"] for n in graph]
        assert graph.number_of_nodes() == brokers and graph.number_of_edges() == brokers - 1
        assert roles.count("core") == 5 and roles.count("inner") == 18 and roles.count("edge") == edges
        publishers = [n for n in graph if graph.nodes[n]["clients"] == "publishers"]
        assert len(publishers) == 3 and all(set(graph.neighbors(p)) == {"core-E"} for p in publishers)
        assert all(graph.nodes[n]["clients"] is None for n in graph if graph.nodes[n]["role"] != "edge")


def measured_degree(records) -> float:
    """Average number of subscriptions left uncovered when one root is removed (oracle)."""
    subs = {r["id"]: parse_filter(r["filter"]) for r in records if r["op"] == "subscribe"}
    index = FilterIndex()
    for key, f in subs.items():
        index.add(key, f)
    coverers = {key: [k for k in index.covering(f) if k != key] for key, f in subs.items()}
    roots = [key for key, found in coverers.items() if not found]
    released = [sum(1 for key, found in coverers.items() if found == [root]) for root in roots]
    return sum(released) / len(roots)


@pytest.mark.parametrize("degree", [10, 30, 50])
@pytest.mark.parametrize("clustered", [False, True])
def test_covering_degree_is_what_was_asked(degree, clustered):
    graph = topologies.enterprise55()
    records = covering_degree(sorted(graph), graph=graph, subscriptions=40 * (degree + 1), degree=degree,
                              publications=10, unsubscriptions=5, clustered=clustered)
    assert abs(measured_degree(records) - degree) <= 0.1 * degree
    subscribers = {n for n in graph if graph.nodes[n]["clients"] == "subscribers"}
    assert {r["broker"] for r in records if r["op"] == "subscribe"} <= subscribers
    home = {r["id"]: r["broker"] for r in records if r["op"] == "subscribe"}
    spread = {}
    for sub_id, broker in home.items():
        spread.setdefault(sub_id.split(".")[0], set()).add(broker)
    if clustered:  # each root's family stays on a cluster of at most 4 edge brokers around it
        assert all(len(brokers) <= 4 and home[root] in brokers for root, brokers in spread.items())
    else:
        assert max(len(brokers) for brokers in spread.values()) > 4


def test_unsubscriptions_remove_roots_after_the_tables_are_built():
    graph = topologies.enterprise55()
    records = covering_degree(sorted(graph), graph=graph, subscriptions=310, degree=30, publications=10,
                              unsubscriptions=4, unsubscribe_after=5.0)
    last_subscribe = max(r["t"] for r in records if r["op"] == "subscribe")
    unsubscribes = [r for r in records if r["op"] == "unsubscribe"]
    assert len(unsubscribes) == 4 and all(r["id"].startswith("R") and "." not in r["id"] for r in unsubscribes)
    assert min(r["t"] for r in unsubscribes) == pytest.approx(last_subscribe + 5.0)


def test_regions_shape():
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=4)
    topologies.check_tree(graph, "regions")
    roles = [graph.nodes[n]["role"] for n in graph]
    assert (roles.count("core"), roles.count("inner"), roles.count("edge")) == (4, 12, 48)
    for edge in (n for n in graph if graph.nodes[n]["role"] == "edge"):
        inner = next(iter(graph.neighbors(edge)))
        core = next(n for n in graph.neighbors(inner) if graph.nodes[n]["role"] == "core")
        assert graph.nodes[edge]["region"] == graph.nodes[inner]["region"] == graph.nodes[core]["region"]


def test_mobile_monitors_move_within_their_region_every_interval():
    graph = topologies.regions()
    records = mobile_monitors(sorted(graph), graph, seed=3, subscribers=200, publishers=5, publish_interval=10.0,
                              monitor_move_interval=120.0, moves_per_minute=6, duration=1200.0)
    monitors = [r for r in records if r["op"] == "subscribe" and r["id"].startswith("MON")]
    assert len(monitors) == 4 and all(parse_filter(r["filter"]) for r in monitors)
    assert sorted(graph.nodes[r["broker"]]["region"] for r in monitors) == [1, 2, 3, 4]
    for monitor in monitors:
        moves = [r for r in records if r["op"] == "move" and r["client"] == monitor["client"]]
        times = [monitor["t"]] + [r["t"] for r in moves]
        assert len(moves) == int((1200 - monitor["t"]) // 120)
        assert all(b - a == pytest.approx(120.0) for a, b in zip(times, times[1:]))
        where = [monitor["broker"]] + [r["broker"] for r in moves]
        assert all(a != b for a, b in zip(where, where[1:]))
        assert {graph.nodes[b]["region"] for b in where} == {graph.nodes[monitor["broker"]]["region"]}
    others = [r for r in records if r["op"] == "move" and not r["client"].startswith("monitor")]
    assert len(others) == pytest.approx((1200 - monitors[0]["t"]) / 10, abs=1)
    home = {r["client"]: r["broker"] for r in records if r["op"] == "subscribe"}
    for move in others:
        assert graph.nodes[move["broker"]]["region"] == graph.nodes[home[move["client"]]]["region"]
        home[move["client"]] = move["broker"]
    assert sum(r["op"] == "publish" for r in records) == pytest.approx((1200 - monitors[0]["t"]) / 10 * 5, abs=5)


@pytest.mark.parametrize("groups, share", [(10, 0.08), (2, 0.5)])
def test_zipf_groups_match_the_share_asked(groups, share):
    graph = topologies.random_tree(60, seed=3, max_degree=3)
    records = zipf_groups(sorted(graph), graph=graph, seed=2, clients="leaves", groups=groups, match_share=share,
                          subscriptions=300, publications=200)
    subs = [parse_filter(r["filter"]) for r in records if r["op"] == "subscribe"]
    pubs = [parse_publication(r["content"]) for r in records if r["op"] == "publish"]
    measured = sum(matches(s, p) for s in subs for p in pubs) / (len(subs) * len(pubs))
    assert abs(measured - share) < 0.2 * share
    leaves = {n for n in graph if graph.degree(n) == 1}
    assert {r["broker"] for r in records if "broker" in r} <= leaves
    with pytest.raises(ValueError, match="out of reach"):
        zipf_groups(sorted(graph), groups=10, match_share=0.5)


def test_random_tree_keeps_the_degree_bound():
    for n, seed in ((120, 1), (500, 2)):
        graph = topologies.random_tree(n, seed, max_degree=3)
        assert nx.is_tree(graph) and graph.number_of_nodes() == n
        assert max(d for _, d in graph.degree) == 3
    assert topologies.random_tree(50, 4).edges == topologies.random_tree(50, 4, max_degree=0).edges
