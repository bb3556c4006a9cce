"""Runs a scenario: places brokers on hosts, drives conservative time windows, writes the run.

The coordinator advances in chunks of one sampling interval of virtual time (for the
progress bar), skipping idle stretches by starting each chunk at the earliest pending event
anywhere. Within a chunk, several hosts run conservative windows: each ends at the earliest
time any broker could hand a message to another host (a pending event's time, plus the cost
profile's smallest service time for an arrival, plus the broker's way to its host's
boundary: ``partition.boundary_distances``) plus the lookahead, the smallest latency a
cross-host message can have: that of the overlay links between hosts and, when the protocol
stack opens links of its own (any broker to any other), the default latency. Ray hosts
exchange their batches directly between windows, without the coordinator.
"""
from __future__ import annotations

import platform
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import networkx as nx

import topologies

from protocols.errors import InputError
from protocols.plugins import installed
from protocols.stack import broker_class
from workloads.oracle import expected_subscribers
from workloads.trace import Injection

from .checkpoints import Checkpoints
from .costs import CostModel
from .engine import Settings
from .faults import FaultSchedule
from .host import HostSpec, Status, collecting_rarely, next_window_start
from .partition import partition
from .results import as_run_dir, read_table, write_expected, write_manifest, write_table
from .storage import RunDir
from .transports import HostLost, connect_ray, transport_for, worker_cpus

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_stop_requests: list[str] = []  # why the driver was asked to stop (a signal); checked every chunk


def request_stop(reason: str) -> None:
    """Make the run in progress stop at its next chunk, failing with ``reason``. A signal
    handler calls it before raising: an exception raised while the interpreter runs a
    destructor is reported and dropped, and the run would go on."""
    _stop_requests.append(reason)


def stop_reason() -> str | None:
    """Why the run in progress was asked to stop, if it was."""
    return _stop_requests[0] if _stop_requests else None


@dataclass
class RunSpec:
    name: str
    seed: int
    graph: nx.Graph  # nodes carry "role" (or None), edges "latency_us"
    injections: list[Injection]
    protocol: dict
    hosts: int | str  # 0, N, "all" or "auto"
    settings: Settings
    costs: CostModel
    duration_us: int | None
    scenario: dict  # the resolved scenario, for the manifest
    cpus_per_host: float = 0  # > 0: each host reserves this many CPUs in a placement group
    faults: FaultSchedule | None = None
    checkpoint_every_us: int | None = None  # virtual time between checkpoints (None: none)
    collect: str = "hosts"  # who writes the hosts' files: "hosts" (shared storage) or "driver"
    max_recoveries: int = 3  # host losses a run survives (each restores the latest checkpoint)
    scenario_dir: str = ""  # the scenario file's directory: its relative paths start there


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("pubsub-emu", "ray", "numpy", "pyarrow", "networkx"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def injected(injections: list[Injection]) -> dict[str, dict]:
    """Per message kind the clients inject: how many, and the first and last injection's time
    (s); what a figure shades as a phase of the workload (its unsubscriptions)."""
    found: dict[str, dict] = {}
    for injection in injections:
        t_s = injection.t_us / 1e6
        seen = found.get(injection.message.kind)
        if seen is None:
            found[injection.message.kind] = {"count": 1, "first_s": t_s, "last_s": t_s}
        else:
            seen["count"] += 1
            seen["first_s"], seen["last_s"] = min(seen["first_s"], t_s), max(seen["last_s"], t_s)
    return dict(sorted(found.items()))


def run(spec: RunSpec, run_dir: str | Path | RunDir, address: str | None = None,
        progress: bool | None = None) -> dict:
    """Run ``spec`` into ``run_dir`` (a new directory: a path or a URI); returns the manifest.
    Raises after recording a failure."""
    run_dir = as_run_dir(run_dir)
    if run_dir.exists():
        raise FileExistsError(f"{run_dir}: already exists")
    run_dir.make()
    manifest = {
        "name": spec.name, "seed": spec.seed, "status": "running", "scenario": spec.scenario,
        "scenario_dir": spec.scenario_dir,
        "brokers": spec.graph.number_of_nodes(), "injected": injected(spec.injections), "versions": versions(),
    }
    write_manifest(run_dir, manifest)
    with _recording(run_dir, manifest) as clock:
        hosts = _host_count(spec, address)
        manifest["hosts"] = hosts
        transport = transport_for(spec, run_dir, hosts, address)
        try:
            placement = partition(spec.graph, max(hosts, 1), transport.host_weights())
            _write_static_tables(run_dir, spec.graph, placement)
            if spec.faults is not None:
                _write_expected(run_dir, spec)
            checkpoints = Checkpoints(run_dir, spec.checkpoint_every_us, max(hosts, 1), spec.max_recoveries)
            if spec.checkpoint_every_us:
                checkpoints.save_setup(spec, hosts, placement)
            _simulate(spec, run_dir, transport, placement, checkpoints, manifest, progress, clock)
        finally:
            transport.close()
    return manifest


def resume(run_dir: str | Path | RunDir, address: str | None = None, progress: bool | None = None) -> dict:
    """Continue an interrupted run (its driver died, or it failed) from its latest checkpoint."""
    run_dir = as_run_dir(run_dir)
    try:
        manifest = run_dir.read_json("manifest.json")
    except (OSError, ValueError):
        raise InputError(f"--resume {run_dir}: not a run directory (no readable manifest.json)") from None
    if manifest.get("status") == "complete":
        raise InputError(f"--resume {run_dir}: the run is complete; there is nothing to resume")
    spec, hosts, placement, checkpoints = Checkpoints.of_run(run_dir)
    for stale in ("error", "traceback", "events_per_s"):
        manifest.pop(stale, None)
    manifest.update(status="running", hosts=hosts, resumed=manifest.get("resumed", 0) + 1)
    write_manifest(run_dir, manifest)
    earlier_wall_s = checkpoints.latest.wall_s if checkpoints.latest else 0.0
    with _recording(run_dir, manifest, earlier_wall_s) as clock:
        transport = transport_for(spec, run_dir, hosts, address)
        try:
            _simulate(spec, run_dir, transport, placement, checkpoints, manifest, progress, clock)
        finally:
            transport.close()
    return manifest


@contextmanager
def _recording(run_dir: RunDir, manifest: dict, earlier_wall_s: float = 0.0):
    """Records the run's outcome and wall time in its manifest, whatever happens; yields a
    clock of the run's wall time so far (``earlier_wall_s``: a resumed run's before)."""
    started = time.perf_counter()

    def clock() -> float:
        return earlier_wall_s + time.perf_counter() - started

    try:
        yield clock
    except BaseException as exc:
        error, reason = f"{type(exc).__name__}: {exc}", stop_reason()
        if reason and not isinstance(exc, SystemExit):
            # the signal handler's exit, raised inside a library's C call, came out as that call's own error
            error = f"{reason} (surfacing as {error})"
        manifest.update(status="failed", error=error, traceback=traceback.format_exc())
        raise
    finally:
        manifest["wall_s"] = round(clock(), 3)
        if manifest.get("events"):
            manifest["events_per_s"] = round(manifest["events"] / max(manifest["wall_s"], 1e-9), 1)
        write_manifest(run_dir, manifest)


def _simulate(spec: RunSpec, run_dir: RunDir, transport, placement: dict[str, int], checkpoints: Checkpoints,
              manifest: dict, progress: bool | None, clock) -> None:
    """Start the hosts (from the latest checkpoint, if any), drive them to the end, and record
    the outcome; a complete run keeps no checkpoints."""
    hosts = manifest["hosts"]
    with collecting_rarely():  # hosts in this process (hosts: 0), or the driver's own heap
        transport.start(host_specs(spec, None if transport.collects else run_dir, hosts, placement),
                        checkpoints.restore_point())
        manifest["host_nodes"] = transport.nodes()
        end_us, statuses = drive(spec, transport, cross_host_lookahead(spec, hosts, placement), checkpoints, manifest,
                                  clock, progress)
    manifest["host_nodes"] = transport.nodes()  # a host restored after a loss may be elsewhere
    manifest.update(status="complete", sim_end_us=end_us, events=sum(s.arrivals for s in statuses),
                    windows=statuses[0].windows, host_busy_s=[round(s.busy_s, 3) for s in statuses],
                    host_waiting_s=[round(s.waiting_s, 3) for s in statuses],
                    host_behind_s=[round(s.behind_s, 3) for s in statuses])
    if checkpoints.latest is not None:
        manifest["checkpoints"] = checkpoints.latest.epoch
    checkpoints.remove()
    _measure(spec, run_dir)


def _measure(spec: RunSpec, run_dir: RunDir) -> None:
    """The tables the stack's protocols measure of the finished run (``Protocol.measure``)."""
    for key, declared in installed().items():
        value = spec.protocol.get(key, declared.default)
        if declared.measure is not None and declared.active(value):
            read = lambda table, columns: read_table(run_dir, table, columns)  # noqa: E731
            for table, columns in declared.measure(value, spec, read).items():
                write_table(run_dir, f"{table}/part-0.parquet", table, columns)


def _host_count(spec: RunSpec, address: str | None) -> int:
    brokers = spec.graph.number_of_nodes()
    if spec.hosts == "all":
        return brokers
    if spec.hosts == "auto":
        return max(1, min(worker_cpus(connect_ray(address)), brokers))
    return min(int(spec.hosts), brokers)


def host_links(spec: RunSpec, hosts: int, placement: dict[str, int]) -> dict[tuple[int, int], int]:
    """(host, other host) -> the smallest latency a message between them can have: that of
    the overlay links the placement cuts between them, and the default latency between any
    two hosts where the stack opens links."""
    links = {}
    if broker_class(spec.protocol).opens_links:
        links = {(a, b): spec.settings.default_latency for a in range(hosts) for b in range(hosts) if a != b}
    for a, b, data in spec.graph.edges(data=True):
        if placement[a] != placement[b]:
            for pair in ((placement[a], placement[b]), (placement[b], placement[a])):
                links[pair] = min(links.get(pair, data["latency_us"]), data["latency_us"])
    return links


def cross_host_lookahead(spec: RunSpec, hosts: int, placement: dict[str, int]) -> int:
    """The smallest latency a message between two hosts can have (``host_links``)."""
    links = host_links(spec, hosts, placement)
    if hosts <= 1 or not links:
        return spec.settings.sample_interval  # nothing crosses hosts: a window per chunk
    return min(links.values())


def _write_static_tables(run_dir: RunDir, graph: nx.Graph, placement: dict[str, int]) -> None:
    names = sorted(graph)
    write_table(run_dir, "brokers/part-0.parquet", "brokers", {
        "broker": names, "role": [graph.nodes[n].get("role") for n in names], "host": [placement[n] for n in names],
    })
    edges = sorted(tuple(sorted(e)) for e in graph.edges)
    write_table(run_dir, "links/part-0.parquet", "links", {
        "a": [a for a, _ in edges], "b": [b for _, b in edges],
        "latency_us": [graph.edges[a, b]["latency_us"] for a, b in edges],
    })


def _write_expected(run_dir: RunDir, spec: RunSpec) -> None:
    """What the delivery oracle expects of each publication (the analysis counts the
    deliveries faults cost against it)."""
    write_expected(run_dir, expected_subscribers(spec.injections, spec.protocol.get("check_conformance", True)))


def host_specs(spec: RunSpec, run_dir, hosts: int, placement: dict[str, int]) -> list[HostSpec]:
    graph = spec.graph
    index_of = {name: i for i, name in enumerate(sorted(graph))}
    latency = {}
    for a, b, data in graph.edges(data=True):
        latency[(a, b)] = latency[(b, a)] = data["latency_us"]
    overlay = topologies.neighbours(graph)
    specs = []
    for host in range(max(hosts, 1)):
        mine = sorted(n for n in graph if placement[n] == host)
        specs.append(HostSpec(
            host=host, hosts=max(hosts, 1), run_dir=None if run_dir is None else str(run_dir),
            neighbors={n: overlay[n] for n in mine}, overlay=overlay,
            index_of=index_of, host_of=placement, latency=latency, costs=spec.costs.as_dict(),
            settings=spec.settings, protocol=spec.protocol,
            injections=[i for i in spec.injections if placement[i.broker] == host], faults=spec.faults,
        ))
    return specs


# ---------------------------------------------------------------------- the window loop


def drive(spec: RunSpec, transport, lookahead: int, checkpoints: Checkpoints, manifest: dict, clock,
           progress: bool | None):
    """Run the hosts to the end and finish them; a lost host restores every host to the
    latest checkpoint (or the start) and the run goes on from there."""
    end = spec.duration_us if spec.duration_us is not None else float("inf")
    bar = _progress_bar(spec, progress)
    lost = None
    while True:
        try:
            if lost is not None:
                transport.restore(checkpoints.restore_point())
            statuses = _advance(spec, transport, transport.status(), end, lookahead, checkpoints, clock, bar)
            final = spec.duration_us if spec.duration_us is not None else max(s.last_event_t for s in statuses)
            statuses = transport.finish(final)
            break
        except HostLost as exc:
            lost = exc
            _record_loss(manifest, lost, checkpoints, bar)
    if bar is not None:
        _update_bar(bar, final, statuses, clock)
        bar.close()
    return final, statuses


def _advance(spec: RunSpec, transport, statuses: list[Status], end: float, lookahead: int,
             checkpoints: Checkpoints, clock, bar) -> list[Status]:
    """Run chunks of one sampling interval until no event is left before ``end``, taking the
    checkpoints that fall due on the way."""
    while True:
        reason = stop_reason()
        if reason:
            raise SystemExit(reason)
        start = next_window_start(statuses)
        if start >= end:
            return statuses
        stop = min(int(start) + spec.settings.sample_interval, end)
        statuses = transport.run_chunk(statuses, stop, lookahead)
        if stop < end and checkpoints.due(stop):
            checkpoints.take(transport, stop, clock())
        if bar is not None:
            _update_bar(bar, stop, statuses, clock)


def _record_loss(manifest: dict, lost: HostLost, checkpoints: Checkpoints, bar) -> None:
    """Note a lost host in the manifest and on the terminal; fail once there were too many."""
    losses = manifest.setdefault("recoveries", [])
    if len(losses) >= checkpoints.max_recoveries:
        raise RuntimeError(f"{lost}; the run already recovered {len(losses)} times (runtime.max_recoveries)") from lost
    latest = checkpoints.latest
    restored = f"checkpoint {latest.epoch} at {latest.t_us / 1e6:g} s" if latest else "the start"
    losses.append({"error": str(lost), "host": lost.host, "epoch": latest.epoch if latest else 0,
                   "restored_t_us": latest.t_us if latest else 0})
    line = f"pubsub-emu: {lost}; restoring every host to {restored}"
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr)


def _progress_bar(spec: RunSpec, progress: bool | None):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm

    if spec.duration_us is None:  # runs until idle: no total to measure against
        return tqdm(total=None, desc=spec.name, file=sys.stderr,
                    bar_format="{desc}: {n:.1f} s simulated [wall {elapsed}{postfix}]")
    return tqdm(total=spec.duration_us / 1e6, desc=spec.name, file=sys.stderr,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total_fmt} s simulated [wall {elapsed}{postfix}]")


def _update_bar(bar, until: float, statuses: list[Status], clock) -> None:
    events = sum(s.arrivals for s in statuses)
    wall = max(clock(), 1e-9)
    bar.n = min(until / 1e6, bar.total) if bar.total else until / 1e6
    line = f"{events / wall:,.0f} events/s, largest queue {max(s.largest_queue for s in statuses)}"
    if len(statuses) > 1:  # where the time goes: the slowest host works while the others wait
        slowest = max(range(len(statuses)), key=lambda h: statuses[h].busy_s)
        line += (f", {len(statuses)} hosts, {statuses[0].windows / wall:,.0f} windows/s, "
                 f"slowest host {slowest} busy {statuses[slowest].busy_s / wall:.0%}")
    bar.set_postfix_str(line)

