"""Emulated faults: recovery to the oracle's deliveries under every protocol, routing tables
that converge, accounting with drops by cause, each fault kind's effect, and identical results
however the run is hosted."""
import json

import pytest

import topologies
from actors.faults import FaultSchedule, parse_faults
from actors.results import read_table
from actors.storage import RunDir
from experiments.check import check
from experiments.cli import main
from workloads.generators import random_mix

from .oracle import expected_deliveries

SEED, BROKERS = 3, 12
GRAPH = topologies.random_tree(BROKERS, SEED)
EDGES = sorted(tuple(sorted(e)) for e in GRAPH.edges)
HUB = max(sorted(GRAPH), key=GRAPH.degree)
SETTLED = 22.0  # seconds: every fault below is over and resynchronised by then


def every_kind() -> list[dict]:
    """One fault of each kind, all over by 20 s, on the random tree."""
    return [
        {"t": "5s", "kind": "crash", "broker": HUB, "restart_after": "3s"},
        {"t": "6s", "kind": "link_down", "a": EDGES[3][0], "b": EDGES[3][1], "until": "9s"},
        {"t": "10s", "kind": "partition", "groups": [[EDGES[5][0]]], "until": "13s"},
        {"t": "1s", "kind": "loss", "a": EDGES[6][0], "b": EDGES[6][1], "probability": 0.3, "until": "15s"},
        {"t": "1s", "kind": "delay", "a": EDGES[7][0], "b": EDGES[7][1], "extra": "20ms", "jitter": "30ms",
         "until": "20s"},
        {"t": "2s", "kind": "slow", "broker": EDGES[8][0], "factor": 10, "until": "12s"},
    ]


def fault_scenario(protocol: dict | None = None, faults=None, **runtime) -> dict:
    scenario = {
        "name": "faults", "seed": SEED, "duration": "30s",
        "topology": {"generator": {"name": "random_tree", "n": BROKERS, "seed": SEED}},
        "workload": {"generator": {"name": "random_mix", "operations": 1200, "spacing": 0.025, "moves": False}},
        "protocol": protocol or {},
        "runtime": {"hosts": 0, "costs": "zero", **runtime},
    }
    if faults is not None:
        scenario["faults"] = faults
    return scenario


def workload() -> list[dict]:
    return random_mix(sorted(GRAPH), seed=SEED, operations=1200, spacing=0.025, moves=False)


def run(write_scenario, tmp_path, scenario: dict, name: str, *sets: str) -> dict:
    out = tmp_path / name
    args = [arg for value in sets for arg in ("--set", value)]
    assert main(["run", str(write_scenario(scenario, name=f"{name}.yaml")), "--out", str(out), *args]) == 0
    return {t: read_table(out, t).to_pandas() for t in ("deliveries", "messages", "samples", "events", "expected")}


def pairs(deliveries, publications=None) -> set:
    found = set(zip(deliveries.pub_id, deliveries.sub_id))
    return found if publications is None else {p for p in found if p[0] in publications}


STACKS = {
    "base": {},
    "lazy": {"covering": "lazy"},
    "active": {"covering": "active"},
    "packing": {"covering": "packing"},
    "selective": {"covering": "active", "pruning": {"variant": "selective"}},
    "incremental": {"covering": "packing", "pruning": {"variant": "incremental"}},
    "soft links": {"covering": "active", "soft_links": {"strategy": "SH"}},
    "relocation": {"covering": "active", "relocation": {"algorithm": "grape"}},
}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_after_recovery_deliveries_equal_the_oracle(write_scenario, tmp_path, stack):
    tables = run(write_scenario, tmp_path, fault_scenario(STACKS[stack], every_kind()), "run")
    records = workload()
    expected = expected_deliveries(records)
    later = {r["id"] for r in records if r["op"] == "publish" and r["t"] > SETTLED}
    delivered = tables["deliveries"]
    assert len(delivered) == len(delivered[["pub_id", "sub_id"]].drop_duplicates()), "duplicate deliveries"
    assert pairs(delivered, later) == {p for p in expected if p[0] in later} and len(later) > 100
    assert len(expected - pairs(delivered)) > 100  # the faults did cost deliveries while they lasted
    checked = check(RunDir(tmp_path / "run"))  # and nothing outside the faults' windows
    assert checked["exact"] and checked["excused"]["fault"] >= len(expected - pairs(delivered)), checked["excused"]


def test_routing_tables_converge_to_those_of_a_run_without_faults(write_scenario, tmp_path):
    final = {}
    for name, faults in (("faults", every_kind()), ("none", None)):
        samples = run(write_scenario, tmp_path, fault_scenario(faults=faults), name)["samples"]
        final[name] = samples[samples.t_us == samples.t_us.max()].set_index("broker")[["prt_size", "srt_size"]]
    assert final["faults"].equals(final["none"])


def test_accounting_balances_and_drops_name_their_cause(write_scenario, tmp_path):
    tables = run(write_scenario, tmp_path, fault_scenario({"covering": "active"}, every_kind(),
                                                          costs="padres", mailbox={"capacity": 2}), "run")
    m = tables["messages"]
    processed, dropped = m.t_start_us.notna(), m.dropped
    queued = ~dropped & ~processed
    assert (processed & dropped).sum() == 0 and len(m) == processed.sum() + dropped.sum() + queued.sum()
    causes = m[dropped].groupby("cause").size().to_dict()
    assert set(causes) == {"link down", "loss", "crashed broker", "mailbox full"}, causes
    assert m[~dropped].cause.isna().all()
    crashed = m[m.cause == "crashed broker"]
    assert set(crashed.broker) == {HUB} and crashed.t_arrive_us.between(5_000_000, 8_000_000).all()
    lost = m[m.cause == "loss"]
    assert {tuple(sorted(p)) for p in zip(lost.broker, lost.sender)} == {EDGES[6]}
    events = tables["events"]
    started = sorted(json.loads(d)["fault"] for d in events[events.kind == "fault_started"].detail)
    ended = sorted(json.loads(d)["fault"] for d in events[events.kind == "fault_ended"].detail)
    assert started == ended == list(range(6))
    expected = tables["expected"]
    assert expected.subscribers.sum() == len(expected_deliveries(workload())) > 1000


def test_a_crash_loses_state_and_publications_but_clients_keep_their_subscriptions(write_scenario, tmp_path):
    ops = [
        {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"},
        {"t": 0.5, "op": "subscribe", "client": "S", "broker": "B2", "id": "S1", "filter": "[x,>,0]"},
        {"t": 1, "op": "publish", "client": "P", "id": "M1", "content": "[x,1]"},
        {"t": 2.5, "op": "subscribe", "client": "T", "broker": "B2", "id": "S2", "filter": "[x,>,5]"},
        {"t": 3, "op": "publish", "client": "P", "id": "M2", "content": "[x,9]"},  # B2 is down
        {"t": 3.5, "op": "publish", "client": "Q", "id": "M3", "content": "[x,9]"},  # a client of B2 publishes
        {"t": 6, "op": "publish", "client": "P", "id": "M4", "content": "[x,9]"},
    ]
    scenario = {"name": "crash", "seed": 1, "topology": {"generator": {"name": "line", "n": 3}},
                "workload": {"trace": "ops.jsonl"}, "runtime": {"hosts": 0, "costs": {"base": {"default": 100}}},
                "faults": [{"t": "2s", "kind": "crash", "broker": "B2", "restart_after": "2s"}]}
    ops.insert(3, {"t": 2.2, "op": "advertise", "client": "Q", "broker": "B2", "id": "AQ", "filter": "[x,>,0]"})
    out = tmp_path / "run"
    trace = "\n".join(json.dumps(r) for r in ops)
    assert main(["run", str(write_scenario(scenario, {"ops.jsonl": trace})), "--out", str(out)]) == 0
    delivered = pairs(read_table(out, "deliveries").to_pandas())
    assert delivered == {("M1", "S1"), ("M4", "S1"), ("M4", "S2")}
    m = read_table(out, "messages").to_pandas()
    lost = m[m.dropped]
    assert sorted(zip(lost.kind, lost.msg_id, lost.sender.fillna("client"))) == [
        ("pub", "M2", "B1"), ("pub", "M3", "client")]
    # at the restart its client re-issued S1, then the operations it issued meanwhile came, in order
    again = m[(m.broker == "B2") & m.sender.isna() & (m.t_arrive_us == 4_000_000)].sort_values("t_start_us")
    assert list(again.msg_id) == ["S1", "AQ", "S2"]


def test_a_slow_broker_serves_factor_times_slower(write_scenario, tmp_path):
    slow = EDGES[8][0]
    durations = {}
    for name, faults in (("slow", [{"t": "2s", "kind": "slow", "broker": slow, "factor": 10, "until": "12s"}]),
                         ("normal", None)):
        m = run(write_scenario, tmp_path, fault_scenario(faults=faults, costs="padres"), name)["messages"]
        m = m[(m.broker == slow) & m.t_start_us.between(2_000_000, 11_000_000)]
        durations[name] = dict(zip(zip(m.kind, m.msg_id, m.sender.fillna("")), m.t_end_us - m.t_start_us))
    assert len(durations["slow"]) > 50
    assert durations["slow"] == {key: 10 * value for key, value in durations["normal"].items()}


def test_schedule_draws_are_seeded_per_message_and_delays_stay_in_bounds():
    a, b = EDGES[0]
    faults = parse_faults([
        {"t": 0, "kind": "loss", "a": a, "b": b, "probability": 0.25, "until": "10s"},
        {"t": 0, "kind": "delay", "a": a, "b": b, "extra": "20ms", "jitter": "5ms"},
        {"t": "1s", "kind": "partition", "groups": [[a]], "until": "2s"},
    ], topologies.neighbours(GRAPH), lambda v, _: int(float(v.rstrip("s")) * 1e6) if isinstance(v, str) else v,
        lambda v, _: int(float(v.rstrip("ms")) * 1000))
    schedule = FaultSchedule(faults, 7, topologies.neighbours(GRAPH))
    losses = [schedule.drop_cause(a, b, 500_000, seq) for seq in range(4000)]
    assert 0.22 < losses.count("loss") / 4000 < 0.28
    assert losses == [FaultSchedule(faults, 7, topologies.neighbours(GRAPH)).drop_cause(a, b, 500_000, seq)
                      for seq in range(4000)]
    assert losses != [FaultSchedule(faults, 8, topologies.neighbours(GRAPH)).drop_cause(a, b, 500_000, seq)
                      for seq in range(4000)]
    delays = {schedule.extra_delay(a, b, 0, seq) for seq in range(500)}
    assert min(delays) >= 20_000 and max(delays) <= 25_000 and len(delays) > 100
    other = next(n for n in sorted(GRAPH) if n not in (a, b) and n not in GRAPH[a])
    assert schedule.drop_cause(a, b, 10_000_000, 1) is None
    assert schedule.drop_cause(other, a, 1_500_000, 1) == "link down" and not schedule.link_up(a, b, 1_500_000)
    assert schedule.link_up(a, b, 2_000_000)


@pytest.mark.ray
@pytest.mark.slow
def test_identical_results_across_host_counts_with_every_fault_kind(write_scenario, tmp_path, ray_session):
    graph = topologies.random_tree(6, 1)
    edges = sorted(tuple(sorted(e)) for e in graph.edges)
    hub = max(sorted(graph), key=graph.degree)
    scenario = {
        "name": "faults-hosts", "seed": 2, "duration": "10s",
        "topology": {"generator": {"name": "random_tree", "n": 6, "seed": 1}, "link": {"latency": "50ms"}},
        "workload": {"generator": {"name": "random_mix", "operations": 400, "spacing": 0.02}},
        "protocol": {"covering": "active"},
        "runtime": {"hosts": 0, "costs": "padres", "mailbox": {"capacity": 5}},
        "faults": [
            {"t": "2s", "kind": "crash", "broker": hub, "restart_after": "1s"},
            {"t": "3s", "kind": "link_down", "a": edges[1][0], "b": edges[1][1], "until": "4s"},
            {"t": "4.5s", "kind": "partition", "groups": [[edges[2][1]]], "until": "5.5s"},
            {"t": "0s", "kind": "loss", "a": edges[3][0], "b": edges[3][1], "probability": 0.3, "until": "6s"},
            {"t": "0s", "kind": "delay", "a": edges[4][0], "b": edges[4][1], "extra": "20ms", "jitter": "30ms",
             "until": "7s"},
            {"t": "1s", "kind": "slow", "broker": edges[0][0], "factor": 10, "until": "5s"},
        ],
    }
    results = {hosts: run(write_scenario, tmp_path, scenario, f"hosts-{hosts}", f"runtime.hosts={hosts}")
               for hosts in (0, 2, "all")}
    assert results[0]["messages"].dropped.sum() > 20
    for hosts in (2, "all"):
        for table, rows in results[0].items():
            other = results[hosts][table]
            columns = list(rows.columns)
            assert rows.sort_values(columns).reset_index(drop=True).equals(
                other.sort_values(columns).reset_index(drop=True)), f"{table} differs with hosts={hosts}"
