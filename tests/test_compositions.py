"""Every pair of protocol features that ``validate`` accepts runs and delivers exactly.

Each feature is a scenario change (a covering mode, a pruning variant, a soft-link strategy with
or without Delta-moves, a relocation algorithm, a multi-tree algorithm, faults of every kind,
moving clients); each pair of features of different kinds is one small run (a second or two)
on a 10-broker tree with operations 10 ms apart, so that subscriptions, moves, migrations and
plans race publications, and ``pubsub-emu check`` must find its deliveries exact. A pair
``validate`` refuses is refused with a reason; one it accepts must not fail.
"""
import itertools
import json
import random

import pytest

import topologies
from actors.results import read_table
from actors.storage import RunDir
from experiments.check import check
from experiments.cli import main

from .test_deltamoves import random_moves

BROKERS, SEED = 10, 4
GRAPH = topologies.random_tree(BROKERS, SEED)
SOFT_ROUNDS = {"round": "500ms", "profile_window": "400ms", "block": "1s"}  # links change while publishing
DELTA_MOVES = [{"at": f"{i + 1.5}s", "broker": m["broker"], "from": m["from"], "to": m["to"]}
               for i, m in enumerate(random_moves(GRAPH, random.Random(SEED), 2))]
FAULTS = [
    {"t": "1s", "kind": "crash", "broker": "B3", "restart_after": "0.5s"},
    {"t": "1.2s", "kind": "link_down", "a": sorted(GRAPH.edges)[2][0], "b": sorted(GRAPH.edges)[2][1], "until": "1.6s"},
    {"t": "1.8s", "kind": "partition", "groups": [["B7"]], "until": "2.1s"},
    {"t": "0.5s", "kind": "loss", "a": sorted(GRAPH.edges)[5][0], "b": sorted(GRAPH.edges)[5][1], "probability": 0.3,
     "until": "2.5s"},
    {"t": "0.5s", "kind": "delay", "a": sorted(GRAPH.edges)[6][0], "b": sorted(GRAPH.edges)[6][1], "extra": "20ms",
     "jitter": "30ms", "until": "3s"},
    {"t": "0.8s", "kind": "slow", "broker": "B1", "factor": 5, "until": "2.8s"},
]

# kind -> {name: (the feature's own settings, settings it needs unless the other feature sets them)}
FEATURES = {
    "alone": {"alone": ({}, {})},  # each feature by itself
    "covering": {c: ({"covering": c}, {}) for c in ("lazy", "active", "packing")},
    "pruning": {v: ({"pruning": {"variant": v}}, {"covering": "active"}) for v in ("selective", "incremental")},
    "soft links": {
        **{s: ({"soft_links": {"strategy": s, **SOFT_ROUNDS}}, {}) for s in ("S0", "S1", "S2", "SH")},
        **{f"{s}+moves": ({"soft_links": {"strategy": s, **SOFT_ROUNDS, "moves": DELTA_MOVES}}, {})
           for s in ("S0", "SH")},
    },
    "relocation": {a: ({"relocation": {"algorithm": a, "trace_threshold": 5, "window": "1s"}}, {})
                   for a in ("grape", "pop")},
    "multitree": {a: ({"multitree": {"algorithm": a, "sample": 0.5, "recompute": "1s", "window": "2s",
                                     "improvement": 0.0}}, {}) for a in ("MULT", "MULT2", "SINGLE", "OPT")},
    "faults": {"faults": ({"faults": FAULTS}, {})},
    "moving clients": {"moving clients": ({"moves": True}, {})},
}
# the event by which a run shows that a feature acted in it
EVIDENCE = {"relocation": "publisher_migrated", "+moves": "delta_move_done",
            **{s: "soft_link_opened" for s in ("S1", "S2", "SH", "SH+moves")},  # S0 keeps to the tree
            "multitree": "multitree_activated", "faults": "fault_started", "moving clients": "move_drained",
            "selective": "subscription_preserved"}
PAIRS = [((k1, n1), (k2, n2)) for (k1, names1), (k2, names2) in itertools.combinations(FEATURES.items(), 2)
         for n1 in names1 for n2 in names2]
# what validate refuses, by the kinds (and names) of a pair: everything else must run exactly
REFUSED = {
    ("covering:lazy", "pruning"), ("covering:packing", "soft links"), ("pruning", "soft links"),
    ("pruning", "multitree"), ("covering", "multitree"), ("soft links", "relocation"), ("soft links", "multitree"),
    ("relocation", "multitree"), ("multitree", "faults"),
    ("soft links:+moves", "faults"), ("soft links:+moves", "moving clients"),
    ("covering", "soft links:S1+moves"), ("covering", "soft links:SH+moves"),
}


def refused(first: tuple[str, str], second: tuple[str, str]) -> bool:
    def named(kind: str, name: str) -> set[str]:
        return {kind, f"{kind}:{name}"} | ({f"{kind}:+moves"} if name.endswith("+moves") else set())

    a, b = named(*first), named(*second)
    return any((x in a and y in b) or (x in b and y in a) for x, y in REFUSED)


def scenario(first: tuple[str, str], second: tuple[str, str]) -> dict:
    (own1, needs1), (own2, needs2) = FEATURES[first[0]][first[1]], FEATURES[second[0]][second[1]]
    protocol = {"covering": "none", **needs1, **needs2, **own1, **own2}
    moves = protocol.pop("moves", False)
    faults = protocol.pop("faults", None)
    found = {
        "name": "composition", "seed": SEED, "duration": "6s",
        "topology": {"generator": {"name": "random_tree", "n": BROKERS, "seed": SEED}, "link": {"latency": "5ms"}},
        "workload": {"generator": {"name": "random_mix", "publishers": 3, "subscribers": 10, "operations": 400,
                                   "spacing": 0.01, "moves": moves}},
        "protocol": protocol,
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "0.5s"},
    }
    if faults:
        found["faults"] = faults
    return found


@pytest.mark.parametrize("first, second", PAIRS, ids=[f"{a[1]}-{b[1]}" for a, b in PAIRS])
def test_an_accepted_pair_runs_exactly_and_a_refused_one_says_why(write_scenario, tmp_path, capsys, first, second):
    path = write_scenario(scenario(first, second))
    if refused(first, second):
        assert main(["validate", str(path)]) == 2
        assert "protocol." in capsys.readouterr().err
        return
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0, capsys.readouterr().err
    result = check(RunDir(out))
    assert result["exact"], json.dumps({k: result[k] for k in ("missing", "extra", "duplicate", "excused")})
    assert result["expected_pairs"] > 300
    happened = set(read_table(out, "events").column("kind").to_pylist())
    shown = [EVIDENCE.get(key) for kind, name in (first, second)
             for key in (kind, name, "+moves" if name.endswith("+moves") else None)]
    assert {event for event in shown if event} <= happened


def test_the_matrix_runs_most_pairs():
    accepted = [pair for pair in PAIRS if not refused(*pair)]
    assert len(accepted) >= 70 and len(PAIRS) - len(accepted) >= 40
