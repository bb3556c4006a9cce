"""Engine benchmark (issue 3): broker message events per second (manifest events / wall_s)
on a 55-broker random tree with a few thousand subscriptions and publications, for the
``zero`` and ``padres`` profiles and hosts 0, 1 and 2.

    python bench/bench_engine.py [--operations 6000] [--hosts 0,1,2] [--profiles zero,padres]
"""
import argparse
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.coordinator import run  # noqa: E402
from experiments.scenario import resolve  # noqa: E402


def scenario(operations: int, profile: str, hosts) -> dict:
    return {
        "name": f"bench-{profile}-{hosts}",
        "seed": 1,
        "topology": {"generator": {"name": "random_tree", "n": 55, "seed": 1}, "link": {"latency": "1ms"}},
        "workload": {"generator": {"name": "random_mix", "publishers": 10, "subscribers": 120,
                                   "operations": operations, "spacing": 0.01}},
        "runtime": {"hosts": hosts, "costs": profile, "sample_interval": "1s"},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=6000)
    parser.add_argument("--hosts", default="0,1,2")
    parser.add_argument("--profiles", default="zero,padres")
    args = parser.parse_args()
    print(f"{'profile':>8} {'hosts':>5} {'events':>9} {'wall s':>8} {'events/s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            for hosts in args.hosts.split(","):
                path = Path(tmp) / f"{profile}-{hosts}.yaml"
                path.write_text(yaml.safe_dump(scenario(args.operations, profile, int(hosts))))
                manifest = run(resolve(path), Path(tmp) / f"run-{profile}-{hosts}", progress=False)
                print(f"{profile:>8} {hosts:>5} {manifest['events']:>9} {manifest['wall_s']:>8.1f} "
                      f"{manifest['events_per_s']:>10,.0f}", flush=True)


if __name__ == "__main__":
    main()
