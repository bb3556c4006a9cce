"""Cost-model refit (issue 4): replay PADRES's reference workload (49 brokers, 42,000
subscriptions, no unsubscriptions) through the real brokers for active, lazy and no covering,
fit the ``padres`` profile to the measured per-message averages, and print measured versus
target per row (within 20% is the goal).

    python bench/bench_costs.py [--subscriptions 42000] [--publications 8000] [--write]

``--write`` replaces actors/profiles/padres.yaml with the fit. Publications are a sample of
the 200,000 (their average cost depends on the table sizes, not on how many there are).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.reference_fit import MODES, TARGETS_MS, fit, predicted_ms, reference_work  # noqa: E402

PROFILE = Path(__file__).resolve().parent.parent / "actors" / "profiles" / "padres.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", type=int, default=42_000)
    parser.add_argument("--publications", type=int, default=8_000)
    parser.add_argument("--write", action="store_true", help="write the fitted profile to " + str(PROFILE))
    parser.add_argument("--work", type=Path, help="JSON of the replayed work: read it if it exists, else save it there")
    args = parser.parse_args()
    work = json.loads(args.work.read_text()) if args.work and args.work.exists() else {}
    for mode in (m for m in MODES if m not in work):
        started = time.perf_counter()
        work[mode] = reference_work(mode, args.subscriptions, args.publications)
        print(f"{mode}: replayed in {time.perf_counter() - started:.0f} s; average work per message: "
              + json.dumps({k: round(v["match_predicates"] + v["cover_predicates"], 1) for k, v in work[mode].items()}),
              file=sys.stderr)
    if args.work:
        args.work.write_text(json.dumps(work))
    profile = fit(work)
    print(f"{'mode':<7} {'row':<13} {'target ms':>9} {'fitted ms':>9} {'error':>7}")
    for mode in MODES:
        predicted = predicted_ms(profile, work[mode])
        for row, target in TARGETS_MS[mode].items():
            if target is None:
                continue
            error = f"{(predicted[row] - target) / target:+.0%}" if target else f"{predicted[row]:+.2f}"
            print(f"{mode:<7} {row:<13} {target:>9.2f} {predicted[row]:>9.2f} {error:>7}")
    if args.write:
        header = ("# Fitted by bench/bench_costs.py to PADRES's per-message times on the reference workload\n"
                  f"# ({args.subscriptions:,} subscriptions, enterprise49; see actors/reference_fit.py).\n"
                  "# Units: microseconds, and microseconds per counted unit.\n")
        PROFILE.write_text(header + yaml.safe_dump(profile, sort_keys=False))
        print(f"wrote {PROFILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
