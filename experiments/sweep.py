"""``pubsub-emu sweep``: a grid of scenario variants run as concurrent Ray tasks.

Each point of the grid (the product of the ``--grid KEY=V1,V2`` axes, times ``--repeat``
seeds) is the scenario with that point's overrides; it runs in its own Ray task, in that
task's process (``runtime.hosts=0`` unless the sweep sets ``runtime.hosts``), into
``OUT/<point>``. ``OUT/sweep.json`` lists the points with their overrides, status
(``pending``, ``complete``, ``failed``), wall time, peak memory and error, and is rewritten as
points finish. A failed point leaves the others running; running the same sweep into the same
directory again skips the complete points, resumes a stopped point from its latest checkpoint
(a scenario with ``runtime.checkpoint_every``; the run goes on with the scenario its checkpoint
holds, so after editing the scenario use another directory) and reruns the rest, a point whose
resume failed from the start.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from actors.storage import is_uri
from analysis.spread import seeded_name
from protocols.errors import InputError

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class Point:
    name: str  # the point's run directory under the sweep's
    scenario: Path
    overrides: list[str]


def parse_grid(grids: list[str]) -> list[tuple[str, list[str]]]:
    """``KEY=V1,V2`` axes, in the order given."""
    axes = []
    for grid in grids:
        key, sep, values = grid.partition("=")
        if not sep or not key or not values or any(not v for v in values.split(",")):
            raise InputError(f"--grid {grid!r}: expected KEY=V1,V2,... with a dotted key, "
                             "e.g. protocol.covering=active,lazy")
        if key in (k for k, _ in axes):
            raise InputError(f"--grid {grid!r}: key {key!r} is given twice")
        axes.append((key, values.split(",")))
    if not axes:
        raise InputError("sweep: give at least one --grid KEY=V1,V2")
    return axes


def points(scenario: Path, axes: list[tuple[str, list[str]]], repeat: int, name: str, seed: int,
           fixed: list[str]) -> list[Point]:
    """Every combination of the axes' values (the last axis varying fastest), each ``repeat``
    times with seeds ``seed``, ``seed + 1``, ...; ``fixed`` overrides come first, and each
    run is named ``<name>-<point>``."""
    if repeat < 1:
        raise InputError(f"--repeat {repeat}: expected at least 1")
    found = []
    for values in itertools.product(*(vals for _, vals in axes)):
        chosen = [f"{key}={value}" for (key, _), value in zip(axes, values)]
        label = "_".join(f"{_slug(key.rsplit('.', 1)[-1])}-{_slug(value)}" for (key, _), value in zip(axes, values))
        for r in range(repeat):
            point = seeded_name(label, seed + r) if repeat > 1 else label
            seeded = [f"seed={seed + r}"] if repeat > 1 else []
            found.append(Point(point, scenario, [*fixed, *chosen, *seeded, f"name={name}-{point}"]))
    names = [p.name for p in found]
    if len(set(names)) != len(names):
        twice = sorted(n for n in set(names) if names.count(n) > 1)
        raise InputError(f"--grid: two values name the same point ({', '.join(twice)})")
    return found


def _slug(text: str) -> str:
    if text.strip() == "{}":  # a protocol's settings, all defaults: the protocol on
        return "on"
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-") or "x"


def run_sweep(sweep_points: list[Point], out: Path, max_parallel: int, address: str | None, report=print,
              copies: dict[str, tuple[Path, str]] | None = None, check: bool = False) -> dict:
    """Run the points not complete in ``out`` yet; returns the sweep record (also in sweep.json).
    ``copies``: point name -> (a complete run of the very same scenario but its name, the
    point's run name): copied and renamed instead of run again (runs are deterministic)."""
    import ray

    from actors.transports import connect_ray

    record = _record(sweep_points, out)
    copied = 0
    for point in record["points"]:
        if point["status"] != "complete" and point["name"] in (copies or {}):
            source, name = copies[point["name"]]
            _copy_run(source, out / point["name"], name)
            point.update(status="complete", wall_s=0.0, error=None, copied_from=str(source))
            report(f"sweep: {point['name']}: the same run as {source}, copied")
            copied += 1
    _write(out, record)
    pending = [p for p in record["points"] if p["status"] != "complete"]
    done = len(record["points"]) - len(pending) - copied
    if not pending:
        report(f"sweep: all {done + copied} run(s) in {out} complete"
               + (f" ({copied} copied, {done} already)" if copied else " already, reused"))
        return record
    report(f"sweep: {len(pending)} run(s) to go" + (f" ({done} complete already, reused)" if done else "")
           + (f" ({copied} copied)" if copied else "")
           + f", {min(max_parallel, len(pending))} at a time, into {out}")
    connect_ray(address)
    task = ray.remote(**RUN_TASK_OPTIONS)(_run_point)
    running: dict = {}
    started = time.perf_counter()
    with tqdm(total=len(pending), desc="runs", unit="run", file=sys.stderr, disable=not sys.stderr.isatty(),
              leave=False) as progress:
        while pending or running:
            while pending and len(running) < max_parallel:
                point = pending.pop(0)
                resume_failed = point.pop("resumed", False) and point["status"] == "failed"
                point.pop("check", None)
                checkpoint_s = None if resume_failed else _resumable(out / point["name"])
                if checkpoint_s is None:
                    shutil.rmtree(out / point["name"], ignore_errors=True)  # a partial run of an earlier sweep
                else:
                    report(f"sweep: {point['name']}: resumed from its checkpoint at {checkpoint_s:,.0f} s simulated")
                ref = task.remote(point["scenario"], point["overrides"], str(out / point["name"]), check,
                                  checkpoint_s is not None)
                running[ref] = (point, time.perf_counter())
            ready, _ = ray.wait(list(running), num_returns=1)
            point, point_started = running.pop(ready[0])
            point.update(point_outcome(ready[0], point_started))
            progress.update()
            line = f"sweep: {point['name']}: {point['status']} in {point['wall_s']:.1f} s" \
                + (f" ({point['error']})" if point.get("error") else "")
            if progress.disable:
                report(line)
            else:  # above the progress line
                progress.write(line, file=sys.stderr)
            _write(out, record)
    record["wall_s"] = round(time.perf_counter() - started, 3)
    _write(out, record)
    return record


# A run's task is never retried: Ray retries a task whose process died (killed for memory, most
# often), and the retry would meet the killed attempt's half-written directory and the same limit.
RUN_TASK_OPTIONS = {"num_cpus": 1, "max_retries": 0}


def point_outcome(ref, started: float) -> dict:
    """What the run task ``ref`` (started at ``perf_counter()`` ``started``) returned, or a failed
    point where its process died before it could return."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"status": "failed", "wall_s": round(time.perf_counter() - started, 3), "peak_rss_mb": None,
                "error": f"{type(exc).__name__}: the run's process died, most often killed for memory"
                         f" (try --max-parallel 1){': ' + cause if cause else ''}"}


def checked_point(run_dir: Path) -> dict | None:
    """The check a sweep's task made of the run at ``run_dir`` (a point of the sweep one level
    up), or of the run it was copied from; None where none was made."""
    record = run_dir.parent / SWEEP_FILE
    if not record.is_file():
        return None
    point = next((p for p in json.loads(record.read_text())["points"] if p["name"] == run_dir.name), None)
    if point is None or point.get("status") != "complete":
        return None
    if "check" in point:
        return point["check"]
    return checked_point(Path(point["copied_from"])) if point.get("copied_from") else None


def _copy_run(source: Path, run_dir: Path, name: str) -> None:
    """``source``'s files hard-linked into ``run_dir`` (copied where links cannot be made), its
    manifest the source's under the run ``name``."""
    from actors.results import write_manifest

    shutil.rmtree(run_dir, ignore_errors=True)

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, run_dir, copy_function=link)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").unlink()  # a link to the source's: never written through
    manifest["copied_from"] = manifest["name"]
    manifest["name"] = manifest["scenario"]["name"] = name
    write_manifest(run_dir, manifest)


def _resumable(run_dir: Path) -> float | None:
    """The simulated second of a stopped run's latest complete checkpoint, None where the run
    directory holds none to continue from."""
    from actors.checkpoints import FOLDER, SETUP, latest_complete
    from actors.storage import RunDir

    if not (run_dir / FOLDER / SETUP).is_file() or _complete(run_dir / "manifest.json"):
        return None
    latest = latest_complete(RunDir(run_dir))
    return latest[1]["t_us"] / 1e6 if latest else None


def _run_point(scenario: str, overrides: list[str], run_dir: str, check: bool = False,
               resuming: bool = False) -> dict:
    """One point, in a Ray task's process; never raises (a failure is the point's status).
    ``peak_rss_mb``: the most memory that process held while it ran the point (with hosts, the
    driver's share only; null where ``/proc`` is not there to read). ``check``: also compare the
    run's deliveries with the oracle (``pubsub-emu check``), from the workload already built.
    ``resuming``: continue the run in ``run_dir`` from its latest checkpoint; ``wall_s`` is
    then the run's own clock (its manifest's): up to the checkpoint, and since the restart."""
    from actors.coordinator import resume, run
    from actors.storage import RunDir
    from experiments.check import check as check_run
    from experiments.build import resolve

    started = time.perf_counter()
    checked = spec = None
    hosts = [] if any(o.startswith("runtime.hosts=") for o in overrides) else ["runtime.hosts=0"]
    with _resident_memory() as peak:
        try:
            if resuming:  # the checkpoint holds the run's state: its workload is built only to check it
                wall = resume(run_dir, progress=False)["wall_s"]
            else:
                spec = resolve(Path(scenario), [*overrides, *hosts])
                run(spec, Path(run_dir), progress=False)
                wall = time.perf_counter() - started
            status, error = "complete", None
        except Exception as exc:  # noqa: BLE001 (reported in sweep.json, the other points go on)
            status, error, wall = "failed", f"{type(exc).__name__}: {exc}", time.perf_counter() - started
        if check and status == "complete":
            try:
                spec = spec or resolve(Path(scenario), [*overrides, *hosts])
                checked = check_run(RunDir(run_dir), spec.injections, keep_expected=True)
            except Exception:  # noqa: BLE001 (the run stands; the driver checks it again and reports why)
                checked = None
    return {"status": status, "wall_s": round(wall, 3), "error": error, "peak_rss_mb": peak.mb,
            **({"resumed": True} if resuming else {}), **({"check": checked} if checked is not None else {})}


class _resident_memory:
    """The largest resident set of this process inside the ``with`` (``mb``), read from
    ``/proc/self/statm`` every tenth of a second by a thread (``ru_maxrss`` cannot be reset
    between the runs a Ray worker process takes on)."""

    def __init__(self) -> None:
        self.mb = None
        self._done = threading.Event()

    def __enter__(self) -> "_resident_memory":
        self._read()
        if self.mb is not None:
            self._watcher = threading.Thread(target=self._watch, daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self.mb is not None:
            self._watcher.join()
            self._read()

    def _watch(self) -> None:
        while not self._done.wait(0.1):
            self._read()

    def _read(self) -> None:
        try:
            pages = int(Path("/proc/self/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return
        self.mb = max(self.mb or 0.0, round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1))


def _record(sweep_points: list[Point], out: Path) -> dict:
    """The sweep record: the one in ``out`` when it is this sweep's (complete points stay)."""
    fresh = {"points": [
        {"name": p.name, "scenario": str(Path(p.scenario).resolve()), "overrides": p.overrides, "status": "pending",
         "wall_s": None, "error": None} for p in sweep_points]}
    existing = out / SWEEP_FILE
    if existing.is_file():
        old = json.loads(existing.read_text())

        def grid(record: dict) -> list:
            return [(p["name"], p.get("scenario"), p["overrides"]) for p in record["points"]]

        if grid(old) != grid(fresh):
            raise InputError(f"--out {out}: holds another sweep (other scenario or grid); choose another directory")
        for point in old["points"]:
            manifest = out / point["name"] / "manifest.json"
            if point["status"] == "complete" and not _complete(manifest):
                point["status"] = "pending"
        return old
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"--out {out}: already exists and holds no sweep")
    out.mkdir(parents=True, exist_ok=True)
    _write(out, fresh)
    return fresh


def _complete(manifest: Path) -> bool:
    try:
        return json.loads(manifest.read_text()).get("status") == "complete"
    except (OSError, ValueError):
        return False


def _write(out: Path, record: dict) -> None:
    tmp = out / f".{SWEEP_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, out / SWEEP_FILE)


def run_dirs(path) -> list:
    """A sweep directory's complete points (a figure's directory stands for its ``runs/``
    sweep), or ``[path]`` for a run directory (or a run's URI)."""
    if is_uri(path):
        return [path]
    path = Path(path)
    if not (path / SWEEP_FILE).is_file() and (path / "runs" / SWEEP_FILE).is_file():
        path = path / "runs"
    record = path / SWEEP_FILE
    if not record.is_file():
        return [path]
    return [path / p["name"] for p in json.loads(record.read_text())["points"] if p["status"] == "complete"]
