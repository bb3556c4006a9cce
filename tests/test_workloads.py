"""The experiment generators: enterprise overlay shape, covering degree and match share as asked."""
import random
from pathlib import Path

import networkx as nx
import pytest

import topologies
from protocols.index import FilterIndex
from protocols.language import covers, matches, parse_filter, parse_publication
from workloads.generators import (SienaVocabulary, covering_degree, mobile_monitors, mobile_rush_hour, rng_for, workflow,
                                  zipf_groups)
from workloads import draws
from workloads.stockquotes import stock_quotes
from workloads.structure import covering_structure

from tests.conftest import skip_without

PROJECT_ROOT = Path(__file__).resolve().parent.parent


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



def test_delay_probes_replace_the_stream_at_the_stated_time_and_match_every_edge():
    graph = topologies.enterprise55()
    shape = dict(subscriptions=310, degree=30, publications=400, publish_interval=0.4, unsubscriptions=4,
                 unsubscribe_interval=0.5, unsubscribe_after=5.0)
    plain = covering_degree(sorted(graph), graph=graph, **shape)
    probed = covering_degree(sorted(graph), graph=graph, probes=20, probe_after=30.0, **shape)
    last_unsubscribe = max(r["t"] for r in plain if r["op"] == "unsubscribe")
    probes = [r for r in probed if r["op"] == "publish" and r["id"].startswith("probe-")]
    assert len(probes) == 20 and probes[0]["t"] >= last_unsubscribe + 30.0 > probes[0]["t"] - 0.4
    assert [r["t"] for r in probes] == pytest.approx([probes[0]["t"] + 0.4 * k for k in range(20)])
    replaced = {r["id"] for r in plain} - {r["id"] for r in probed}
    assert len(replaced) == 20 and all(r["id"] in replaced or r in probed for r in plain)
    edges = {n for n in graph if graph.nodes[n]["role"] == "edge"}
    listeners = [r for r in probed if r["op"] == "subscribe" and r["id"].startswith("probe-")]
    assert {r["broker"] for r in listeners} == edges and len(listeners) == 32
    for probe in probes:
        content = parse_publication(probe["content"])
        assert content.as_dict()["class"] == "STOCK"  # matched against the same routing tables as any quote
        assert all(matches(parse_filter(r["filter"]), content) for r in listeners)
        assert not any(matches(parse_filter(r["filter"]), content) for r in probed
                       if r["op"] == "subscribe" and not r["id"].startswith("probe-"))
    with pytest.raises(ValueError, match="probes"):
        covering_degree(sorted(graph), graph=graph, probes=300, probe_after=30.0, **shape)

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


@pytest.mark.parametrize("groups, share", [(10, 0.08), (2, 0.53)])
def test_zipf_groups_with_broker_interests_keep_the_share_and_leave_brokers_out(groups, share):
    """``interest: broker``: each broker subscribes within one group on one attribute, the
    brokers dealt to groups by popularity; the subscriptions' matching share is as asked, and
    a publication reaches clearly fewer brokers than when subscriptions sit anywhere."""
    graph = topologies.random_tree(120, seed=3, max_degree=3)
    brokers = sorted(graph)

    def shares(interest):
        records = zipf_groups(brokers, graph=graph, seed=2, groups=groups, match_share=share, interest=interest,
                              subscriptions=2400, publications=150)
        subs = [(parse_filter(r["filter"]), r["broker"]) for r in records if r["op"] == "subscribe"]
        holding = {b for _, b in subs}
        matched, reached = [], []
        for r in records:
            if r["op"] == "publish":
                p = parse_publication(r["content"])
                at = [b for f, b in subs if matches(f, p)]
                matched.append(len(at) / len(subs))
                reached.append(len(set(at)) / len(holding))
        return records, sum(matched) / len(matched), sum(reached) / len(reached)

    records, matched, reached = shares("broker")
    assert abs(matched - share) < 0.15 * share
    by_broker = {}
    for r in records:
        if r["op"] == "subscribe":
            group, attribute = r["filter"].split("],[")[:2]
            by_broker.setdefault(r["broker"], set()).add((group, attribute.split(",")[0]))
    assert all(len(kinds) == 1 for kinds in by_broker.values()) and len(by_broker) > 110
    _, matched_anywhere, reached_anywhere = shares("any")
    assert abs(matched_anywhere - share) < 0.15 * share
    assert reached < 0.8 * reached_anywhere
    with pytest.raises(ValueError, match="interest"):
        zipf_groups(brokers, interest="nearby")


def test_random_tree_keeps_the_degree_bound():
    for n, seed in ((120, 1), (500, 2)):
        graph = topologies.random_tree(n, seed, max_degree=3)
        assert nx.is_tree(graph) and graph.number_of_nodes() == n
        assert max(d for _, d in graph.degree) == 3
    assert topologies.random_tree(50, 4).edges == topologies.random_tree(50, 4, max_degree=0).edges


QUOTES = PROJECT_ROOT.parent / "shared" / "data" / "stockquotes"


def received_share(records) -> dict[str, float]:
    """Per subscription, the share of its symbol's quotes it matches."""
    quotes: dict[str, list] = {}
    for r in records:
        if r["op"] == "publish":
            quotes.setdefault(r["client"].removeprefix("P-"), []).append(r["content"])
    shares = {}
    for r in records:
        if r["op"] == "subscribe":
            symbol = r["filter"].split("[symbol,=,'")[1].split("'")[0]
            f = parse_filter(r["filter"])
            shares[r["filter"]] = sum(matches(f, q) for q in quotes[symbol]) / len(quotes[symbol])
    return shares


@pytest.mark.parametrize("real", [False, True])
def test_stock_quote_subscribers_receive_their_rating_share(real):
    if real:
        skip_without(QUOTES, "the reference stock quotes")
    params = {"quotes": str(QUOTES)} if real else {}
    records = stock_quotes([f"B{i}" for i in range(20)], seed=2, symbols=10, subscribers=400, publications=300,
                           **params)
    assert sum(r["op"] == "advertise" for r in records) == 10
    assert sum(r["op"] == "publish" for r in records) == 10 * 300
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    shares = received_share(records)
    low = [s for text, s in shares.items() if "highLow%Diff" in text]
    medium = [s for text, s in shares.items() if "volume" in text]
    high = [s for text, s in shares.items() if text.count("[") == 2]
    assert len(low) > len(medium) > len(high) > 0  # 70 / 25 / 5
    assert 0.03 < sum(low) / len(low) < 0.2
    assert 0.3 < sum(medium) / len(medium) < 0.7
    assert all(s == 1 for s in high)
    published = [r["content"] for r in records if r["op"] == "publish"]
    assert all(parse_publication(str(p)) == p for p in published)  # handed parsed: as their text reads
    assert all(isinstance(p.as_dict()["volume"], int) for p in published)


def test_stock_quotes_derive_the_papers_attributes_from_real_quotes(tmp_path):
    skip_without(QUOTES, "the reference stock quotes")
    (tmp_path / "AAPL").write_text((QUOTES / "AAPL").read_text())
    days = len((QUOTES / "AAPL").read_text().splitlines())
    records = stock_quotes(["B0"], seed=0, base=tmp_path, quotes=".", symbols=1, subscribers=0, publications=days)
    newest = [r for r in records if r["op"] == "publish"][-1]  # quotes replay oldest first
    values = newest["content"].as_dict()  # open 63.30 high 64.25 low 62.05 close 64.18
    assert values["date"] == "28-Dec-04"
    assert values["highLow%Diff"] == pytest.approx(round(2.2 / 62.05, 4))
    assert values["openClose%Diff"] == pytest.approx(round(0.88 / 63.30, 4))
    assert values["closeEqualsLow"] == "false" and values["closeEqualsHigh"] == "false"


def test_enterprise_quotes_gather_every_high_rated_subscriber_on_one_broker():
    records = stock_quotes([f"B{i}" for i in range(30)], seed=5, subscribers=600, distribution="enterprise")
    subscriptions = [r for r in records if r["op"] == "subscribe"]
    high = {r["broker"] for r in subscriptions if r["filter"].count("[") == 2}
    assert len(high) == 1
    assert not any("volume" in r["filter"] for r in subscriptions)  # 95 low / 5 high, no medium
    assert stock_quotes([f"B{i}" for i in range(30)], seed=5, subscribers=600, distribution="enterprise") == records


@pytest.mark.parametrize("brokers", [1, 4, 16])
def test_subscribers_on_x_brokers_as_the_relocation_paper_places_them(brokers):
    """``subscriber_brokers: X``: every subscriber on X of the 30 brokers; enterprise puts the
    high-rated ones on one of them and the low-rated ones on the other X - 1; random spreads
    its 70/25/5 over all X."""
    overlay = [f"B{i}" for i in range(30)]
    for distribution in ("enterprise", "random"):
        records = stock_quotes(overlay, seed=5, subscribers=600, distribution=distribution, subscriber_brokers=brokers)
        subscriptions = [r for r in records if r["op"] == "subscribe"]
        used = {r["broker"] for r in subscriptions}
        assert len(used) == brokers
        high = {r["broker"] for r in subscriptions if r["filter"].count("[") == 2}
        others = {r["broker"] for r in subscriptions if r["filter"].count("[") > 2}
        if distribution == "enterprise":
            assert len(high) == 1 and (others == high if brokers == 1 else others == used - high)
        else:
            medium = [r for r in subscriptions if "volume" in r["filter"]]
            assert 0.15 < len(medium) / len(subscriptions) < 0.35 and high and len(others) == brokers
    with pytest.raises(ValueError, match="subscriber_brokers"):
        stock_quotes(overlay, subscriber_brokers=31)


def test_siena_draws_are_those_of_random_choices():
    """The vocabulary's written-out weighted draws take the same values from the same
    generator as ``random.choices``, so the shipped scenarios' workloads stay as they were."""
    language = SienaVocabulary()

    def attributes(rng, count):
        chosen = []
        while len(chosen) < count:
            word = rng.choices(language.words, cum_weights=language.cumulative)[0]
            if word not in chosen:
                chosen.append(word)
        return chosen

    def subscription(rng):
        return ",".join(f"[{a},{rng.choices(['=', '<', '>'], [60, 20, 20])[0]},{rng.choice(language.values)}]"
                        for a in attributes(rng, rng.randint(1, 10)))

    def publication(rng):
        return ",".join(f"[{a},{rng.choice(language.values)}]" for a in attributes(rng, rng.randint(1, 19)))

    ours, theirs = rng_for(5, "siena"), rng_for(5, "siena")
    for i in range(3000):
        if i % 3:
            assert language.subscription(ours) == subscription(theirs)
        else:
            assert str(language.publication(ours)) == publication(theirs)


def test_mobile_rush_hour_commutes_stays_and_wanders_in_the_rush_hours():
    graph = topologies.star(17)
    leaves = {n for n in graph if graph.degree(n) == 1}
    records = mobile_rush_hour(sorted(graph), graph, seed=4, publishers=30, subscribers=1000, subscribe_interval=0.01,
                               morning_start=100.0,
                               morning_end=200.0, afternoon_start=400.0, afternoon_end=500.0, duration=600.0)
    subscriptions = [r for r in records if r["op"] == "subscribe"]
    assert len(subscriptions) == 1000 and {r["broker"] for r in subscriptions} <= leaves
    assert all(1 <= len(parse_filter(r["filter"]).predicates) <= 10 for r in subscriptions)
    moves: dict[str, list[dict]] = {}
    for r in records:
        if r["op"] == "move":
            moves.setdefault(r["client"], []).append(r)
    home = {r["client"]: r["broker"] for r in subscriptions}
    assert len(moves) == 800  # 20% stay
    for client, (morning, afternoon) in moves.items():
        assert 100 <= morning["t"] <= 200 and 400 <= afternoon["t"] <= 500
        assert morning["broker"] != home[client] and afternoon["broker"] != morning["broker"]
    back_home = sum(afternoon["broker"] == home[client] for client, (_, afternoon) in moves.items())
    assert 600 <= back_home < 700  # the 60% commuters, and the wanderers who happen to end at home
    publications = [r for r in records if r["op"] == "publish"]
    for publisher in ("pub0", "pub7"):
        times = [r["t"] for r in publications if r["client"] == publisher]
        gaps = {round(b - a, 3) for a, b in zip(times, times[1:])}
        assert len(gaps) == 1 and 1.0 <= gaps.pop() <= 15.0  # its own period
    # handed over parsed, as the careful parser reads their text
    assert all(parse_publication(str(r["content"])) == r["content"] for r in publications)
    assert all(1 <= len(r["content"].items) <= 19 for r in publications)
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    with pytest.raises(ValueError, match="rush hours"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, morning_start=2500.0, morning_end=2600.0)


def test_owned_subscriptions_are_covered_by_their_own_root_only():
    """Each root owns its covered set: the scalar oracle finds every other subscription
    covered by exactly one root, and no root covers another; the SIENA shape holds."""
    texts = SienaVocabulary().owned_subscriptions(random.Random(5), 400, 8)
    filters = [parse_filter(t) for t in texts]
    roots, others = filters[:8], filters[8:]
    assert not any(covers(a, b) for a in roots for b in roots if a is not b)
    assert all(sum(covers(root, f) for root in roots) == 1 for f in others)
    assert all(1 <= len(f.predicates) <= 10 for f in filters)
    assert {p.op for f in filters for p in f.predicates} == {"=", "<", ">"}
    found = covering_structure(filters)
    assert (found.roots, found.covered) == (8, 392) and found.per_root.sum() == 392
    assert found.degree > 20  # a root's removal exposes a good part of its set (siblings cover some)


def test_a_mobile_rush_hour_without_an_afternoon_moves_each_subscriber_once_and_resubscribes_on_request():
    graph = topologies.star(9)
    records = mobile_rush_hour(sorted(graph), graph, seed=4, publishers=5, subscribers=200, subscribe_interval=0.01,
                               morning_start=100.0, morning_end=200.0, afternoon_start=None, afternoon_end=None,
                               duration=300.0, subscriptions="owned", roots=4)
    moves = [r for r in records if r["op"] == "move"]
    assert len(moves) == 160 == len({r["client"] for r in moves})  # 20% stay
    assert all(100 <= r["t"] <= 200 for r in moves)
    filters = [parse_filter(r["filter"]) for r in records if r["op"] == "subscribe"]
    assert covering_structure(filters).roots == 4
    resubscribed = mobile_rush_hour(sorted(graph), graph, seed=4, publishers=5, subscribers=200,
                                    subscribe_interval=0.01, morning_start=100.0, morning_end=200.0,
                                    afternoon_start=250.0, afternoon_end=280.0, duration=300.0, moves="resubscribe")
    filters = {r["id"]: r["filter"] for r in resubscribed if r["op"] == "subscribe"}
    movers = sorted({r["client"] for r in resubscribed if r["op"] == "move"})
    for client in movers[:3]:
        ops = [(r["op"], r.get("id"), r.get("broker")) for r in resubscribed if r["client"] == client]
        n, home, there = client.removeprefix("c-"), ops[0][2], ops[2][2]
        assert ops[1:4] == [("unsubscribe", n, None), ("move", None, there), ("subscribe", f"{n}.1", there)]
        assert there != home and filters[f"{n}.1"] == filters[n]
        assert ops[4] == ("unsubscribe", f"{n}.1", None) and ops[6][:2] == ("subscribe", f"{n}.2")
    assert sum(r["op"] == "move" for r in resubscribed) == 320  # the 80% who move, twice
    travelling = mobile_rush_hour(sorted(graph), graph, seed=4, publishers=5, subscribers=200,
                                  subscribe_interval=0.01, morning_start=100.0, morning_end=200.0,
                                  afternoon_start=250.0, afternoon_end=280.0, duration=300.0, moves="resubscribe",
                                  travel=30.0)
    left = {r["id"]: r["t"] for r in travelling if r["op"] == "unsubscribe"}
    arrived = {r["id"]: r["t"] for r in travelling if r["op"] == "subscribe" and "." in r["id"]}
    assert len(arrived) == 320 and [r["t"] for r in travelling] == sorted(r["t"] for r in travelling)
    for new_id, t in arrived.items():
        n, k = new_id.rsplit(".", 1)
        assert t == pytest.approx(left[n if k == "1" else f"{n}.1"] + 30.0)
    with pytest.raises(ValueError, match="longer than the gap between the rush hours"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, moves="resubscribe", travel=1000.0)
    with pytest.raises(ValueError, match="only with moves: resubscribe"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, travel=5.0)
    with pytest.raises(ValueError, match="give both, or neither"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, afternoon_start=None)
    with pytest.raises(ValueError, match="subscriptions 'nested'"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, subscriptions="nested")
    with pytest.raises(ValueError, match="moves 'teleport': expected one of handoff, resubscribe"):
        mobile_rush_hour(sorted(graph), graph, subscribers=10, moves="teleport")


def test_workflow_processes_run_their_activities_on_their_engines():
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=2)
    records = workflow(sorted(graph), graph, seed=3, small=10, medium=10, large=5, trigger_min=20.0, trigger_max=40.0,
                       audit_interval=100.0, audit_length=30.0, duration=400.0)
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    engine_at = {r["client"]: r["broker"] for r in records if r["client"].startswith("eng-") and "broker" in r}
    assert len(engine_at) == 24 and all(graph.nodes[b]["role"] == "edge" for b in engine_at.values())
    completions: dict[str, dict[int, list[tuple[int, str, float]]]] = {}
    for r in records:
        if r["op"] == "publish" and r["id"].startswith("E"):
            process, instance, activity = r["id"][1:].split(".")
            completions.setdefault(process, {}).setdefault(int(instance), []).append((int(activity), r["client"], r["t"]))
    assert len(completions) == 25
    for process, instances in completions.items():
        size = len(instances[0])
        assert size == (3 if int(process) < 10 else 10 if int(process) < 20 else 26)
        for steps in instances.values():  # every instance runs the same activities in order, to the end
            assert [a for a, _, _ in steps] == list(range(size)) and [t for _, _, t in steps] == sorted(t for _, _, t in steps)
            assert [e for _, e, _ in steps] == [e for _, e, _ in instances[0]]
        engines = {e for _, e, _ in instances[0]}
        domains = {graph.nodes[engine_at[e]]["region"] for e in engines}
        if int(process) < 10:
            assert len(engines) == 1
        elif int(process) < 20:
            assert len(domains) == 1
    assert any(len({graph.nodes[engine_at[e]]["region"] for _, e, _ in completions[str(p)][0]}) > 1 for p in range(20, 25))
    waits = {r["id"]: r for r in records if r["id"].startswith("W")}
    for wait_id, r in waits.items():  # each later activity waits for its predecessor in its instance only
        process, instance, activity = wait_id[1:].split(".")
        f = parse_filter(r["filter"]) if r["op"] == "subscribe" else None
        if f is not None:
            before = next(x for x in records if x["id"] == f"E{process}.{instance}.{int(activity) - 1}")
            assert matches(f, parse_publication(before["content"])) and r["client"] == completions[process][int(instance)][int(activity)][1]
    unsubscribed = [r for r in records if r["op"] == "unsubscribe" and r["id"].startswith("W")]
    assert len(unsubscribed) == sum(r["op"] == "subscribe" and r["id"].startswith("W") for r in records)
    monitors = [r for r in records if r["op"] == "subscribe" and r["id"].startswith("MON")]
    assert 3 <= len(monitors) <= 13  # 30% of 25
    audits = [r for r in records if r["client"].startswith("auditor")]
    assert {r["client"] for r in audits} == {f"auditor{a}" for a in range(4)}
    for a in range(4):
        times = [r["t"] for r in audits if r["client"] == f"auditor{a}"]
        assert len(times) in (6, 8) and all(round(b - a, 6) == 30.0 for a, b in zip(times[::2], times[1::2]))
    with pytest.raises(ValueError, match="monitored"):
        workflow(sorted(graph), graph, monitored=1.5)


def test_the_workflows_audits_stay_where_they_are_when_the_processes_change():
    """The auditors draw from a stream of their own, so that a variant of the processes (their
    triggering here) is measured against the same audits."""
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=2)

    def audits(seed=3, **changes):
        records = workflow(sorted(graph), graph, seed=seed, duration=1200.0, small=8, medium=8, large=4, **changes)
        return [r for r in records if r["client"].startswith("auditor")]

    assert audits() == audits(trigger_min=20.0, trigger_max=60.0) == audits(subscriptions="per_activity")
    assert audits() != audits(trigger_min=20.0, trigger_max=60.0, seed=4)


def test_the_papers_workflow_keeps_one_subscription_per_activity_and_its_auditors_cover_them_all():
    """``subscriptions: per_activity``: every activity's engine subscribes once, at deployment,
    to the trigger that starts it and never leaves; an instance's triggers run from activity 0
    to the last in time order, each published by the engine of the activity before it; an
    auditor's filter covers every other subscription, so its removal makes roots of all the
    subscriptions no monitor covers (the burst active covering then forwards)."""
    graph = topologies.regions(regions=4, inner_per_region=3, edges_per_inner=2)
    records = workflow(sorted(graph), graph, subscriptions="per_activity", seed=3, small=10, medium=10, large=5,
                       trigger_min=20.0, trigger_max=40.0, audit_interval=100.0, audit_length=30.0, duration=400.0)
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    activities = {r["id"]: r for r in records if r["id"].startswith("ACT")}
    assert len(activities) == 10 * 3 + 10 * 10 + 5 * 26
    assert all(r["op"] == "subscribe" and r["t"] == 0.5 for r in activities.values())
    assert not [r for r in records if r["op"] == "unsubscribe" and not r["client"].startswith("auditor")]
    triggers: dict[tuple[str, str], list[tuple[int, str, float]]] = {}
    for r in records:
        if r["op"] == "publish":
            process, instance, activity = r["id"][1:].split(".")
            triggers.setdefault((process, instance), []).append((int(activity), r["client"], r["t"]))
    for (process, _), steps in triggers.items():
        size = sum(1 for i in activities if i.startswith(f"ACT-P{process}."))
        assert [a for a, _, _ in steps] == list(range(size + 1)) and [t for _, _, t in steps] == sorted(t for _, _, t in steps)
        assert steps[0][1] == f"trg-P{process}"
        for a, client, _ in steps[1:]:  # published by the engine of the activity it follows
            assert client == activities[f"ACT-P{process}.{a - 1}"]["client"]
        first = next(r for r in records if r["op"] == "publish" and r["id"] == f"T{process}.0.0")
        assert matches(parse_filter(activities[f"ACT-P{process}.0"]["filter"]), parse_publication(first["content"]))
    monitors = {r["filter"] for r in records if r["op"] == "subscribe" and r["id"].startswith("MON")}
    assert 3 <= len(monitors) <= 13  # 30% of 25
    audits = [r for r in records if r["client"].startswith("auditor")]
    for a in range(4):
        times = [r["t"] for r in audits if r["client"] == f"auditor{a}"]
        assert len(times) in (6, 8) and all(round(b - a, 6) == 30.0 for a, b in zip(times[::2], times[1::2]))
    unmonitored = [r for r in activities.values() if not any(f"'P{r['id'][5:].split('.')[0]}'" in m for m in monitors)]
    filters = [parse_filter(audits[0]["filter"])] + [parse_filter(f) for f in monitors] + \
        [parse_filter(r["filter"]) for r in activities.values()]
    structure = covering_structure(filters)
    assert structure.roots == 1 and structure.exposed.tolist() == [len(monitors) + len(unmonitored)]
    with pytest.raises(ValueError, match="activities"):
        workflow(sorted(graph), graph, subscriptions="per_activity", small_activities=0)
    with pytest.raises(ValueError, match="per_instance, per_activity"):
        workflow(sorted(graph), graph, subscriptions="per_process")


@pytest.mark.parametrize("block", [64, 1 << 22])
def test_compiled_periodic_publications_are_the_python_loops_draws(block):
    """The kernel's publications, and the generator's state after them, are those of the
    loop it replaces, drawn with ``publication``; with blocks of 64 words a publisher's
    draws often run past the words at hand and are taken again from a longer block."""
    language = SienaVocabulary()
    pairs = [(w, v) for w in language.words for v in language.values]
    ours, theirs = rng_for(8, "draws"), rng_for(8, "draws")
    ours.random(), theirs.random()  # not at the start of the generator's state
    found = []
    for publisher, times, counts, codes in draws.periodic_publications(
            ours, language.cumulative, len(language.values), language.MAX_ATTRIBUTES, 40, 3.0, 120.0, 0.5, 9.0,
            block=block):
        cells = iter(codes.tolist())
        found += [(p, t, tuple(pairs[next(cells)] for _ in range(c)))
                  for p, t, c in zip(publisher.tolist(), times.tolist(), counts.tolist())]
    expected = []
    for p in range(40):
        period = theirs.uniform(0.5, 9.0)
        t = 3.0 + theirs.uniform(0, period)
        while t < 120.0:
            expected.append((p, t, language.publication(theirs).items))
            t += period
    assert len(expected) > 1000 and found == expected
    assert ours.getstate() == theirs.getstate()


@pytest.mark.parametrize("under", [2, 3])
def test_nested_subscriptions_are_covered_by_each_of_their_roots(under):
    """``under``: every other subscription sits under that many roots (the scalar oracle finds
    exactly that many covering it), so removing one of them exposes nothing."""
    texts = SienaVocabulary().owned_subscriptions(random.Random(5), 300, 8, under)
    filters = [parse_filter(t) for t in texts]
    roots, others = filters[:8], filters[8:]
    assert not any(covers(a, b) for a in roots for b in roots if a is not b)
    assert all(sum(covers(root, f) for root in roots) == under for f in others)
    assert all(1 <= len(f.predicates) <= 10 for f in filters)
    with pytest.raises(ValueError, match="under 4"):
        SienaVocabulary().owned_subscriptions(random.Random(5), 300, 8, 4)


def test_zipf_groups_switch_to_the_high_rate_when_asked():
    """Publications ``publish_interval`` apart until ``high_rate_from``, then ``high_rate_interval``."""
    brokers = [f"B{i}" for i in range(12)]
    records = zipf_groups(brokers, seed=1, subscriptions=20, publications=300, publish_interval=0.1,
                          high_rate_from=10.0, high_rate_interval=0.002)
    times = [r["t"] for r in records if r["op"] == "publish"]
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:])]
    slow = [g for a, g in zip(times, gaps) if a < 10.0]
    assert slow and all(g == pytest.approx(0.1) for g in slow)
    assert len(gaps) - len(slow) > 200 and all(g == pytest.approx(0.002) for g in gaps[len(slow):])
    with pytest.raises(ValueError, match="positive"):
        zipf_groups(brokers, high_rate_interval=0)
