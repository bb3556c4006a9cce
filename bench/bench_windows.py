"""Windows between hosts (issue 40): how many windows a scenario takes at several host counts
and how its events spread over the hosts, and from those a model of a cluster run's wall time.

    python bench/bench_windows.py [SCENARIO.yaml] [--hosts 2,4,16] [--set KEY=VALUE ...]
                                  [--event-us C] [--window-ms S] [--fixed-s F] [--cores K]

The hosts run in this process, one after another (no Ray): windows and events are exactly a
Ray run's, only wall times differ. Every window waits for its busiest host, so the event work
of a run on H nodes is the critical path: the sum over windows of the busiest host's events
in that window (printed against the mean host's, all events / H). With ``--event-us`` (host
time per event, from a one-host run: ``bench_scale.py``), ``--window-ms`` (the exchange's wall
time per window) and ``--fixed-s`` (start-up and last writes) it prints, per host count H,
the model

    wall = F  +  critical path x C  +  windows x S

on H nodes, one host each. Fit S from a two-host run: (wall - F - critical path x C) /
windows. With ``--cores K`` the H hosts share K cores (a local cluster on one machine): the
event work is then at least all events x C / K.
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


class _CountingTransport(coordinator._LocalTransport):
    """Hosts in this process that add up, window by window, the busiest host's events."""

    critical_events = 0

    def run_window(self, until: int):
        before = [host.engine.arrivals for host in self.hosts]
        statuses = super().run_window(until)
        self.critical_events += max(s.arrivals - b for s, b in zip(statuses, before))
        return statuses


def windows_and_events(scenario: Path, hosts: int, overrides: list[str], run_dir: Path) -> dict:
    spec = resolve(scenario, overrides)
    placement = partition(spec.graph, hosts)
    transport = _CountingTransport()
    transport.start(coordinator.host_specs(spec, run_dir, hosts, placement))
    lookahead = coordinator._lookahead(spec, hosts, placement)
    started = time.perf_counter()
    _, statuses = coordinator._drive(spec, transport, lookahead, Checkpoints(run_dir, None, hosts, 0), {},
                                     time.perf_counter, False)
    events = [s.arrivals for s in statuses]
    return {"hosts": hosts, "windows": statuses[0].windows, "events": events,
            "critical_events": transport.critical_events, "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", nargs="?", type=Path, default=ROOT / "experiments" / "scenarios" / "scale_500.yaml")
    parser.add_argument("--hosts", default="2,4,16")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--event-us", type=float, help="host time per event (one-host run)")
    parser.add_argument("--window-ms", type=float, help="wall time of the exchange per window (fit from two hosts)")
    parser.add_argument("--fixed-s", type=float, default=0.0, help="wall time of start-up and the last writes")
    parser.add_argument("--cores", type=int, help="cores the hosts share (default: one per host)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for hosts in map(int, args.hosts.split(",")):
            run_dir = Path(tmp) / f"hosts-{hosts}"
            run_dir.mkdir()
            result = windows_and_events(args.scenario.resolve(), hosts, args.overrides, run_dir)
            events, critical, mean = result["events"], result["critical_events"], sum(result["events"]) / hosts
            line = (f"hosts {hosts:>3}: {result['windows']:,} windows, {sum(events):,} events, busiest host "
                    f"{max(events):,} ({max(events) / mean:.2f}x the mean), critical path {critical:,} "
                    f"({critical / mean:.2f}x)  [{result['wall_s']:.0f} s here]")
            if args.event_us and args.window_ms:
                shared = sum(events) / args.cores if args.cores else 0
                work, sync = max(critical, shared) * args.event_us / 1e6, result["windows"] * args.window_ms / 1e3
                wall = args.fixed_s + work + sync
                line += (f"\n           model: {wall:,.0f} s = {args.fixed_s:,.0f} s fixed + {work:,.0f} s of the "
                         f"events + {sync:,.0f} s of exchanges; waiting for the busiest host "
                         f"{(critical - mean) * args.event_us / 1e6:,.0f} s")
            print(line, flush=True)


if __name__ == "__main__":
    main()
