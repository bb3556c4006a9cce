"""Windows between hosts (issue 40): how many windows a scenario takes at several host counts
and how its events spread over the hosts, and from those a model of a cluster run's wall time.

    python bench/bench_windows.py [SCENARIO.yaml] [--hosts 2,4,16] [--set KEY=VALUE ...]
                                  [--event-us C] [--window-ms S]

The hosts run in this process, one after another (no Ray): windows and events are exactly a
Ray run's, only wall times differ. With ``--event-us`` (host time per event, from a one-host
run: ``bench_scale.py``) and ``--window-ms`` (wall time a window costs beyond the busiest
host's work, from a two-host run) it prints, per host count H, the model

    wall = busiest host's events x C  +  windows x S

on H nodes, one host each: the event work no longer shrinks once one host holds the most
events, and the windows do not shrink with H at all. With ``--cores K`` the H hosts share K
cores (a local cluster on one machine): the event work is then at least all events x C / K.
"""
import argparse
import tempfile
import time
from pathlib import Path

from actors import coordinator
from actors.checkpoints import Checkpoints
from actors.partition import partition
from experiments.scenario import resolve

ROOT = Path(__file__).resolve().parent.parent


def windows_and_events(scenario: Path, hosts: int, overrides: list[str], run_dir: Path) -> dict:
    spec = resolve(scenario, overrides)
    placement = partition(spec.graph, hosts)
    transport = coordinator._LocalTransport()
    transport.start(coordinator.host_specs(spec, run_dir, hosts, placement))
    lookahead = coordinator._lookahead(spec, hosts, placement)
    started = time.perf_counter()
    _, statuses = coordinator._drive(spec, transport, lookahead, Checkpoints(run_dir, None, hosts, 0), {},
                                     time.perf_counter, False)
    events = [s.arrivals for s in statuses]
    return {"hosts": hosts, "windows": statuses[0].windows, "events": events, "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", nargs="?", type=Path, default=ROOT / "experiments" / "scenarios" / "scale_500.yaml")
    parser.add_argument("--hosts", default="2,4,16")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--event-us", type=float, help="host time per event (one-host run)")
    parser.add_argument("--window-ms", type=float, help="wall time per window beyond the busiest host's work")
    parser.add_argument("--cores", type=int, help="cores the hosts share (default: one per host)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for hosts in map(int, args.hosts.split(",")):
            run_dir = Path(tmp) / f"hosts-{hosts}"
            run_dir.mkdir()
            result = windows_and_events(args.scenario.resolve(), hosts, args.overrides, run_dir)
            events = result["events"]
            line = (f"hosts {hosts:>3}: {result['windows']:,} windows, {sum(events):,} events, busiest host "
                    f"{max(events):,} ({max(events) / (sum(events) / hosts):.2f}x the mean)  [{result['wall_s']:.0f} s here]")
            if args.event_us and args.window_ms:
                shared = sum(events) / args.cores if args.cores else 0
                work, sync = max(max(events), shared) * args.event_us / 1e6, result["windows"] * args.window_ms / 1e3
                line += (f"\n           model: {work + sync:,.0f} s = {work:,.0f} s of the events "
                         f"+ {sync:,.0f} s of windows ({sync / (work + sync):.0%})")
            print(line, flush=True)


if __name__ == "__main__":
    main()
