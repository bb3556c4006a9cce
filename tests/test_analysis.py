"""The analysis job, run once with local Spark over three runs, against metrics recomputed here
with pandas and networkx (a different algorithm for false positives), plus a hand-made run
whose false positives and pure forwarders are counted by hand."""
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from actors.coordinator import run
from actors.results import read_table, write_table
from analysis import submit
from analysis.job import Requested, default_bucket_us
from analysis.metrics import overlay_positions
from analysis.runs import Run, RunError
from analysis.window import WHOLE_RUN, Window
from experiments.build import resolve
from tests.conftest import PROJECT_ROOT

SCENARIOS = PROJECT_ROOT / "experiments" / "scenarios"
BUCKET_S = 10


def _hand_made_run(path):
    """Tree A-B, B-C, B-D. M1 from A reaches B, C, D and is delivered at C only: B->D is a
    false positive, B a pure forwarder. M2 from C reaches B and A, delivered at A. M3 from D
    reaches B and nobody wants it: D->B is a false positive. Then an unsubscription of R1 at C
    releases three subscriptions, packed in one batch to B."""
    copies = [("A", None, "M1"), ("B", "A", "M1"), ("C", "B", "M1"), ("D", "B", "M1"),
              ("C", None, "M2"), ("B", "C", "M2"), ("A", "B", "M2"),
              ("D", None, "M3"), ("B", "D", "M3")]
    n = len(copies)
    write_table(path, "messages/part-00000-0000-000000.parquet", "messages", {
        "broker": [c[0] for c in copies] + ["B"], "sender": [c[1] for c in copies] + ["C"],
        "kind": ["pub"] * n + ["sub_batch"], "msg_id": [c[2] for c in copies] + ["R1"],
        "t_arrive_us": [1_000_000 * i for i in range(n + 1)], "t_start_us": [1_000_000 * i for i in range(n + 1)],
        "t_end_us": [1_000_000 * i + 10 for i in range(n + 1)], "queue_len": [0] * (n + 1), "sent": [0] * (n + 1),
        "dropped": [False] * (n + 1), "cause": [None] * (n + 1), "batch_size": [None] * n + [3],
        "triggered_by": [None] * n + ["R1"], "origin": [None] * (n + 1)})
    write_table(path, "deliveries/part-00000-0000-000001.parquet", "deliveries", {
        "pub_id": ["M1", "M2"], "sub_id": ["S1", "S2"], "client": ["c1", "c2"], "broker": ["C", "A"],
        "t_pub_us": [0, 4_000_000], "t_deliver_us": [2_000_010, 6_000_010], "hops": [2, 2]})
    write_table(path, "links/part-0.parquet", "links",
                {"a": ["A", "B", "B"], "b": ["B", "C", "D"], "latency_us": [1000] * 3})
    write_table(path, "brokers/part-0.parquet", "brokers",
                {"broker": list("ABCD"), "role": ["edge", "core", "edge", "edge"], "host": [0] * 4})
    (path / "manifest.json").write_text(json.dumps({"name": "hand", "status": "complete", "sim_end_us": 10_000_000,
                                                    "brokers": 4}))


def _drop_protocol_columns(run_dir):
    """Rewrite a run's messages as a run from before protocols added ``cause``, ``batch_size``,
    ``triggered_by`` and ``origin``."""
    for part in (run_dir / "messages").glob("*.parquet"):
        pq.write_table(pq.read_table(part).drop_columns(["cause", "batch_size", "triggered_by", "origin"]), part)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    runs = {}
    for mode in ("active", "none"):
        spec = resolve(SCENARIOS / f"unsub_burst_small_{mode}.yaml", ["duration=120s"])
        runs[spec.name] = root / mode
        run(spec, runs[spec.name], progress=False)
    _drop_protocol_columns(runs["unsub_burst_small_none"])
    spec = resolve(SCENARIOS / "relocation_small_enterprise_grape_load.yaml")
    runs[spec.name] = root / "relocation"
    run(spec, runs[spec.name], progress=False)
    spec = resolve(SCENARIOS / "multitree_small_mult.yaml")
    runs[spec.name] = root / "multitree"
    run(spec, runs[spec.name], progress=False)
    spec = resolve(SCENARIOS / "faults_small_flapping_link.yaml", ["duration=25s", "workload.generator.operations=2200"])
    runs[spec.name] = root / "faults"
    run(spec, runs[spec.name], progress=False)
    runs["hand"] = root / "hand"
    _hand_made_run(runs["hand"])
    out = root / "report"
    uri = {label: f"file://{path}" if label == spec.name else str(path) for label, path in runs.items()}
    # the first python3 on the PATH is one without pyarrow, as outside an activated virtual
    # environment: the job must run with the interpreter that started it
    no_pyarrow = root / "bin"
    no_pyarrow.mkdir()
    for name in ("python3", "python"):
        (no_pyarrow / name).write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'pyarrow'\" >&2\nexit 1\n")
        (no_pyarrow / name).chmod(0o755)
    environment = {**os.environ, "PATH": f"{no_pyarrow}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("PYSPARK_PYTHON", None)
    result = subprocess.run(
        # one run named by its file:// URI: the job reads run directories through pyarrow's filesystems
        [sys.executable, "-m", "experiments.cli", "analyze", *uri.values(), "--out", str(out),
         "--bucket", str(BUCKET_S), "--driver-memory", "1g"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    return runs, out


def _metric(out, name) -> pd.DataFrame:
    return pq.read_table(out / "tables" / name).to_pandas()


def _table(run_dir, table) -> pd.DataFrame:
    return read_table(run_dir, table).to_pandas()


def _real_runs(analysed):
    runs, _ = analysed
    return {label: path for label, path in runs.items() if label != "hand"}


@pytest.mark.slow
def test_summary_matches_the_run_tables(analysed):
    runs, out = analysed
    summary = _metric(out, "summary").set_index("run")
    for label, path in _real_runs(analysed).items():
        d, m = _table(path, "deliveries"), _table(path, "messages")
        delay = (d.t_deliver_us - d.t_pub_us) / 1e6
        row = summary.loc[label]
        assert row.deliveries == len(d) > 0
        assert row.publications == ((m.kind == "pub") & m.sender.isna()).sum()
        assert row.mean_s == pytest.approx(delay.mean())
        assert row.max_s == pytest.approx(delay.max())
        assert row.p90_s == pytest.approx(np.quantile(delay, 0.9, method="inverted_cdf"))
        assert row.mean_hops == pytest.approx(d.hops.mean())
        assert row.messages_processed == m.t_end_us.notna().sum()
        causes = m.triggered_by if "triggered_by" in m else pd.Series([None] * len(m))
        assert row.triggered_subs == (m.kind.isin(["sub", "sub_batch"]) & causes.notna()).sum()
        assert row.peak_queue == m.queue_len.max()
        s = _table(path, "samples").merge(_table(path, "brokers")[["broker", "role"]], on="broker")
        at_end = s[s.t_us == s.t_us.max()]
        assert row.final_mean_prt == pytest.approx(at_end.prt_size.mean())
        core = at_end[at_end.role == "core"].prt_size
        assert row.final_core_prt == pytest.approx(core.mean()) if len(core) else pd.isna(row.final_core_prt)
        assert row.peak_mean_queue == pytest.approx(s.groupby("t_us").queue_len.mean().max())
        assert pd.isna(row.mean_counting_in_flight_s)  # made by run, never checked by figure
        core_queues = s[s.role == "core"].groupby("t_us").queue_len.mean()
        assert row.peak_core_mean_queue == pytest.approx(core_queues.max()) if len(core_queues) \
            else pd.isna(row.peak_core_mean_queue)
    burst = summary.loc["unsub_burst_small_active"]
    assert burst.final_core_prt > burst.final_mean_prt
    assert burst.triggered_subs > 0
    assert 0 < burst.peak_mean_queue < burst.peak_core_mean_queue < burst.peak_queue  # one core broker queues longest
    csv = pd.read_csv(out / "summary.csv")
    assert sorted(csv.run) == sorted(runs)



@pytest.mark.slow
def test_probe_delay_is_over_the_probes_deliveries_alone(analysed):
    """The small burst scenarios carry delay probes from 60 s after the last unsubscription (those
    issued before the fixture's 120 s end); the summary's probe columns are over their deliveries
    alone, and null in a run without."""
    runs, out = analysed
    summary = _metric(out, "summary").set_index("run")
    for label in ("unsub_burst_small_active", "unsub_burst_small_none"):
        d, m = _table(runs[label], "deliveries"), _table(runs[label], "messages")
        issued = m[(m.kind == "pub") & m.sender.isna() & m.msg_id.str.startswith("probe-")].msg_id
        probes = d[d.pub_id.str.startswith("probe-")]
        assert len(issued) >= 10 and set(probes.pub_id) == set(issued)
        assert (probes.groupby("pub_id").broker.nunique() == 32).all()  # a subscriber at every edge broker
        delay = (probes.t_deliver_us - probes.t_pub_us) / 1e6
        row = summary.loc[label]
        assert row.probe_mean_s == pytest.approx(delay.mean()) and row.probe_mean_s != pytest.approx(row.mean_s)
        assert row.probe_p10_s == pytest.approx(np.quantile(delay, 0.1, method="inverted_cdf"))
        assert row.probe_p90_s == pytest.approx(np.quantile(delay, 0.9, method="inverted_cdf"))
    assert summary.loc["relocation_small_enterprise_grape_load"][["probe_mean_s", "probe_p90_s"]].isna().all()

@pytest.mark.slow
def test_delay_over_time_per_bucket(analysed):
    table = _metric(analysed[1], "delay_over_time")
    for label, path in _real_runs(analysed).items():
        d = _table(path, "deliveries")
        d["delay"] = (d.t_deliver_us - d.t_pub_us) / 1e6
        d["t_s"] = d.t_deliver_us // (BUCKET_S * 1_000_000) * BUCKET_S
        ours = table[table.run == label].set_index("t_s").sort_index()
        expected = d.groupby("t_s").delay
        assert list(ours.index) == list(expected.count().index)
        assert list(ours.deliveries) == list(expected.count())
        np.testing.assert_allclose(ours.mean_s, expected.mean())
        np.testing.assert_allclose(ours.max_s, expected.max())
        for name, q in (("p10_s", 0.1), ("p50_s", 0.5), ("p90_s", 0.9)):
            np.testing.assert_allclose(ours[name], expected.apply(lambda x: np.quantile(x, q, method="inverted_cdf")))


@pytest.mark.slow
def test_queues_table_sizes_and_load(analysed):
    runs, out = analysed
    queues, sizes, load, arrivals = (_metric(out, n) for n in (
        "queue_over_time", "table_size_over_time", "broker_load", "queue_at_arrivals"))
    for label, path in _real_runs(analysed).items():
        s = _table(path, "samples").merge(_table(path, "brokers")[["broker", "role"]], on="broker")
        s["t_s"] = s.t_us / 1e6
        ours = queues[queues.run == label].set_index("t_s").sort_index()
        np.testing.assert_allclose(ours.mean_queue, s.groupby("t_s").queue_len.mean())
        np.testing.assert_allclose(ours.max_queue, s.groupby("t_s").queue_len.max())
        core = sizes[(sizes.run == label) & (sizes.role == "core")].set_index("t_s").sort_index()
        np.testing.assert_allclose(core.mean_prt, s[s.role == "core"].groupby("t_s").prt_size.mean())
        sim_end = json.loads((path / "manifest.json").read_text())["sim_end_us"]
        ours_load = load[load.run == label].set_index("broker").sort_index()
        busy = s.groupby("broker").busy_us.sum() / sim_end
        np.testing.assert_allclose(ours_load.utilisation, busy.sort_index())
        m = _table(path, "messages")
        m["t_s"] = m.t_arrive_us // (BUCKET_S * 1_000_000) * BUCKET_S
        expected = m.groupby(["broker", "t_s"]).queue_len.max()
        ours_arrivals = arrivals[arrivals.run == label].set_index(["broker", "t_s"]).sort_index().max_queue
        assert ours_arrivals.tolist() == expected.tolist() and expected.max() > 0


@pytest.mark.slow
def test_messages_hops_and_throughput(analysed):
    runs, out = analysed
    by_broker, hops, flow = (_metric(out, n) for n in ("messages_by_broker", "hop_counts", "throughput"))
    for label, path in _real_runs(analysed).items():
        m, d = _table(path, "messages"), _table(path, "deliveries")
        ours = by_broker[by_broker.run == label].set_index(["broker", "kind"]).sort_index()
        expected = m.groupby(["broker", "kind"])
        assert list(ours.arrived) == list(expected.size())
        assert list(ours.processed) == list(expected.t_end_us.count())
        causes = m.triggered_by if "triggered_by" in m else pd.Series([None] * len(m))
        assert list(ours.triggered_messages) == list(causes.notna().groupby([m.broker, m.kind]).sum())
        ours_hops = hops[hops.run == label].set_index("hops").sort_index()
        assert list(ours_hops.deliveries) == list(d.groupby("hops").size())
        assert ours_hops.cdf.iloc[-1] == pytest.approx(1.0)
        copies = m[(m.kind == "pub") & m.sender.notna()]
        ours_flow = flow[flow.run == label].set_index("t_s")
        bucket = copies.t_arrive_us // (BUCKET_S * 1_000_000) * BUCKET_S
        for t_s, count in copies.groupby(bucket).size().items():
            assert ours_flow.loc[t_s, "pub_copies"] == count
            assert ours_flow.loc[t_s, "pub_copies_per_s"] == pytest.approx(count / BUCKET_S)
        if not (path / "expected").exists():  # nothing says what it owed: no backlog, no share
            summary = _metric(out, "summary").set_index("run")
            assert ours_flow.backlog.isna().all() and ours_flow.owed_per_s.isna().all(), label
            assert pd.isna(summary.loc[label, "delivered_share"]), label
    batch = by_broker[(by_broker.run == "hand") & (by_broker.kind == "sub_batch")].iloc[0]
    assert (batch.broker, batch.triggered, batch.triggered_messages, batch["items"]) == ("B", 3, 1, 3)


@pytest.mark.slow
def test_load_over_time_per_bucket(analysed):
    """Message rate, busy share and relocation control share by bucket of service start; mean
    hops by bucket of delivery."""
    from analysis.metrics import RELOCATION_KINDS

    table = _metric(analysed[1], "load_over_time")
    for label, path in _real_runs(analysed).items():
        m, d = _table(path, "messages"), _table(path, "deliveries")
        brokers = len(_table(path, "brokers"))
        served = m[m.t_start_us.notna()]
        bucket = served.t_start_us // (BUCKET_S * 1_000_000) * BUCKET_S
        ours = table[(table.run == label) & table.processed.notna()].set_index("t_s").sort_index()
        by_bucket = served.groupby(bucket)
        assert list(ours.index) == list(by_bucket.size().index)
        np.testing.assert_allclose(ours.msg_rate_per_broker, by_bucket.size() / brokers / BUCKET_S)
        busy = (served.t_end_us - served.t_start_us).groupby(bucket).sum()
        np.testing.assert_allclose(ours.busy_share, busy / 1e6 / brokers / BUCKET_S)
        np.testing.assert_allclose(ours.control_share, served.kind.isin(RELOCATION_KINDS).groupby(bucket).mean())
        hops = table[(table.run == label) & table.mean_hops.notna()].set_index("t_s").sort_index().mean_hops
        np.testing.assert_allclose(hops, d.hops.groupby(d.t_deliver_us // (BUCKET_S * 1_000_000) * BUCKET_S).mean())
    relocating = table[table.run == "relocation_small_enterprise_grape_load"]
    assert relocating.control_share.max() > 0


def false_positives_by_components(messages, deliveries, links):
    """False-positive copies by removing each link and looking at the receiving side."""
    tree = nx.Graph(list(zip(links.a, links.b)))
    delivered = deliveries.groupby("pub_id").broker.apply(set).to_dict()
    count = 0
    for copy in messages[(messages.kind == "pub") & messages.sender.notna() & messages.t_end_us.notna()].itertuples():
        cut = tree.copy()
        cut.remove_edge(copy.sender, copy.broker)
        beyond = nx.node_connected_component(cut, copy.broker)
        count += not (delivered.get(copy.msg_id, set()) & beyond)
    return count


@pytest.mark.slow
def test_forwarding_false_positives_and_pure_forwarders(analysed):
    runs, out = analysed
    by_role = _metric(out, "forwarding_by_role").set_index(["run", "role"])
    hand = by_role.loc[("hand", "all")]
    assert (hand.pub_copies, hand.received_over_links, hand.false_positives) == (9, 6, 2)
    # processed copies without a local delivery: all but M1 at C and M2 at A
    assert hand.pure_forward == 7
    assert by_role.loc[("hand", "core")].false_positives == 1  # M3 at B, from D
    for label, path in _real_runs(analysed).items():
        m, d, links = _table(path, "messages"), _table(path, "deliveries"), _table(path, "links")
        if nx.is_tree(nx.Graph(list(zip(links.a, links.b)))):
            expected = false_positives_by_components(m, d, links)
            assert by_role.loc[(label, "all")].false_positives == expected
        else:  # a link's far side is undefined on a graph with cycles: unknown, not zero
            assert by_role.loc[(label, "all")].received_over_links == 0
            assert np.isnan(by_role.loc[(label, "all")].false_positive_fraction)
        copies = m[(m.kind == "pub") & m.t_end_us.notna()]
        useful = copies.merge(d[["pub_id", "broker"]].drop_duplicates(), left_on=["msg_id", "broker"],
                              right_on=["pub_id", "broker"])
        assert by_role.loc[(label, "all")].pure_forward == len(copies) - len(useful)
        brokers = _table(path, "brokers")
        assert by_role.loc[(label, "all")].pub_copies_per_broker == pytest.approx(
            by_role.loc[(label, "all")].pub_copies / len(brokers))
        for role, n in brokers.role.fillna("none").value_counts().items():  # idle brokers count as 0
            if (label, role) in by_role.index:
                assert by_role.loc[(label, role)].pub_copies_per_broker == pytest.approx(
                    by_role.loc[(label, role)].pub_copies / n)


@pytest.mark.slow
def test_report_and_plots_exist(analysed):
    runs, out = analysed
    report = (out / "report.md").read_text()
    for label in runs:
        assert label in report
    images = sorted(out.glob("*.png"))
    assert len(images) >= 9 and all(p.stat().st_size > 5000 for p in images)
    for image in images:
        assert f"]({image.name})" in report
    assert "analysis: summary: " in (out / "analysis.log").read_text()  # Spark's output kept out of the terminal


@pytest.mark.slow
def test_relocation_metrics_match_the_events_and_messages(analysed):
    runs, out = analysed
    label = "relocation_small_enterprise_grape_load"
    path = runs[label]
    events, m = _table(path, "events"), _table(path, "messages")
    migrated = [json.loads(d) for d in events[events.kind == "publisher_migrated"].detail]
    moves = _metric(out, "migrations")
    moves = moves[moves.run == label].sort_values(["t_start_s", "publisher"])
    assert len(moves) == len(migrated) > 0
    expected = sorted(((d["t_start_us"] / 1e6, d["publisher"]), (d["t_end_us"] - d["t_start_us"]) / 1e6) for d in migrated)
    np.testing.assert_allclose(moves.wait_s, [wait for _, wait in expected])
    overlay = nx.from_pandas_edgelist(_table(path, "links"), "a", "b")
    assert list(moves.hops_moved) == [nx.shortest_path_length(overlay, origin, target)
                                      for origin, target in zip(moves.origin, moves.target)]
    assert moves.hops_moved.min() >= 1 and moves.hops_moved.nunique() > 1
    so_far = _metric(out, "migrations_over_time")
    so_far = so_far[so_far.run == label].sort_values("t_s", kind="stable")
    sim_end = json.loads((path / "manifest.json").read_text())["sim_end_us"] / 1e6
    assert list(so_far.migrations_so_far) == [*range(len(migrated) + 1), len(migrated)]
    np.testing.assert_allclose(so_far.t_s, [0.0, *sorted(t for (t, _), _ in expected), sim_end])
    row = _metric(out, "relocation").set_index("run").loc[label]
    processed = m[m.t_end_us.notna()]
    control = processed.kind.isin(["trace_collect", "trace_report", "migration_adv", "migration_done"]).sum()
    assert row.control_messages == control > 0
    assert row.control_share == pytest.approx(control / len(processed))
    per_broker = processed.groupby("broker").size().reindex(_table(path, "brokers").broker, fill_value=0)
    assert row.mean_msg_rate == pytest.approx((per_broker / sim_end).mean())
    assert row.migrations == len(migrated)
    summary = _metric(out, "summary").set_index("run")
    assert summary.loc[label].migrations == len(migrated) and summary.loc["unsub_burst_small_none"].migrations == 0
    state = _table(path, "samples").trace_state
    assert summary.loc[label].mean_trace_state == pytest.approx(state.mean())
    assert summary.loc[label].peak_trace_state == state.max() > 0
    assert pd.isna(summary.loc["unsub_burst_small_active"].mean_trace_state)  # no relocation: no trace state
    assert (out / "relocation.png").exists()


@pytest.mark.slow
def test_multitree_metrics_count_copies_before_and_after_the_first_plan(analysed):
    runs, out = analysed
    label = "multitree_small_mult"
    events, m = _table(runs[label], "events"), _table(runs[label], "messages")
    first_plan = events[events.kind == "multitree_activated"].t_us.min()
    pubs = m[m.kind == "pub"]
    published = pubs[pubs.sender.isna()].set_index("msg_id").t_arrive_us
    copies = pubs[pubs.sender.notna()].msg_id
    planned = published[published >= first_plan].index
    table = _metric(out, "multitree")
    assert list(table.run) == [label]  # only runs under multi-tree routing
    row = table.iloc[0]
    assert (row.algorithm, row.dataset, row["sample"]) == ("MULT", "Localized2", 0.5)
    assert row.publications == len(published) and row.copies == len(copies)
    assert row.planned_publications == len(planned) < len(published)
    assert row.planned_copies == copies.isin(planned).sum()
    assert row.planned_copies_per_publication == pytest.approx(row.planned_copies / len(planned))
    arrived = pubs[pubs.sender.notna() & pubs.msg_id.isin(planned)]
    assert row.planned_duplicates == len(arrived) - len(arrived.drop_duplicates(["msg_id", "broker"])) > 0
    plans = [json.loads(d) for d in events[events.kind == "multitree_recomputed"].sort_values("t_us").detail]
    installed = [d for d in plans if d["installed"]]
    assert row.plans_installed == len(installed) >= 2 and row.clusters == installed[-1]["clusters"]
    steps = _metric(out, "multitree_steps").sort_values(["plan", "step"])
    assert list(steps.run.unique()) == [label]
    expected = [(n, k, *step, plan["docs"]) for n, plan in enumerate(plans, start=1) for k, step in enumerate(plan["steps"])]
    assert [tuple(r) for r in steps[["plan", "step", "trees", "sampled_cost", "sampled_duplicates", "docs"]].values] == expected
    np.testing.assert_allclose(steps.sampled_duplicates_per_document, steps.sampled_duplicates / steps.docs)
    assert steps.trees.max() > steps.trees.min() == 1  # MULT runs down to one tree
    summary = _metric(out, "summary").set_index("run")
    assert summary.loc[label].multitree == "MULT" and pd.isna(summary.loc["unsub_burst_small_none"].multitree)
    assert (out / "multitree.png").exists()


@pytest.mark.slow
@pytest.mark.slow
def test_fault_metrics_count_drops_lost_deliveries_and_recovery(analysed):
    runs, out = analysed
    path = runs["faults_small_flapping_link"]
    m, d, expected = _table(path, "messages"), _table(path, "deliveries"), _table(path, "expected")
    drops = _metric(out, "drops")
    assert set(drops.run) == {"faults_small_flapping_link"}  # runs without faults drop nothing here
    assert drops.groupby("cause").dropped.sum().to_dict() == {"link down": m.dropped.sum()}
    delivered = d.groupby("pub_id").sub_id.nunique()
    pubs = expected[expected.subscribers > 0].set_index("pub_id")
    pubs["missing"] = (pubs.subscribers - delivered.reindex(pubs.index).fillna(0)).clip(lower=0)
    pubs["last"] = d.groupby("pub_id").t_deliver_us.max().reindex(pubs.index)
    faults = _metric(out, "faults").sort_values("fault")
    assert list(faults.kind) == ["link_down"] * 4 and list(faults.start_s) == [5, 10, 15, 20]
    for row in faults.itertuples():
        later = pubs[(pubs.t_pub_us >= row.end_s * 1e6) & (pubs.missing == 0)].sort_values("t_pub_us")
        recovered = later["last"].iloc[0]
        assert row.recovery_s == pytest.approx((recovered - row.end_s * 1e6) / 1e6) and row.recovery_s < 0.5
        window = pubs[(pubs.t_pub_us >= row.start_s * 1e6) & (pubs.t_pub_us < recovered)]
        assert row.deliveries_lost == window.missing.sum() > 100
        lost = m[m.dropped & (m.kind == "pub") & m.t_arrive_us.between(row.start_s * 1e6, row.end_s * 1e6 - 1)]
        assert row.publications_dropped == lost.msg_id.nunique() > 10
    over_time = _metric(out, "completeness_over_time").set_index("t_s").sort_index()
    buckets = pubs.groupby(pubs.t_pub_us // (BUCKET_S * 1_000_000) * BUCKET_S)
    np.testing.assert_allclose(over_time.delivered_fraction,
                               1 - buckets.missing.sum() / buckets.subscribers.sum())


def test_delay_by_pair_uses_the_publishers_broker(analysed):
    runs, out = analysed
    pairs = _metric(out, "delay_by_pair")
    path = runs["unsub_burst_small_active"]
    m, d = _table(path, "messages"), _table(path, "deliveries")
    origin = m[(m.kind == "pub") & m.sender.isna()].set_index("msg_id").broker
    d["publisher_broker"] = d.pub_id.map(origin)
    ours = pairs[pairs.run == "unsub_burst_small_active"].set_index(["publisher_broker", "subscriber_broker"])
    d["delay"] = (d.t_deliver_us - d.t_pub_us) / 1e6
    expected = d.groupby(["publisher_broker", "broker"]).delay
    ours = ours.sort_index()
    assert ours.deliveries.tolist() == expected.size().sort_index().tolist()
    np.testing.assert_allclose(ours.mean_s, expected.mean().sort_index())
    np.testing.assert_allclose(ours.max_s, expected.max().sort_index())
    for name, q in (("p10_s", 0.1), ("p50_s", 0.5), ("p90_s", 0.9)):
        quantiles = expected.apply(lambda x: np.quantile(x, q, method="inverted_cdf")).sort_index()
        np.testing.assert_allclose(ours[name], quantiles)


@pytest.fixture(scope="module")
def burst_run(tmp_path_factory):
    """``analysed``'s run of ``unsub_burst_small_active``, for the tests with the session's Spark:
    they run on another xdist worker than ``analysed``'s, which would build that fixture (five runs
    and an analysis) a second time (tests/conftest.py)."""
    path = tmp_path_factory.mktemp("burst") / "run"
    run(resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=120s"]), path, progress=False)
    return path


def test_delay_by_pair_joins_many_publishers_without_broadcasting_them(burst_run, spark_session, monkeypatch):
    """Past ``BROADCAST_ROWS`` publications the publishers are not shipped whole to every task
    (a paper-size run's outgrew the driver): where Spark would not broadcast them of itself (its
    size threshold off here, as for a paper-size table), a sort-merge join, the same rows."""
    from analysis import metrics
    from analysis.runs import check_runs, read_tables

    selected = check_runs([burst_run])
    tables = metrics.with_derived(read_tables(spark_session, selected), BUCKET_S * 1_000_000)
    plans, rows, default = {}, {}, metrics.BROADCAST_ROWS
    threshold = spark_session.conf.get("spark.sql.autoBroadcastJoinThreshold", None)
    spark_session.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        for limit in (default, 1):
            monkeypatch.setattr(metrics, "BROADCAST_ROWS", limit)
            frame = metrics.delay_by_pair(tables, selected)
            plans[limit] = frame._jdf.queryExecution().executedPlan().toString()
            rows[limit] = frame.toPandas().sort_values(["publisher_broker", "subscriber_broker"]).reset_index(drop=True)
    finally:
        if threshold is None:
            spark_session.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        else:
            spark_session.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
        spark_session.catalog.clearCache()
    by_publication = {join: re.compile(rf"{join} \[run#\d+, pub_id#") for join in ("BroadcastHashJoin", "SortMergeJoin")}
    assert by_publication["BroadcastHashJoin"].search(plans[default]) and not by_publication["SortMergeJoin"].search(plans[default])
    assert by_publication["SortMergeJoin"].search(plans[1]) and not by_publication["BroadcastHashJoin"].search(plans[1])
    pd.testing.assert_frame_equal(rows[1], rows[default])


def test_a_run_written_before_the_delivery_groups_has_its_deliveries_grouped(burst_run, spark_session, tmp_path):
    """The analysis reads the groups the emulator wrote; a run without them (written before
    session 63) has its deliveries grouped instead: read side by side, the same groups once
    each key's rows are added up, every delivery counted once."""
    from analysis.runs import check_runs, read_tables

    source = burst_run
    older = tmp_path / "older"
    shutil.copytree(source, older)
    shutil.rmtree(older / "delivery_groups")
    runs = check_runs([source, older])
    frame = read_tables(spark_session, runs)["delivery_groups"].toPandas()
    keys = ["pub_id", "broker", "t_pub_us", "t_deliver_us", "hops"]
    written, grouped = (frame[frame.run == run.label].groupby(keys).n.sum() for run in runs)
    pd.testing.assert_series_equal(written, grouped)
    assert written.sum() == len(_table(source, "deliveries")) > 500
    assert len(frame[frame.run == runs[0].label]) < written.sum()  # groups, not a row per delivery


def test_a_session_for_small_runs_starts_its_jvm_with_the_small_runs_options(spark_session):
    """The tests' session, as the figures fixture's: the JVM it started runs the options
    spark-submit gives a small job's (C1 and the serial collector: a fifth less of its CPU time over
    every figure's test-sized runs, bench/RESULTS.md)."""
    from analysis.job import SMALL_RUN_JAVA_OPTIONS

    jvm = spark_session.sparkContext._jvm
    started_with = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(SMALL_RUN_JAVA_OPTIONS.split()) <= set(started_with), started_with


def test_a_windowed_run_that_delivered_nothing_inside_its_window_delivered_none(spark_session):
    """``delivered`` counts the deliveries made inside each windowed run's window: 0, not
    missing (the summary takes a missing one for a whole run's, all its deliveries)."""
    from analysis.runs import MEASURED_FROM, MEASURED_UNTIL, _delivered_in_window, local_frame

    rows = [("late", 30, 10, 20), ("late", 40, 10, 20), ("inside", 15, 10, 20), ("inside", 25, 10, 20)]
    deliveries = local_frame(spark_session, rows, f"run string, t_deliver_us bigint, {MEASURED_FROM} bigint, "
                                                  f"{MEASURED_UNTIL} bigint")
    assert dict(_delivered_in_window(deliveries).collect()) == {"late": 0, "inside": 1}


def test_runs_whose_manifests_predate_the_injected_counts_leave_the_publishers_join_to_spark():
    from analysis.metrics import _publications

    def run_with(manifest):
        return Run(label="r", path=None, manifest=manifest)

    assert _publications([run_with({"injected": {"pub": {"count": 7}}}), run_with({"injected": {"sub": {}}})]) == 7
    assert _publications([run_with({"injected": {"pub": {"count": 7}}}), run_with({})]) is None


def test_overlay_positions_put_subtrees_in_intervals():
    rows = overlay_positions([("r", "A", "B"), ("r", "B", "C"), ("r", "B", "D"), ("r", "D", "E"),
                              ("cyclic", "X", "Y"), ("cyclic", "Y", "Z"), ("cyclic", "Z", "X")])
    position = {broker: (tin, tout, parent) for run, broker, tin, tout, parent in rows}
    assert {run for run, *_ in rows} == {"r"}
    assert position["A"] == (0, 4, None)
    tin_d, tout_d, parent_d = position["D"]
    assert parent_d == "B" and {b for b, (tin, _, _) in position.items() if tin_d <= tin <= tout_d} == {"D", "E"}


def test_default_bucket_is_a_round_hundredth():
    def runs(*ends):
        return [Run(str(i), None, {"sim_end_us": e}) for i, e in enumerate(ends)]

    assert default_bucket_us(runs(300_000_000)) == 2_000_000
    assert default_bucket_us(runs(60_000_000, 3600_000_000)) == 20_000_000
    assert default_bucket_us(runs(50)) == 1


@pytest.mark.parametrize("status", ["failed", "running", None])
def test_incomplete_runs_are_refused(tmp_path, status):
    manifest = {"name": "x"} if status is None else {"name": "x", "status": status, "error": "boom"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    result = subprocess.run([sys.executable, "-m", "experiments.cli", "analyze", str(tmp_path)],
                            cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert f"run status is {status!r}, not 'complete'" in result.stderr and "Traceback" not in result.stderr


def test_paths_that_are_not_runs_are_refused(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    for path, message in ((tmp_path / "missing", "not a directory"), (tmp_path, "no manifest.json"),
                          (tmp_path / "bad", "not valid JSON")):
        result = subprocess.run([sys.executable, "-m", "experiments.cli", "analyze", str(path)],
                                cwd=PROJECT_ROOT, capture_output=True, text=True)
        assert result.returncode == 2 and message in result.stderr and str(path) in result.stderr


def test_the_job_never_imports_ray():
    check = "import sys, analysis.job; assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')]"
    assert subprocess.run([sys.executable, "-c", check], cwd=PROJECT_ROOT).returncode == 0


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PUBSUB_EMU_CLASS_ARCHIVE", raising=False)
    return tmp_path


def test_the_class_archive_is_written_by_a_successful_run_then_used(cache_home):
    first = submit._class_archive()
    assert first.path.parent == cache_home / "pubsub-emu"
    assert first.java_options.startswith(f"-XX:ArchiveClassesAtExit={first.writing} ")
    first.writing.write_bytes(b"classes")  # what the JVM writes as it exits
    first.finish(succeeded=True)
    assert first.path.read_bytes() == b"classes" and not first.writing.exists()
    assert submit._class_archive().java_options.startswith(f"-XX:SharedArchiveFile={first.path} ")


def test_a_failed_run_leaves_no_class_archive_and_it_can_be_turned_off(cache_home, monkeypatch):
    failed = submit._class_archive()
    failed.writing.write_bytes(b"half")
    failed.finish(succeeded=False)
    assert not failed.path.exists() and not failed.writing.exists()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home / "with space"))  # JVM options split at spaces
    assert submit._class_archive() is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.setenv("PUBSUB_EMU_CLASS_ARCHIVE", "off")
    assert submit._class_archive() is None


def test_a_failed_job_is_named_by_its_cause(tmp_path):
    log = tmp_path / "analysis.log"
    log.write_text("Using Spark's default log4j profile\nTraceback (most recent call last):\n  File \"job.py\"\n"
                   "ModuleNotFoundError: No module named 'pyarrow'\n26/11/28 WARN ShutdownHookManager: deleting\n")
    assert submit.failure_cause(log) == "ModuleNotFoundError: No module named 'pyarrow'"
    log.write_text("pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] x\n")
    assert submit.failure_cause(log).startswith("pyspark.errors.exceptions.captured.AnalysisException: ")
    log.write_text("analysis: error: /runs/x: run status is 'failed', not 'complete'\n")
    assert submit.failure_cause(log) == "/runs/x: run status is 'failed', not 'complete'"


@pytest.mark.slow
def test_a_window_measures_only_its_stretch_of_each_run(tmp_path, spark_session):
    """``--from/--until`` and ``--last``: publications, deliveries and utilisation counted over
    the window alone (rows placed by publication, arrival and sample time). Both windows are
    measured in one job, on two copies of one run: each run its own window; the first copy is
    in a third report too, whole (read once, labelled for each report)."""
    from analysis import job
    from analysis.runs import check_runs

    spec = resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=60s"])
    run(spec, tmp_path / "run", progress=False)
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    messages, deliveries = _table(tmp_path / "run", "messages"), _table(tmp_path / "run", "deliveries")
    samples = _table(tmp_path / "run", "samples")
    windows = {Window(20.0, 40.0): (20_000_000, 40_000_000), Window(last=15.0): (45_000_000, 60_000_000)}
    copies = check_runs([tmp_path / "run", tmp_path / "copy"])
    reports = [job.report_of([replace(copy, window=window)], tmp_path / f"report-{start}", 10)
               for copy, (window, (start, _)) in zip(copies, windows.items())]
    whole = job.reports_listed([{"out": str(tmp_path / "report-whole"), "runs": [str(tmp_path / "run")]}], WHOLE_RUN, 10)
    reports[0] = job.reports_listed([{"out": str(reports[0].out), "runs": [str(tmp_path / "run")],
                                      "window": {"from": 20, "until": 40}}], WHOLE_RUN, 10)[0]
    assert reports[0].runs[0].label == "unsub_burst_small_active [20-40 s]"
    reports = [replace(report, plots=False) for report in reports + whole]  # the tables are the question
    job.analyse(spark_session, reports, job.is_small(copies))
    whole_summary = _metric(whole[0].out, "summary").iloc[0]
    sim_end_s = json.loads((tmp_path / "run" / "manifest.json").read_text())["sim_end_us"] / 1e6
    assert whole_summary.deliveries == len(deliveries)
    assert whole_summary.delivered_per_s == pytest.approx(len(deliveries) / sim_end_s)
    for report, (start, end) in zip(reports, windows.values()):
        summary = _metric(report.out, "summary").iloc[0]
        inside = deliveries[deliveries.t_pub_us.between(start, end)]
        made = deliveries.t_deliver_us.between(start, end).sum()  # by delivery time, backlog included
        assert summary.delivered_per_s == pytest.approx(made / ((end - start) / 1e6))
        published = messages[(messages.kind == "pub") & messages.sender.isna() & messages.t_arrive_us.between(start, end)]
        assert summary.deliveries == len(inside) > 0
        assert summary.publications == published.msg_id.nunique()
        load = _metric(report.out, "broker_load").set_index("broker")
        busy = samples[samples.t_us.between(start, end)].groupby("broker").busy_us.sum() / 1e6
        assert np.allclose(load.loc[busy.index, "utilisation"], busy / ((end - start) / 1e6))
        assert "**Measured over a window of simulated time**" in (report.out / "report.md").read_text()
    spark_session.catalog.clearCache()


def test_a_run_counts_once_towards_the_small_run_settings(tmp_path, monkeypatch):
    """Listed whole and over a window, and hard-linked under another name, a run's events count
    once when the job decides whether its runs are small."""
    from analysis import job
    from analysis.runs import check_runs
    from experiments.sweep import _copy_run

    run(resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=5s"]), tmp_path / "run", progress=False)
    _copy_run(tmp_path / "run", tmp_path / "linked", "linked")
    events = json.loads((tmp_path / "run" / "manifest.json").read_text())["events"]
    whole = check_runs([tmp_path / "run", tmp_path / "linked"])
    windowed = [replace(r, label=f"{r.label} [from 1 s]", window=Window(1.0)) for r in whole]
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (0, 0))
    monkeypatch.setattr(job, "SMALL_RUN_EVENTS", events + 1)
    assert job.is_small(whole + windowed)
    monkeypatch.setattr(job, "SMALL_RUN_EVENTS", events)
    assert not job.is_small(whole[:1])
    # many runs each small count as small beyond SMALL_RUN_EVENTS (a figure's test-sized runs), up to a total
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (events + 1, events + 1))
    assert job.is_small(whole + windowed)
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (events + 1, events))
    assert not job.is_small(whole)
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (events, 10 * events))
    assert not job.is_small(whole)
    # two runs: each must be under the first bound, their sum under the second
    run(resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=3s"]), tmp_path / "other", progress=False)
    both = whole + check_runs([tmp_path / "other"])
    total = events + json.loads((tmp_path / "other" / "manifest.json").read_text())["events"]
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (events + 1, total + 1))
    assert job.is_small(both)
    monkeypatch.setattr(job, "MANY_SMALL_RUNS", (events + 1, total))
    assert not job.is_small(both)


def test_the_per_broker_queues_are_the_same_written_by_spark_or_collected(tmp_path, spark_session):
    """A large job writes ``queue_per_broker`` with Spark, per report; a small one collects it
    once and writes each report's rows with the other tables: the same rows either way, and a
    small job into a large one's report leaves none of Spark's files behind."""
    from analysis import job

    slow = "runtime.costs={name: slow, base: {default: 50000}}"  # 50 ms a message: queues at the samples
    run(resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=20s", slow]), tmp_path / "run", progress=False)
    listing = [{"out": str(tmp_path / "report"), "runs": [str(tmp_path / "run")], "plots": False}]
    tables = []
    for small in (False, True):
        job.analyse(spark_session, job.reports_listed(listing, WHOLE_RUN, 5), small=small)
        tables.append(_metric(tmp_path / "report", "queue_per_broker"))
    written, collected = tables
    columns = ["run", "t_s", "broker"]
    assert len(collected) == len(written) > 20 * 30 and (collected.queue_len > 0).sum() > 50
    pd.testing.assert_frame_equal(collected.sort_values(columns).reset_index(drop=True),
                                  written.sort_values(columns).reset_index(drop=True))
    spark_session.catalog.clearCache()


def test_a_file_spark_lists_is_found_its_runs_table_folder_however_the_folder_was_given():
    """Spark lists every run's files of a table in one call and names each as a URI, escaped;
    each is matched back to the folder its run was given as: a local path (with a space), a
    file: URI, an S3 location as Spark's Hadoop filesystems name it."""
    from analysis.runs import _folder

    for given, listed in (("/tmp/runs/a b/messages", "file:/tmp/runs/a%20b/messages/part-0.parquet"),
                          ("/tmp/runs/a b/messages", "file:///tmp/runs/a%20b/messages/part-1.parquet"),
                          ("file:///tmp/runs/c/messages", "file:/tmp/runs/c/messages/part-0.parquet"),
                          ("file://localhost/tmp//runs/c/messages", "file:/tmp/runs/c/messages/part-0.parquet"),
                          ("/tmp/runs/../runs/e/messages", "file:/tmp/runs/e/messages/part-0.parquet"),
                          ("s3a://bucket/runs/d/messages", "s3a://bucket/runs/d/messages/part-0.parquet")):
        assert _folder(given) == _folder(listed, parent=True), given
    assert _folder("/tmp/runs/a/messages") != _folder("file:/tmp/runs/ab/messages/part-0.parquet", parent=True)


def test_where_a_listed_file_matches_no_folder_each_folder_is_listed_alone():
    """A filesystem that names files otherwise (an ``hdfs:///`` folder listed with its
    namenode): Spark's own listing per folder labels each file, as before one listing of all."""
    from analysis.runs import _files_of

    class Listing:
        def __init__(self, files):
            self.files = files

        def inputFiles(self):  # noqa: N802 (Spark's name)
            return self.files

    class Reader:
        def schema(self, schema):
            return self

        def parquet(self, path):
            return Listing([f"hdfs://nn:8020{path[len('hdfs://'):]}/part-0.parquet"])

    class Spark:
        read = Reader()

    present = {"hdfs:///runs/a/messages": ["run a"], "hdfs:///runs/b/messages": ["run b"]}
    named = ["hdfs://nn:8020/runs/a/messages/part-0.parquet", "hdfs://nn:8020/runs/b/messages/part-0.parquet"]
    assert _files_of(Spark(), None, Listing(named), present) == [(named[0], ["run a"]), (named[1], ["run b"])]
    local = {"/tmp/runs/a/messages": ["run a"]}
    assert _files_of(None, None, Listing(["file:/tmp/runs/a/messages/part-0.parquet"]), local) == [
        ("file:/tmp/runs/a/messages/part-0.parquet", ["run a"])]  # matched: no second listing


def test_a_run_linked_under_another_name_is_computed_once(tmp_path, spark_session, capfd):
    """A run hard-linked into another directory under another name (``figure`` copies a run
    two figures share): its metrics are computed once with the original's and reported under
    its own name and path; over a window of its own it is a run of its own."""
    from analysis import job
    from experiments.sweep import _copy_run

    run(resolve(SCENARIOS / "unsub_burst_small_active.yaml", ["duration=30s"]), tmp_path / "run", progress=False)
    _copy_run(tmp_path / "run", tmp_path / "linked", "linked")
    listing = [{"out": str(tmp_path / "original"), "runs": [str(tmp_path / "run")], "plots": False},
               {"out": str(tmp_path / "copy"), "runs": [str(tmp_path / "linked")], "plots": False},
               {"out": str(tmp_path / "copy-window"), "runs": [str(tmp_path / "linked")], "window": {"from": 10},
                "plots": False}]  # the tables are the question, not the plots
    reports = job.reports_listed(listing, WHOLE_RUN, 5)
    capfd.readouterr()
    job.analyse(spark_session, reports, small=True)
    assert "analysis: summary: 2 rows" in capfd.readouterr().err
    for table in ("summary", "delay_over_time", "queue_per_broker", "forwarding"):
        original, copy = (_metric(tmp_path / name, table) for name in ("original", "copy"))
        assert set(original.run) == {"unsub_burst_small_active"} and set(copy.run) == {"linked"}
        if table == "summary":
            assert (original.path.iloc[0], copy.path.iloc[0]) == (str(tmp_path / "run"), str(tmp_path / "linked"))
        columns = [c for c in original.columns if c not in ("run", "path")]
        pd.testing.assert_frame_equal(original[columns].sort_values(columns[:3]).reset_index(drop=True),
                                      copy[columns].sort_values(columns[:3]).reset_index(drop=True), obj=table)
    windowed = _metric(tmp_path / "copy-window", "summary").iloc[0]
    assert 0 < windowed.deliveries < _metric(tmp_path / "copy", "summary").iloc[0].deliveries
    spark_session.catalog.clearCache()


def test_several_reports_go_to_one_job_as_a_listing(tmp_path, monkeypatch):
    """``analyse_reports`` (``figure A B``) starts one spark-submit with ``--reports`` naming
    each report and its runs; the listing is gone afterwards and every report gets the log."""
    from experiments.cli import analyse_reports

    for name in ("one", "two"):
        _hand_made_run(tmp_path / name)
    started = []

    def spark_submit(command, **_):
        listing = command[command.index("--reports") + 1]
        started.append((command, json.loads(Path(listing).read_text()), listing))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(submit.subprocess, "run", spark_submit)
    reports = [Requested(tmp_path / "report-one", [tmp_path / "one"]), Requested(tmp_path / "report-two", [tmp_path / "two"]),
               Requested(tmp_path / "report-last", [tmp_path / "one"], Window(last=5.0), plots=False)]
    assert analyse_reports(reports) == 0
    (command, listing, path), = started
    assert listing == [{"out": str(out), "runs": [str(run) for run in runs]} for out, runs, *_ in reports[:2]] + \
        [{"out": str(tmp_path / "report-last"), "runs": [str(tmp_path / "one")], "window": {"last": 5.0}, "plots": False}]
    assert not Path(path).exists()
    assert all((requested.out / submit.LOG_FILE).is_file() for requested in reports)
    assert analyse_reports([reports[2]]) == 0  # one report with a window of its own: a listing too
    assert started[-1][1] == listing[2:]


def test_the_job_reads_a_listing_of_reports_and_refuses_a_bad_one(tmp_path):
    from analysis import job

    for name in ("one", "two"):
        _hand_made_run(tmp_path / name)
    listing = tmp_path / "reports.json"

    def reports(given, *more):
        listing.write_text(json.dumps(given) if not isinstance(given, str) else given)
        return job._reports(job._parser().parse_args(["--reports", str(listing), *more]))

    one = reports([{"out": str(tmp_path / "r1"), "runs": [str(tmp_path / "one")]}], "--bucket", "2")
    assert [(r.out, [run.label for run in r.runs], r.bucket_us) for r in one] == [(tmp_path / "r1", ["hand"], 2_000_000)]
    both = [{"out": str(tmp_path / f"r-{name}"), "runs": [str(tmp_path / name)]} for name in ("one", "two")]
    with pytest.raises(RunError, match="two reports have runs of the same name"):  # both runs are named "hand"
        reports(both)
    with pytest.raises(ValueError, match="not a JSON list of"):
        reports("[{\"runs\": []}]")
    # the same runs whole and over their last 2 s: told apart by name, each measured over its own
    whole, last = reports([both[0], {**both[0], "out": str(tmp_path / "r-last"), "window": {"last": 2}, "plots": False}],
                          "--from", "1")
    assert [(r.label, r.window) for r in whole.runs] == [("hand", Window(start=1.0))]
    assert (whole.plots, last.plots) == (True, False)
    chosen, = reports([{**both[0], "plots": ["Hop counts", "Broker utilisation"]}])
    assert chosen.plots == ("Hop counts", "Broker utilisation")
    assert Requested(tmp_path, [], plots=chosen.plots).listed()["plots"] == ["Hop counts", "Broker utilisation"]
    with pytest.raises(ValueError, match="plots: expected true, false or a list of the report's plot titles"):
        reports([{**both[0], "plots": ["Hop count"]}])
    assert [(r.label, r.window) for r in last.runs] == [("hand [last 2 s]", Window(last=2.0))]
    for bad in ({"last": "2"}, {"from": 3, "until": 1}, {"last": 2, "from": 1}, {"lsat": 2}):
        with pytest.raises(ValueError, match="window|expected"):
            reports([{**both[0], "window": bad}])
    with pytest.raises(ValueError, match="or --reports, not both"):
        job._reports(job._parser().parse_args([str(tmp_path / "one"), "--reports", str(listing)]))


def test_a_long_analysis_reports_the_stages_running_every_so_often(capsys):
    """``stage_progress`` asks Spark's status tracker (here a stand-in) and writes one line per
    interval while stages run, none once the body is done."""
    import time
    from types import SimpleNamespace

    from analysis.job import stage_progress

    stages = {7: SimpleNamespace(stageId=7, numCompletedTasks=1_500, numTasks=4_000),
              3: SimpleNamespace(stageId=3, numCompletedTasks=2, numTasks=8)}
    tracker = SimpleNamespace(getActiveStageIds=lambda: list(stages), getStageInfo=stages.get)
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    with stage_progress(spark, every_s=0.05):
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2
    assert set(lines) == {"analysis: running stage 3: 2 of 8 tasks; stage 7: 1,500 of 4,000 tasks"}
    time.sleep(0.2)
    assert capsys.readouterr().err == ""
