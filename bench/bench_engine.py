"""Engine benchmark (issue 3): broker message events per second (manifest events / wall_s)
on a 55-broker random tree with a few thousand subscriptions and publications, for the
``zero`` and ``padres`` profiles and hosts 0, 1 and 2.

    python bench/bench_engine.py [--operations 6000] [--hosts 0,1,2] [--profiles zero,padres]
                                 [--covering none|lazy|active]
    python bench/bench_engine.py --where [--operations 2000] [--covering ...]

``--covering active --operations 10000`` is the covering workload of issue 40 (about 3,000
subscriptions issued, active covering at every broker).

``--where`` runs hosts 0 with the ``zero`` profile and prints where the time goes: wall time
per message kind a broker handles and, inside that, per routing-table question, the rest
being the engine and result rows. It times calls with ``perf_counter`` (about a microsecond
per call added) rather than cProfile, whose per-call overhead inflates short calls and
numba's dispatch several-fold and so misplaces the time. A compiled method cannot be timed
from outside (its callers reach it directly), so ``--where`` runs the pure-Python build, and
says so: its shares are those of the sources, not of the compiled build.
"""
import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.coordinator import run  # noqa: E402
from experiments.build import resolve  # noqa: E402
from protocols.compiled import PURE_PYTHON, build_name, running_compiled  # noqa: E402


def scenario(operations: int, profile: str, hosts, covering: str = "none") -> dict:
    return {
        "name": f"bench-{profile}-{hosts}-{covering}",
        "seed": 1,
        "topology": {"generator": {"name": "random_tree", "n": 55, "seed": 1}, "link": {"latency": "1ms"}},
        "workload": {"generator": {"name": "random_mix", "publishers": 10, "subscribers": 120,
                                   "operations": operations, "spacing": 0.01}},
        "protocol": {"covering": covering},
        "runtime": {"hosts": hosts, "costs": profile, "sample_interval": "1s"},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=6000)
    parser.add_argument("--hosts", default="0,1,2")
    parser.add_argument("--profiles", default="zero,padres")
    parser.add_argument("--covering", default="none", choices=("none", "lazy", "active"))
    parser.add_argument("--where", action="store_true", help="profile one hosts-0 zero-cost run instead")
    args = parser.parse_args()
    if args.where:
        if running_compiled():
            os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | {PURE_PYTHON: "1"})
        print("timing the pure-Python build (the compiled build's calls cannot be timed one by one)")
        where_the_time_goes(args.operations, args.covering)
        return
    print(f"build: {build_name()}")
    print(f"{'profile':>8} {'hosts':>5} {'events':>9} {'wall s':>8} {'events/s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            for hosts in args.hosts.split(","):
                path = Path(tmp) / f"{profile}-{hosts}.yaml"
                path.write_text(yaml.safe_dump(scenario(args.operations, profile, int(hosts), args.covering)))
                manifest = run(resolve(path), Path(tmp) / f"run-{profile}-{hosts}", progress=False)
                print(f"{profile:>8} {hosts:>5} {manifest['events']:>9} {manifest['wall_s']:>8.1f} "
                      f"{manifest['events_per_s']:>10,.0f}", flush=True)


INDEX_QUESTIONS = ("match", "intersecting_slots", "intersected_by_slots", "covering", "is_covered", "covered_by", "add",
                   "remove")


def where_the_time_goes(operations: int, covering: str) -> None:
    from protocols.broker import Broker
    from protocols.index import FilterIndex
    from protocols.language import parse_filter, parse_publication

    loading = time.perf_counter()  # the first query loads the numba kernel: time it apart
    warm = FilterIndex()
    warm.add("S", parse_filter("[x,>,1]"))
    warm.matching(parse_publication("[x,2]"))
    print(f"numba kernel loaded in {time.perf_counter() - loading:.2f} s (once per process, "
          "otherwise inside the first run's wall time)")
    spent: Counter = Counter()
    calls: Counter = Counter()

    def timed(function, label_of):
        def call(self, *args, **kwargs):
            started = time.perf_counter()
            try:
                return function(self, *args, **kwargs)
            finally:
                label = label_of(args)
                spent[label] += time.perf_counter() - started
                calls[label] += 1
        return call

    with ExitStack() as patches, tempfile.TemporaryDirectory() as tmp:
        patches.enter_context(mock.patch.object(Broker, "handle", timed(Broker.handle, lambda a: ("handle", a[0].kind))))
        for question in INDEX_QUESTIONS:
            method = getattr(FilterIndex, question)
            patches.enter_context(mock.patch.object(FilterIndex, question, timed(method, lambda a, q=question: ("index", q))))
        path = Path(tmp) / "where.yaml"
        path.write_text(yaml.safe_dump(scenario(operations, "zero", 0, covering)))
        manifest = run(resolve(path), Path(tmp) / "run", progress=False)
    events, wall = manifest["events"], manifest["wall_s"]
    handling = sum(v for (part, _), v in spent.items() if part == "handle")
    print(f"{events:,} events in {wall:.1f} s ({events / wall:,.0f} events/s with the timers): "
          f"{wall / events * 1e6:.0f} us per event")
    _print_part("messages handled by brokers", "handle", handling, spent, calls, events, wall)
    _print_part("  of which routing-table questions", "index", None, spent, calls, events, wall)
    rest = wall - handling
    print(f"{'engine, result rows and the rest':<36} {rest / events * 1e6:>7.1f} us/event {rest / wall:>6.1%}")


def _print_part(title: str, part: str, total, spent: Counter, calls: Counter, events: int, wall: float) -> None:
    rows = sorted(((v, label) for (p, label), v in spent.items() if p == part), reverse=True)
    total = sum(v for v, _ in rows) if total is None else total
    print(f"{title:<36} {total / events * 1e6:>7.1f} us/event {total / wall:>6.1%}")
    for seconds, label in rows:
        count = calls[part, label]
        print(f"    {label:<16} {count:>9,} calls {seconds / count * 1e6:>8.1f} us each "
              f"{seconds / events * 1e6:>7.1f} us/event {seconds / wall:>6.1%}")


if __name__ == "__main__":
    main()
