"""Scale benchmark (issues 12, 40): wall time of a big scenario for several host counts, the
peak memory of every process of the run (the driver, each Ray broker host, Ray's own), and
from each run's manifest its windows, the host time per event and the wall time per window
beyond the busiest host's work.

    python bench/bench_scale.py [SCENARIO.yaml] [--hosts 1,2] [--set KEY=VALUE ...]

Defaults to ``experiments/scenarios/scale_500.yaml``. Each host count runs in a fresh
process tree started by this script (``pubsub-emu run``), sampled every 0.2 s with psutil;
a process's peak is the largest resident set seen. Needs ``pip install -e '.[bench]'``.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def role(process: psutil.Process) -> str:
    """A short name for a process of the run: driver, a broker host, or Ray's own."""
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return "gone"
    if "ray::BrokerHost" in command:
        return "broker host"
    if "experiments.cli" in command or "pubsub-emu" in command:
        return "driver"
    for name in ("default_worker", "ray::IDLE", "raylet", "gcs_server", "dashboard", "log_monitor"):
        if name in command:
            return f"ray {name.removeprefix('ray::')}"
    return "other"


def run(scenario: Path, hosts: str, overrides: list[str], out: Path) -> dict:
    command = [sys.executable, "-m", "experiments.cli", "run", str(scenario), "--out", str(out),
               "--set", f"runtime.hosts={hosts}", *[a for s in overrides for a in ("--set", s)]]
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, tuple[str, int]] = {}
    root = psutil.Process(child.pid)
    while child.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for process in tree:
            try:
                rss = process.memory_info().rss
            except psutil.Error:
                continue
            name, peak = peaks.get(process.pid, (None, 0))
            if name != "broker host":  # a Ray worker is named for its actor once it hosts one
                name = role(process)
            peaks[process.pid] = (name, max(peak, rss))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"hosts {hosts}: run failed:\n{child.stderr.read()}")
    manifest = json.loads((out / "manifest.json").read_text())
    by_role: dict[str, list[int]] = {}
    for name, peak in peaks.values():
        by_role.setdefault(name, []).append(peak)
    return {"hosts": hosts, "wall_s": manifest["wall_s"], "process_s": round(wall, 1), "events": manifest["events"],
            "windows": manifest["windows"], "busy_s": manifest["host_busy_s"], "waiting_s": manifest["host_waiting_s"],
            "behind_s": manifest["host_behind_s"],
            "peaks_mb": {name: sorted(round(p / 2**20) for p in v) for name, v in sorted(by_role.items())}}


def where_the_time_goes(result: dict) -> str:
    """From the manifest: the wall time per event all hosts together spent running windows,
    and per window the wall time the run spent beyond its busiest host's work (waiting for
    the others and exchanging batches)."""
    busy = result["busy_s"]
    per_event_us = sum(busy) / result["events"] * 1e6
    line = f"    {result['windows']:,} windows; hosts busy {busy} s, {per_event_us:.0f} us of host time per event"
    if len(busy) > 1:
        sync_ms = (result["wall_s"] - max(busy)) / result["windows"] * 1e3
        line += (f"; waiting {result['waiting_s']} s, of which behind each window's busiest host "
                 f"{result['behind_s']} s; {sync_ms:.1f} ms a window beyond the busiest host's work")
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", nargs="?", type=Path, default=ROOT / "experiments" / "scenarios" / "scale_500.yaml")
    parser.add_argument("--hosts", default="1,2")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(args.scenario.resolve(), hosts, args.overrides, Path(tmp) / f"run-{hosts}")
                   for hosts in args.hosts.split(",")]
    for result in results:
        print(f"hosts {result['hosts']:>4}: {result['wall_s']:>7.1f} s run wall ({result['process_s']} s with "
              f"start-up), {result['events']:,} events")
        print(where_the_time_goes(result))
        for name, peaks in result["peaks_mb"].items():
            print(f"    {name:<18} peak RSS MB {peaks}")
    first = results[0]["wall_s"]
    for result in results[1:]:
        print(f"hosts {result['hosts']} vs {results[0]['hosts']}: {first / result['wall_s']:.2f}x faster")


if __name__ == "__main__":
    main()
