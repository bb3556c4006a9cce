"""``pubsub-emu sweep``: the grid's points, concurrent Ray tasks, sweep.json, resuming, failures."""
import json
import time

import pytest

from actors.results import read_table
from experiments.cli import main
from experiments.sweep import _record, parse_grid, points, run_dirs
from protocols.errors import InputError
from tests.conftest import PROJECT_ROOT

SCENARIO = PROJECT_ROOT / "experiments" / "scenarios" / "unsub_burst_small_active.yaml"


def test_points_are_the_product_of_the_axes_with_seeds_for_repeats():
    axes = parse_grid(["protocol.covering=active,lazy", "workload.generator.degree=10,30"])
    found = points(SCENARIO, axes, 2, "burst", 7, ["duration=30s"])
    assert [p.name for p in found[:3]] == ["covering-active_degree-10_seed7", "covering-active_degree-10_seed8",
                                           "covering-active_degree-30_seed7"]
    assert len(found) == 8
    assert found[1].overrides == ["duration=30s", "protocol.covering=active", "workload.generator.degree=10", "seed=8",
                                  "name=burst-covering-active_degree-10_seed8"]
    for bad in (["protocol.covering"], ["=a,b"], ["x=a,,b"], ["x=a", "x=b"], []):
        with pytest.raises(InputError):
            parse_grid(bad)
    with pytest.raises(InputError, match="same point"):
        points(SCENARIO, parse_grid(["x=a b,a-b"]), 1, "n", 0, [])


def test_invalid_points_stop_the_sweep_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", str(SCENARIO), "--grid", "protocol.covering=active,sideways", "--out", str(out)]) == 2
    assert "protocol.covering: expected one of" in capsys.readouterr().err and not out.exists()


@pytest.mark.ray
@pytest.mark.slow
def test_sweep_runs_every_point_records_failures_and_resumes(tmp_path, ray_session, capsys):
    out = tmp_path / "sweep"
    command = ["sweep", str(SCENARIO), "--grid", "protocol.covering=none,active", "--grid",
               "workload.generator.degree=10,30", "--set", "duration=40s", "--out", str(out), "--max-parallel", "2"]
    grid = parse_grid(["protocol.covering=none,active", "workload.generator.degree=10,30"])
    _record(points(SCENARIO, grid, 1, "unsub_burst_small_active", 1, ["duration=40s"]), out)  # as a sweep starts
    (out / "covering-active_degree-30").write_text("in the way")  # this point cannot make its run directory
    assert main(command) == 1
    record = json.loads((out / "sweep.json").read_text())
    status = {p["name"]: p["status"] for p in record["points"]}
    assert status == {"covering-none_degree-10": "complete", "covering-none_degree-30": "complete",
                      "covering-active_degree-10": "complete", "covering-active_degree-30": "failed"}
    assert "FileExistsError" in record["points"][3]["error"]
    assert all(100 < p["peak_rss_mb"] < 4000 for p in record["points"][:3])  # a Python process running a run
    deliveries = {}
    for name in (n for n, s in status.items() if s == "complete"):
        pairs = read_table(out / name, "deliveries").select(["pub_id", "sub_id"]).to_pydict()
        deliveries[name] = sorted(zip(pairs["pub_id"], pairs["sub_id"]))
    assert deliveries["covering-none_degree-10"] == deliveries["covering-active_degree-10"]  # covering: same receivers
    assert deliveries["covering-none_degree-10"] != deliveries["covering-none_degree-30"]
    manifest = json.loads((out / "covering-none_degree-30" / "manifest.json").read_text())
    assert manifest["name"] == "unsub_burst_small_active-covering-none_degree-30" and manifest["hosts"] == 0
    capsys.readouterr()
    (out / "covering-active_degree-30").unlink()
    assert main(command) == 0  # the same sweep again: only the failed point runs
    err = capsys.readouterr().err
    assert "sweep: 1 run(s) to go (3 complete already, reused), 1 at a time" in err
    assert err.count(": complete in ") == 1 and "covering-active_degree-30: complete" in err
    assert len(run_dirs(out)) == 4 and run_dirs(SCENARIO) == [SCENARIO]
    other = ["sweep", str(SCENARIO), "--grid", "protocol.covering=lazy", "--out", str(out)]
    assert main(other) == 2  # another sweep's directory


def test_peak_resident_memory_sees_what_was_held_inside():
    from experiments.sweep import _resident_memory

    with _resident_memory() as before:
        pass
    with _resident_memory() as peak:
        held = bytearray(300 * 2**20)
        time.sleep(0.3)
        del held
    assert peak.mb > before.mb + 250


def _dies_once_seen(marks: str) -> None:
    """Appends a line to ``marks`` and kills its own process, as the kernel kills a run out of memory."""
    import os

    with open(marks, "a") as f:
        f.write("attempt\n")
    os._exit(1)


@pytest.mark.ray
def test_a_run_whose_process_dies_is_a_failed_point_and_is_not_retried(tmp_path, ray_session):
    import ray

    from experiments.sweep import RUN_TASK_OPTIONS, point_outcome

    marks = tmp_path / "attempts"
    ref = ray.remote(**RUN_TASK_OPTIONS)(_dies_once_seen).remote(str(marks))
    outcome = point_outcome(ref, time.perf_counter())
    assert outcome["status"] == "failed"
    assert "process died" in outcome["error"] and "--max-parallel 1" in outcome["error"]
    assert outcome["wall_s"] >= 0
    assert marks.read_text().count("attempt") == 1  # Ray's default would try three more times


@pytest.mark.ray
@pytest.mark.slow
def test_repeated_points_run_distinct_seeds_and_the_report_gives_their_interval(tmp_path, ray_session,
                                                                                 analysis_in_session):
    """``sweep --repeat 3``: three seeds a point, each its own workload; ``analyze`` gives per
    point the mean of each summary column and its 95% interval, as computed here by hand."""
    import pyarrow.parquet as pq
    from scipy import stats

    out, report = tmp_path / "sweep", tmp_path / "report"
    assert main(["sweep", str(SCENARIO), "--grid", "protocol.covering=none,active", "--set", "duration=40s",
                 "--repeat", "3", "--out", str(out)]) == 0
    names = [p["name"] for p in json.loads((out / "sweep.json").read_text())["points"]]
    assert names == [f"covering-{c}_seed{s}" for c in ("none", "active") for s in (1, 2, 3)]
    workloads = {json.dumps(read_table(out / n, "deliveries").column("t_pub_us").to_pylist()) for n in names[:3]}
    assert len(workloads) == 3  # each seed its own workload
    assert main(["analyze", str(out), "--out", str(report)]) == 0
    summary = {r["run"]: r for r in pq.read_table(report / "tables" / "summary").to_pylist()}
    text = (report / "report.md").read_text().split("## Summary over seeds")[1].split("\n## ")[0]
    for covering in ("none", "active"):
        values = [summary[f"unsub_burst_small_active-covering-{covering}_seed{s}"]["deliveries"] for s in (1, 2, 3)]
        mean = sum(values) / 3
        half = stats.t.ppf(0.975, 2) * (sum((v - mean) ** 2 for v in values) / 2) ** 0.5 / 3 ** 0.5
        row = next(line for line in text.splitlines() if line.startswith(f"| unsub_burst_small_active-covering-{covering} |"))
        assert "| 3 (1, 2, 3) |" in row and f"| {mean:,.1f} ± {half:,.1f} |" in row
