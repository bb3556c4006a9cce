"""``pubsub-emu check`` on large runs (issue 61): pairs checked a second and peak memory.

Each run is checked in a fresh process (its peak resident memory is that process's), its
time split into rebuilding the workload, and the check itself (the oracle and the deliveries).

    python bench/bench_check.py RUN_DIR [RUN_DIR ...]
"""
import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(run_dir: str) -> dict:
    """In this process: check ``run_dir``, timing its parts."""
    sys.path.insert(0, str(ROOT))
    from actors.storage import RunDir
    from experiments.check import check_loaded, load_run

    started = time.perf_counter()
    data = load_run(RunDir(run_dir))
    workload_s = time.perf_counter() - started
    result = check_loaded(data)
    total_s = time.perf_counter() - started
    return {"run": run_dir, "exact": result["exact"], "pairs": result["expected_pairs"],
            "deliveries": result["deliveries"], "workload_s": round(workload_s, 1), "total_s": round(total_s, 1),
            "pairs_per_s": round(result["expected_pairs"] / total_s),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # measure this run in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    for run in args.runs:
        line = subprocess.run([sys.executable, __file__, "--one", run, run], check=True, capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
        found = json.loads(line)
        print(f"{found['run']}: {'exact' if found['exact'] else 'NOT exact'}, {found['pairs']:,} pairs, "
              f"{found['deliveries']:,} deliveries: {found['total_s']} s ({found['workload_s']} s rebuilding the "
              f"workload), {found['pairs_per_s']:,} pairs/s, peak {found['peak_rss_mb']:,} MB",
              flush=True)


if __name__ == "__main__":
    main()
