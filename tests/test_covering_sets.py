"""The soft-link paper's covering sets (Fig. 12), measured after a run: protocols/covering_sets.py."""
import json

import networkx as nx
import pyarrow as pa
import pytest

from actors.results import SCHEMAS
from protocols.covering_sets import measure
from workloads.trace import compile_trace

S = 1_000_000
CHAIN = nx.path_graph([f"B{i}" for i in range(5)])  # B0 - B1 - B2 - B3 - B4
WIDE = "[x,>=,0],[x,<,100]"
SUBSCRIPTIONS = [  # (id, subscriber's broker, filter); from B0 with delta 2, B3's and B4's anchor is B2
    ("s1", "B4", WIDE),
    ("s2", "B1", "[x,>=,10],[x,<,20],[y,>=,50],[y,<,60]"),
    ("s3", "B3", "[x,>=,30],[x,<,40]"),
    ("s4", "B3", WIDE),  # s1's twin, subscribed later
    ("s5", "B4", "[x,>=,1]"),  # never reaches B0's table
]


def records() -> list[dict]:
    found = [{"t": 0.1 * i, "op": "subscribe", "client": f"C{sub}", "broker": broker, "id": sub, "filter": f}
             for i, (sub, broker, f) in enumerate(SUBSCRIPTIONS)]
    found.append({"t": 1.0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,-1],[y,>,-1]"})
    found += [{"t": t, "op": "publish", "client": "P", "id": f"M{t}", "content": "[x,15],[y,5]"} for t in (3, 7)]
    return found


def table(name: str, rows: list[dict]) -> pa.Table:
    schema = SCHEMAS[name]
    return pa.Table.from_pylist([{c: row.get(c) for c in schema.names} for row in rows], schema)


def run_tables(soft_link_at_s: float | None) -> dict[str, pa.Table]:
    """What a run at B0 recorded: the subscriptions s1-s4 handled at 1 s, s3's unsubscription
    at 7.5 s, the publications at 3 and 7 s; a soft link to B2 from ``soft_link_at_s``."""
    handled = [{"broker": "B0", "kind": "sub", "msg_id": sub, "t_start_us": S} for sub in ("s1", "s2", "s3", "s4")]
    handled += [{"broker": "B0", "kind": "unsub", "msg_id": "s3", "t_start_us": 7.5 * S},
                {"broker": "B0", "kind": "pub", "msg_id": "M3", "t_start_us": 3 * S},
                {"broker": "B0", "kind": "pub", "msg_id": "M7", "t_start_us": 7 * S},
                {"broker": "B1", "kind": "sub", "msg_id": "s5", "t_start_us": S}]
    events = [] if soft_link_at_s is None else [
        {"t_us": int(soft_link_at_s * S), "broker": "B0", "kind": "soft_link_opened",
         "detail": json.dumps({"peer": "B2", "gain": 3})}]
    return {"messages": table("messages", handled), "events": table("events", events),
            "samples": table("samples", [{"t_us": 8 * S, "broker": "B0"}])}


def measured_at_b0(strategy: str, soft_link_at_s: float | None) -> list[tuple]:
    tables = run_tables(soft_link_at_s)
    injections = compile_trace(records(), sorted(CHAIN))
    rows = measure(CHAIN, injections, strategy, 2, {}, 2 * S, lambda name, columns: tables[name].select(columns))
    found = pa.table(rows).to_pylist()
    return [(r["t_us"] // S, r["entries"], r["wst_anchors"], r["covering_set_size"], r["publications"],
             r["predicate_evaluations"]) for r in found if r["broker"] == "B0"]


def test_a_soft_link_splits_a_covering_set_as_the_papers_example():
    """The paper's example: s1 covers s2 while both lie behind B0's one link (the covering set
    is {s1}); once a soft link to B2 holds s1's anchor apart, s2 is a covering set of its own.
    s4, s1's later twin, never counts. A sample's publications are those from it to the next: the
    one at 3 s evaluates s1's two predicates against the sets of 2 s, the one at 7 s those and
    s2's first three (y >= 50 fails) against the sets of 6 s."""
    # (t, entries, WST anchors, covering-set size, publications, predicate evaluations)
    assert measured_at_b0("S2", soft_link_at_s=5) == [
        (2, 4, 1, 1, 1, 2), (4, 4, 1, 1, 0, 0), (6, 4, 2, 2, 1, 5), (8, 3, 2, 2, 0, 0)]


@pytest.mark.parametrize("strategy", ["S0", "S2"])
def test_without_soft_links_every_subscription_shares_the_neighbours_covering_set(strategy):
    assert [row[3] for row in measured_at_b0(strategy, soft_link_at_s=None)] == [1, 1, 1, 1]


def test_under_s0_anchors_are_the_neighbours_whatever_links_are_open():
    assert [row[2:4] for row in measured_at_b0("S0", soft_link_at_s=5)] == [(1, 1)] * 4


def small_scenario(covering_sets: str | None) -> dict:
    soft = {"strategy": "S2", "delta": 3, "fanout": 5, "round": "1s", "profile_window": "1s", "block": "4s"}
    if covering_sets:
        soft["covering_sets"] = covering_sets
    return {
        "name": "covering-sets", "seed": 3, "duration": "6s",
        "topology": {"generator": {"name": "random_tree", "n": 16, "seed": 3, "max_degree": 3}},
        "workload": {"generator": {"name": "zipf_groups", "interest": "broker", "publishers": 4, "groups": 2,
                                   "subscriptions": 120, "refine": 0.5, "publications": 300}},
        "protocol": {"soft_links": soft},
        "runtime": {"hosts": 0, "costs": "zero", "sample_interval": "1s"},
    }


def test_a_run_asked_for_covering_sets_writes_them_and_others_do_not(write_scenario, tmp_path):
    from actors.results import read_table
    from experiments.cli import main

    for asked in ("2s", None):
        out = tmp_path / f"run-{asked}"
        assert main(["run", str(write_scenario(small_scenario(asked))), "--out", str(out)]) == 0
        rows = read_table(out, "covering_sets").to_pylist()
        if asked is None:
            assert rows == []
            continue
        assert sorted({r["t_us"] for r in rows}) == [2 * S, 4 * S, 6 * S] and len(rows) == 16 * 3
        assert all(0 < r["covering_set_size"] <= r["entries"] for r in rows if r["entries"])
        assert sum(r["publications"] for r in rows) > 0


def test_covering_sets_are_refused_with_clients_that_move(write_scenario, capsys):
    from experiments.cli import main

    scenario = small_scenario("2s")
    scenario["workload"] = {"generator": {"name": "random_mix", "publishers": 2, "subscribers": 6, "operations": 200,
                                          "moves": True}}
    assert main(["validate", str(write_scenario(scenario))]) == 2
    assert "covering_sets are not measured with Delta-moves or clients that move" in capsys.readouterr().err
