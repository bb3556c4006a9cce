"""The covering structure a workload builds (workloads/structure.py, ``validate --stats``):
against a brute-force count with the scalar ``covers`` on random filters, and exactly the
structure the covering-degree generator promises."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.cli import main
from experiments.build import resolve
from protocols.language import covers, matches, parse_filter, parse_publication
from tests.conftest import PROJECT_ROOT
from tests.strategies import any_filters
from workloads.generators import random_mix
from workloads.structure import (covering_structure, matching_shares, subscriptions_at, subscriptions_of,
                                 without_probes)
from workloads.trace import compile_trace

SCENARIOS = PROJECT_ROOT / "experiments" / "scenarios"


def _brute_force(filters):
    """Roots: the first of every set of filters that cover each other, covered by nothing else;
    per root the filters it covers, and the roots among those no other root covers (what the
    root's removal makes roots)."""
    n = len(filters)
    cover = [[i != j and covers(filters[i], filters[j]) for j in range(n)] for i in range(n)]

    def roots_of(among):
        return [j for j in among if not any(cover[i][j] and not (cover[j][i] and j < i) for i in among)]

    roots = roots_of(range(n))
    covered = {r: [j for j in range(n) if cover[r][j]] for r in roots}
    count = {j: sum(j in c for c in covered.values()) for j in range(n)}
    exposed = [len(roots_of([j for j in covered[r] if count[j] == 1])) for r in roots]
    return roots, [len(covered[r]) for r in roots], exposed


@settings(max_examples=150, deadline=None)
@given(st.lists(any_filters(), min_size=1, max_size=14))
def test_structure_is_the_brute_force_one(filters):
    found = covering_structure(filters)
    roots, per_root, exposed = _brute_force(filters)
    assert found.roots == len(roots)
    assert sorted(found.per_root.tolist()) == sorted(per_root)
    assert sorted(found.exposed.tolist()) == sorted(exposed)
    assert found.covered == sum(1 for j in range(len(filters)) if any(
        covers(filters[r], filters[j]) for r in roots if r != j))


def test_the_covering_degree_generator_builds_the_degree_it_names():
    spec = resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["workload.generator.degree=10",
                                                                    "workload.generator.subscriptions=220"])
    workload, probes, listeners = without_probes(spec.injections)
    assert (probes, listeners) == (30, 32)  # the scenario's delay probes, one subscriber at every edge broker
    found = covering_structure(subscriptions_of(workload))
    assert (found.subscriptions, found.roots, found.covered) == (220, 20, 200)
    assert np.all(found.per_root == 10) and found.degree == 10.0



def test_the_incremental_papers_workload_is_80000_subscriptions_of_roots_triggering_2100():
    """000-B: 38 roots of 2,100 (79,838 subscriptions), 20 of them removed 0.5 s apart after the
    last subscription, a quote every 10 ms; the test-sized one has the same covering structure
    in 8 roots of 100 (measured by the covering oracle)."""
    spec = resolve(SCENARIOS / "burst_paper000_active.yaml", ["workload.generator.publications=1000"])
    kinds = [injection.message.kind for injection in spec.injections]
    subscriptions = [i.message.id for i in spec.injections if i.message.kind == "sub"]
    roots = [sub for sub in subscriptions if "." not in sub]
    assert (len(subscriptions), len(roots)) == (79_838, 38)
    removals = [i for i in spec.injections if i.message.kind == "unsub"]
    last_subscription = max(i.t_us for i in spec.injections if i.message.kind == "sub")
    assert len(removals) == 20 and all(r.message.id in roots for r in removals)
    assert [r.t_us - removals[0].t_us for r in removals] == [500_000 * k for k in range(20)]
    assert removals[0].t_us - last_subscription == 60_000_000
    quotes = [i.t_us for i in spec.injections if i.message.kind == "pub"]
    assert kinds.count("pub") == 1000 and quotes[1] - quotes[0] == 10_000
    small = resolve(SCENARIOS / "burst_paper000_small_active.yaml")
    found = covering_structure(subscriptions_of(small.injections))
    assert (found.subscriptions, found.roots, found.covered, found.degree) == (808, 8, 800, 100.0)

def test_validate_prints_the_structure(capsys):
    assert main(["validate", str(SCENARIOS / "unsub_burst_small_active.yaml"), "--stats"]) == 0
    out = capsys.readouterr().out
    assert "delay probes: 30 publications to 32 subscribers, left out of what follows" in out
    assert "covering: 620 subscriptions, 20 roots (covered by no other), 600 covered by a root" in out
    assert "covering degree (subscriptions a root's removal makes roots, mean per root) 30.0" in out
    # 20 roots over 29 subscriber edges: each root's 30 subscriptions land on brokers other than its own
    assert "covering within each subscriber broker's own subscriptions (29 brokers): roots " in out
    assert "covering degree 0.0 on average" in out
    assert "matching: a publication matches 0.2% on average (10th / 50th / 90th percentile " in out
    assert "matching: and reaches 4.4% on average (10th / 50th / 90th percentile 3.4% / 3.4% / 6.9%) " \
           "of the brokers holding them" in out


def test_the_subscriptions_present_at_a_time_are_those_issued_and_not_yet_withdrawn():
    """Against the records read one by one, at every operation's time and between."""
    brokers = [f"B{i}" for i in range(6)]
    records = random_mix(brokers, seed=4, operations=300, spacing=0.3)
    injections = compile_trace(records, brokers)
    assert any(r["op"] == "unsubscribe" for r in records) and any(r["op"] == "move" for r in records)
    for t in sorted({r["t"] for r in records} | {r["t"] + 0.05 for r in records}):
        present = {}
        for r in records:
            if r["t"] <= t and r["op"] == "subscribe":
                present[r["id"]] = r["filter"]
            elif r["t"] <= t and r["op"] == "unsubscribe":
                present.pop(r["id"])
        assert [str(f) for f in subscriptions_at(injections, round(t * 1_000_000))] == \
            [str(f) for f in map(parse_filter, present.values())]


def test_validate_measures_the_structure_an_auditor_meets(capsys):
    """The paper's workflow: while an auditor is there its filter covers every other
    subscription, and its removal makes roots of all the unmonitored activities' and the
    monitors'; without one, nothing covers much."""
    scenario = str(SCENARIOS / "workflow_paper_small_active.yaml")
    assert main(["validate", scenario, "--stats-at", "30", "--stats-at", "100"]) == 0
    out = capsys.readouterr().out
    assert "covering at 30 s: 215 subscriptions, 1 roots (covered by no other), 214 covered by a root" in out
    assert "covering at 30 s: covering degree (subscriptions a root's removal makes roots, mean per root) 127.0" in out
    assert "covering at 100 s: 214 subscriptions, 127 roots" in out  # the auditors have left


def test_the_matching_share_is_the_scalar_oracles():
    """Per publication, the fraction of the subscriptions present then that it matches, and of
    the brokers holding them (where issued) the fraction holding one it matches; of many
    publications, every k-th."""
    brokers = [f"B{i}" for i in range(6)]
    records = random_mix(brokers, seed=6, operations=400, spacing=0.3)
    injections = compile_trace(records, brokers)
    at, present, shares = {}, {}, []  # per publication, None while no subscription is present
    for r in records:
        at[r["client"]] = r.get("broker", at.get(r["client"]))
        if r["op"] == "subscribe":
            present[r["id"]] = (parse_filter(r["filter"]), at[r["client"]])
        elif r["op"] == "unsubscribe":
            present.pop(r["id"])
        elif r["op"] == "publish":
            publication = parse_publication(r["content"])
            matched = {broker for f, broker in present.values() if matches(f, publication)}
            shares.append((sum(matches(f, publication) for f, _ in present.values()) / len(present),
                           len(matched) / len({broker for _, broker in present.values()})) if present else None)
    expected = np.array([share for share in shares if share is not None])
    found = matching_shares(injections)
    assert len(found.subscriptions) == len(expected) > 50 and 0 < expected[:, 0].mean() < expected[:, 1].mean() < 1
    assert np.allclose(found.subscriptions, expected[:, 0]) and np.allclose(found.brokers, expected[:, 1])
    most = len(shares) // 3
    every = -(-len(shares) // most)
    sampled = matching_shares(injections, most)
    assert np.allclose(sampled.subscriptions, [x[0] for x in shares[::every] if x is not None])
