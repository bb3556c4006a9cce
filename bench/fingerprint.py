"""Fingerprints of run results (issue 12, "no result changes"): one hash per streamed table of
each reference scenario, over its rows sorted by every column, so a change to the data path
can be checked to leave ``deliveries``, ``messages``, ``samples`` and ``events`` identical.

    python bench/fingerprint.py [--out FILE] [--only NAME,...]
    python bench/fingerprint.py --compare BEFORE.json AFTER.json

The reference scenarios: the engine benchmark's (2,000 operations, zero and padres costs)
every ``unsub_burst_small_*``, the test-sized mobile rush hours (moving clients) and one
test-sized scenario of every other family (``FAMILIES``), all with ``hosts: 0``.
"""
import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.coordinator import run  # noqa: E402
from protocols.compiled import build_name  # noqa: E402
from actors.results import STREAMED, read_table  # noqa: E402
from experiments.build import resolve  # noqa: E402

from bench_engine import scenario as engine_scenario  # noqa: E402

SCENARIOS = Path(__file__).resolve().parent.parent / "experiments" / "scenarios"


def references(tmp: Path) -> dict[str, Path]:
    """Name -> scenario file of every reference scenario."""
    found = {}
    for profile in ("zero", "padres"):
        path = tmp / f"engine-{profile}.yaml"
        path.write_text(yaml.safe_dump(engine_scenario(2000, profile, 0)))
        found[f"engine-{profile}"] = path
    for path in sorted(SCENARIOS.glob("unsub_burst_small_*.yaml")) + sorted(SCENARIOS.glob("mobile_rush_hour_small_*.yaml")):
        if "sweep" not in path.stem:
            found[path.stem] = path
    for name in FAMILIES:
        found[name] = SCENARIOS / f"{name}.yaml"
    return found


# one test-sized scenario of every other family: workloads, protocols and faults
FAMILIES = ("clustered_small_selective", "faults_small_core_crash", "faults_small_lossy_wan",
            "mobile_monitors_small_moving_selective", "mobile_paper_small_nested_incremental", "multitree_small_mult",
            "multitree_small_semcast", "relocation_small_enterprise_pop", "relocation_small_random_grape_load",
            "softlinks_small_dense_SH", "softlinks_small_dense_SH_moves", "softlinks_small_sparse_S1",
            "workflow_paper_small_incremental", "quickstart")


# one encoder for every row: json.dumps with options makes a new one per call
ROW_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def table_hash(run_dir: Path, table: str) -> str:
    """The table's row count and a hash of its rows, each encoded as JSON, in sorted order."""
    encoded = sorted(map(ROW_ENCODER.encode, read_table(run_dir, table).to_pylist()))
    digest = hashlib.sha256()
    for row in encoded:
        digest.update(row.encode())
    return f"{len(encoded)}:{digest.hexdigest()[:16]}"


def fingerprint(only: set[str] | None) -> dict[str, dict[str, str]]:
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in references(Path(tmp)).items():
            if only and name not in only:
                continue
            run_dir = Path(tmp) / f"run-{name}"
            manifest = run(resolve(path, ["runtime.hosts=0"]), run_dir, progress=False)
            result[name] = {table: table_hash(run_dir, table) for table in STREAMED}
            print(f"{name:<32} {manifest['wall_s']:>7.1f} s  " +
                  " ".join(f"{t}={h}" for t, h in result[name].items()), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", default="")
    parser.add_argument("--compare", nargs=2, type=Path)
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        differing = [(n, t) for n in before if n in after for t in before[n] if before[n][t] != after[n][t]]
        for name, table in differing:
            print(f"DIFFERS {name} {table}: {before[name][table]} -> {after[name][table]}")
        print("identical" if not differing else f"{len(differing)} tables differ")
        sys.exit(1 if differing else 0)
    result = fingerprint(set(filter(None, args.only.split(","))))
    print(f"build: {build_name()}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
