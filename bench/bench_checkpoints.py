"""What checkpoints cost (issue 16): a scenario run without them and with
``runtime.checkpoint_every`` at each interval given, in this process one after the other; per
variant the wall time (not counting the loads this script adds), the checkpoints taken, the
time one takes, the size of one (all hosts), the time to load it back, and whether the tables
equal those of the run without.

    python bench/bench_checkpoints.py [--scenario faults_core_crash] [--every 300s,60s] [--hosts 0]
"""
import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc

from comparison import SCENARIOS, print_table

from actors import checkpoints  # noqa: E402  (comparison puts the project on the path)
from actors.coordinator import run  # noqa: E402
from actors.results import STREAMED, read_table  # noqa: E402
from experiments.build import resolve  # noqa: E402
from fingerprint import table_hash  # noqa: E402


def timed_checkpoints() -> dict:
    """Wrap ``Checkpoints.take`` to time each checkpoint, size it, and time loading it back."""
    taken = {"seconds": [], "bytes": [], "load_s": []}
    take = checkpoints.Checkpoints.take

    def take_timed(self, *args):
        started = time.perf_counter()
        checkpoint = take(self, *args)
        taken["seconds"].append(time.perf_counter() - started)
        taken["bytes"].append(sum(Path(self.run_dir.path(p)).stat().st_size for p in checkpoint.snapshots))
        started = time.perf_counter()
        for path in checkpoint.snapshots:
            self.run_dir.read_pickle(path)
        taken["load_s"].append(time.perf_counter() - started)
        return checkpoint

    checkpoints.Checkpoints.take = take_timed
    return taken


def fault_summary(run_dir: Path) -> str:
    """Messages dropped by cause, and deliveries against what the oracle expects (runs with faults)."""
    messages = read_table(run_dir, "messages")
    dropped = Counter(messages.filter(pc.field("dropped")).column("cause").to_pylist())
    expected = read_table(run_dir, "expected")
    wanted = pc.sum(expected.column("subscribers")).as_py() if expected.num_rows else None
    return (f"dropped by cause: {dict(sorted(dropped.items()))}; deliveries "
            f"{read_table(run_dir, 'deliveries').num_rows:,} of {wanted:,} expected" if wanted else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="faults_core_crash")
    parser.add_argument("--every", default="300s,60s", help="checkpoint intervals to compare")
    parser.add_argument("--hosts", default="0")
    args = parser.parse_args()
    taken = timed_checkpoints()
    rows, reference = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for every in ["none", *args.every.split(",")]:
            for values in taken.values():
                values.clear()
            overrides = [f"runtime.hosts={args.hosts}"] + ([] if every == "none" else [f"runtime.checkpoint_every={every}"])
            out = Path(tmp) / every
            started = time.perf_counter()
            manifest = run(resolve(SCENARIOS / f"{args.scenario}.yaml", overrides), out, progress=False)
            wall = time.perf_counter() - started - sum(taken["load_s"])
            hashes = {t: table_hash(out, t) for t in STREAMED}
            if reference is None:
                reference = hashes
                print(fault_summary(out), file=sys.stderr)
            count = len(taken["seconds"])
            rows.append({
                "every": every, "wall_s": wall, "ratio": wall / rows[0]["wall_s"] if rows else 1.0,
                "checkpoints": count, "take_s": sum(taken["seconds"]) / max(count, 1),
                "mb": max(taken["bytes"], default=0) / 1e6, "load_s": max(taken["load_s"], default=0.0),
                "identical": "yes" if hashes == reference else "NO",
            })
            print(f"{every}: {wall:.1f} s, {manifest['events']} events", file=sys.stderr)
    print_table(rows, [("every", "{}"), ("wall_s", "{:.1f}"), ("ratio", "{:.3f}"), ("checkpoints", "{}"),
                       ("take_s", "{:.2f}"), ("mb", "{:.1f}"), ("load_s", "{:.2f}"), ("identical", "{}")])


if __name__ == "__main__":
    main()
