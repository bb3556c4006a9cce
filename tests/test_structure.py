"""The covering structure a workload builds (workloads/structure.py, ``validate --stats``):
against a brute-force count with the scalar ``covers`` on random filters, and exactly the
structure the covering-degree generator promises."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.cli import main
from experiments.scenario import resolve
from protocols.language import covers
from tests.conftest import PROJECT_ROOT
from tests.strategies import any_filters
from workloads.structure import covering_structure, subscriptions_of

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
    found = covering_structure(subscriptions_of(spec.injections))
    assert (found.subscriptions, found.roots, found.covered) == (220, 20, 200)
    assert np.all(found.per_root == 10) and found.degree == 10.0


def test_validate_prints_the_structure(capsys):
    assert main(["validate", str(SCENARIOS / "unsub_burst_small_active.yaml"), "--stats"]) == 0
    out = capsys.readouterr().out
    assert "covering: 620 subscriptions, 20 roots (covered by no other), 600 covered by a root" in out
    assert "covering degree (subscriptions a root's removal makes roots, mean per root) 30.0" in out
    # 20 roots over 29 subscriber edges: each root's 30 subscriptions land on brokers other than its own
    assert "covering within each subscriber broker's own subscriptions (29 brokers): roots " in out
    assert "covering degree 0.0 on average" in out
