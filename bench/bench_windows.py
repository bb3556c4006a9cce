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

With ``--neighbours`` it also estimates what hosts that wait only for the hosts they share
links with would save (issue 40, item 2; measured, not built): the hosts run rounds in
lockstep here, each to the earliest arrival its neighbours have promised (a null-message
protocol: a host promises each neighbour its earliest output, or its own window's end plus
the least service where inputs it has not yet seen may come, plus their link's latency). Run
asynchronously, a host's round waits only for its neighbours' previous round, so the critical
path is the longest chain of rounds through neighbours; every chunk still ends at the driver.
It prints the rounds and that critical path beside the same rounds waited for in lockstep.
"""
import argparse
import tempfile
import time
from pathlib import Path

from actors import coordinator, transports
from actors.checkpoints import Checkpoints
from actors.host import BrokerHost, next_window_start, window_end
from actors.partition import partition
from experiments.build import resolve

ROOT = Path(__file__).resolve().parent.parent


class _CountingTransport(transports.LocalTransport):
    """Hosts in this process that add up, window by window, the busiest host's events."""

    critical_events = 0

    def run_window(self, until: int):
        before = [host.engine.arrivals for host in self.hosts]
        statuses = super().run_window(until)
        self.critical_events += max(s.arrivals - b for s, b in zip(statuses, before))
        return statuses


def windows_and_events(scenario: Path, hosts: int, overrides: list[str], run_dir: Path) -> dict:
    transport, statuses, wall_s = _in_process(scenario, hosts, overrides, run_dir,
                                              lambda spec, placement: _CountingTransport())
    events = [s.arrivals for s in statuses]
    return {"hosts": hosts, "windows": statuses[0].windows, "events": events,
            "critical_events": transport.critical_events, "wall_s": wall_s}


def neighbour_rounds(scenario: Path, hosts: int, overrides: list[str], run_dir: Path) -> dict:
    """Hosts that wait only for their neighbours, in lockstep rounds (see the module's text);
    they write the run's tables to ``run_dir``."""
    rounds, _, _ = _in_process(scenario, hosts, overrides, run_dir,
                               lambda spec, placement: _NeighbourRounds(coordinator.host_links(spec, hosts, placement)))
    return {"rounds": rounds.count, "critical_events": max(rounds.chain_events), "lockstep_events": rounds.lockstep}


def _in_process(scenario: Path, hosts: int, overrides: list[str], run_dir: Path, transport_for):
    """Run a scenario on ``hosts`` hosts in this process, through the transport
    ``transport_for(spec, placement)`` makes; the transport, the hosts' last statuses and the
    wall time the run took after start-up."""
    spec = resolve(scenario, overrides)
    placement = partition(spec.graph, hosts)
    transport = transport_for(spec, placement)
    transport.start(coordinator.host_specs(spec, run_dir, hosts, placement))
    lookahead = coordinator.cross_host_lookahead(spec, hosts, placement)
    started = time.perf_counter()
    _, statuses = coordinator.drive(spec, transport, lookahead, Checkpoints(run_dir, None, hosts, 0), {},
                                     time.perf_counter, False)
    return transport, statuses, time.perf_counter() - started


class _NeighbourRounds(transports.LocalTransport):
    """Hosts in this process that run rounds, each to what its neighbours promised it."""

    def __init__(self, links: dict[tuple[int, int], int]) -> None:
        self.links = links
        self.count = self.lockstep = 0  # rounds; events of the busiest host of each, summed

    def start(self, specs, checkpoint=None) -> None:
        super().start(specs, checkpoint)
        self.neighbours = [sorted(b for a, b in self.links if a == h) for h in range(len(self.hosts))]
        self.chain_events = [0] * len(self.hosts)  # by host, the events on the longest chain of rounds ending there

    def run_chunk(self, statuses: list, stop: int, lookahead: int) -> list:
        """Rounds until every host has reached ``stop``; every promise starts at the window end
        all hosts' ``statuses`` give, and the chunk ends with nothing between hosts."""
        promised = dict.fromkeys(self.links, window_end(statuses, lookahead))
        incoming, reached = [[] for _ in self.hosts], [next_window_start(statuses)] * len(self.hosts)
        while min(reached) < stop:
            incoming, promised = self._round(incoming, promised, reached, stop)
        for host, batches in zip(self.hosts, incoming):
            _receive(host, batches, stop)
        self.chain_events = [max(self.chain_events)] * len(self.hosts)  # the chunk ends at the driver
        return self.status()

    def _round(self, incoming: list, promised: dict, reached: list, stop: int) -> tuple[list, dict]:
        """One round: every host takes the last round's batches and runs to what its neighbours
        promised in it (``reached``, updated); the batches sent and the promises made."""
        events, sent, promising = [0] * len(self.hosts), [[] for _ in self.hosts], dict(promised)
        for h, host in enumerate(self.hosts):
            _receive(host, incoming[h], reached[h])
            if reached[h] >= stop:
                continue
            reached[h] = min([stop] + [promised[n, h] for n in self.neighbours[h]])
            before = host.engine.arrivals
            host.engine.run_until(int(reached[h]))
            events[h] = host.engine.arrivals - before
            for destination, batch in host.engine.take_outbox().items():
                sent[destination].append(batch)
            output = host.engine.earliest_output()
            for n in self.neighbours[h]:
                promising[h, n] = min(output, reached[h] + host.engine.min_service) + self.links[h, n]
        self.chain_events = [max(self.chain_events[n] for n in [h, *self.neighbours[h]]) + events[h]
                             for h in range(len(self.hosts))]
        self.count += 1
        self.lockstep += max(events)
        return sent, promising


def _receive(host: BrokerHost, batches: list, reached: float) -> None:
    """Give ``host`` the batches of the last round, which no promise may let arrive before
    the time it has reached."""
    early = min((arrival.key[0] for batch in batches for arrival in batch), default=reached)
    if early < reached:
        raise RuntimeError(f"host {host.spec.host} reached {reached} us and then got a message for {early} us")
    host.receive(*batches)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", nargs="?", type=Path, default=ROOT / "experiments" / "scenarios" / "scale_500.yaml")
    parser.add_argument("--hosts", default="2,4,16")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--event-us", type=float, help="host time per event (one-host run)")
    parser.add_argument("--window-ms", type=float, help="wall time of the exchange per window (fit from two hosts)")
    parser.add_argument("--fixed-s", type=float, default=0.0, help="wall time of start-up and the last writes")
    parser.add_argument("--cores", type=int, help="cores the hosts share (default: one per host)")
    parser.add_argument("--neighbours", action="store_true", help="also estimate hosts that wait only for neighbours")
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
            if args.neighbours:
                (run_dir / "neighbours").mkdir()
                rounds = neighbour_rounds(args.scenario.resolve(), hosts, args.overrides, run_dir / "neighbours")
                line += (f"\n           waiting for neighbours only: {rounds['rounds']:,} rounds, critical path "
                         f"{rounds['critical_events']:,} ({rounds['critical_events'] / mean:.2f}x the mean; "
                         f"{rounds['lockstep_events'] / mean:.2f}x on the same rounds in lockstep)")
            print(line, flush=True)


if __name__ == "__main__":
    main()
