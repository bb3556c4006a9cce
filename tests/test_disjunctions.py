"""Disjunctive subscriptions (``F1 || F2``) through every protocol: exact deliveries against
the brute-force oracle (the index's answers are held to the oracle in test_index.py)."""
import dataclasses
import random

import networkx as nx
import pytest

import topologies
from protocols.multitree import MultitreeSettings
from protocols.pruning import PruningSettings
from protocols.relocation import RelocationSettings
from protocols.softlinks import SoftLinkSettings
from workloads.generators import GENERATORS, random_mix

from .oracle import Pump, expected_deliveries
from .test_multitree import run_in_two_halves
from .test_softlinks import random_links


def pruning(variant: str) -> dict:
    return {"covering": "active", "pruning": PruningSettings(variant=variant, min_count=0)}


STACKS = {
    "base": {},
    "lazy": {"covering": "lazy"},
    "active": {"covering": "active"},
    "packing": {"covering": "packing"},
    "selective": pruning("selective"),
    "incremental": pruning("incremental"),
    "grape": {"covering": "active", "relocation": dataclasses.asdict(RelocationSettings(trace_threshold=4))},
}


def disjunctive_mix(graph, seed: int) -> list[dict]:
    records = random_mix(sorted(graph), seed=seed, operations=500, disjunctions=0.5)
    assert sum(" || " in r.get("filter", "") for r in records) > 20
    return records


def assert_exact(pump: Pump, records: list[dict]) -> None:
    assert len(pump.deliveries) == len(set(pump.deliveries)), "duplicate deliveries"
    expected = expected_deliveries(records)
    assert set(pump.deliveries) == expected and len(expected) > 50


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("seed", range(3))
def test_deliveries_equal_oracle(stack, seed):
    graph = topologies.random_tree(8 + 9 * seed, seed)
    records = disjunctive_mix(graph, seed)
    assert_exact(Pump(graph, STACKS[stack]).run(records), records)


@pytest.mark.parametrize("strategy", ["S1", "S2"])
@pytest.mark.parametrize("seed", range(2))
def test_deliveries_equal_oracle_over_soft_links(strategy, seed):
    rng = random.Random(f"disjunctive soft{seed}")
    graph = topologies.random_tree(rng.randint(15, 40), seed)
    settings = SoftLinkSettings(strategy=strategy, delta=3, fanout=20, adaptive=False,
                                links=random_links(graph, 3, rng))
    records = disjunctive_mix(graph, seed)
    assert_exact(Pump(graph, {"covering": "active", "soft_links": dataclasses.asdict(settings)}).run(records), records)


def test_a_disjunctive_advertisement_admits_the_publications_of_each_disjunct():
    graph = nx.path_graph(["B0", "B1", "B2"])
    records = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,<,0] || [y,>,0]"},
        {"t": 1, "op": "subscribe", "client": "S", "broker": "B2", "id": "Sx", "filter": "[x,<,-5]"},
        {"t": 2, "op": "subscribe", "client": "T", "broker": "B2", "id": "Sy", "filter": "[y,>,5] || [z,>,0]"},
        {"t": 3, "op": "publish", "client": "P", "id": "Mx", "content": "[x,-9]"},
        {"t": 4, "op": "publish", "client": "P", "id": "My", "content": "[y,9]"},
        {"t": 5, "op": "publish", "client": "P", "id": "Mxy", "content": "[x,-9],[y,9]"},  # conforms to neither
    ]
    pump = Pump(graph, {"covering": "active"}).run(records)
    assert sorted(pump.deliveries) == [("Mx", "Sx"), ("My", "Sy")]


@pytest.mark.parametrize("algorithm", ["MULT", "SemCast-filtered", "OPT"])
def test_multitree_routes_disjunctive_keyword_subscriptions_exactly(algorithm):
    graph = topologies.transit_stub(seed=4)
    records = GENERATORS["keywords"](sorted(graph), graph, 4, keywords=40, documents=200, publishers=10,
                                     dataset="Localized2", keywords_per_subscription=3)
    assert sum(" || " in r.get("filter", "") for r in records) > 10
    settings = MultitreeSettings(algorithm=algorithm, sample=1.0, recompute_us=5_000_000)
    pump = Pump(graph, {"multitree": dataclasses.asdict(settings), "seed": 1})
    run_in_two_halves(pump, records, min(graph))
    assert [kind for kind, _ in pump.events if kind.startswith("multitree")] == [
        "multitree_recomputed", "multitree_activated"]
    assert sorted(pump.deliveries) == sorted(expected_deliveries(records))
