"""Engine benchmark (issue 3): broker message events per second (manifest events / wall_s)
on a 55-broker random tree with a few thousand subscriptions and publications, for the
``zero`` and ``padres`` profiles and hosts 0, 1 and 2.

    python bench/bench_engine.py [--operations 6000] [--hosts 0,1,2] [--profiles zero,padres]
    python bench/bench_engine.py --where [--operations 2000]

``--where`` runs hosts 0 with the ``zero`` profile under cProfile and prints where the time
goes: own time per module of this project (and the rest grouped), then the costliest functions.
"""
import argparse
import cProfile
import pstats
import sys
import tempfile
from collections import Counter
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
    parser.add_argument("--where", action="store_true", help="profile one hosts-0 zero-cost run instead")
    args = parser.parse_args()
    if args.where:
        where_the_time_goes(args.operations)
        return
    print(f"{'profile':>8} {'hosts':>5} {'events':>9} {'wall s':>8} {'events/s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            for hosts in args.hosts.split(","):
                path = Path(tmp) / f"{profile}-{hosts}.yaml"
                path.write_text(yaml.safe_dump(scenario(args.operations, profile, int(hosts))))
                manifest = run(resolve(path), Path(tmp) / f"run-{profile}-{hosts}", progress=False)
                print(f"{profile:>8} {hosts:>5} {manifest['events']:>9} {manifest['wall_s']:>8.1f} "
                      f"{manifest['events_per_s']:>10,.0f}", flush=True)


def where_the_time_goes(operations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "where.yaml"
        path.write_text(yaml.safe_dump(scenario(operations, "zero", 0)))
        spec = resolve(path)
        profiler = cProfile.Profile()
        manifest = profiler.runcall(run, spec, Path(tmp) / "run", progress=False)
    stats = pstats.Stats(profiler)
    root = str(Path(__file__).resolve().parent.parent) + "/"
    by_module: Counter = Counter()
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():
        module = filename.removeprefix(root) if filename.startswith(root) else "(python, numpy, pyarrow, builtins)"
        by_module[module] += own
    total = sum(by_module.values())
    events = manifest["events"]
    print(f"{events:,} events; {total:.1f} s profiled ({events / total:,.0f} events/s under cProfile)")
    for module, own in by_module.most_common(12):
        print(f"{own / total:>6.1%} {own:>7.2f} s  {module}")
    stats.sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
