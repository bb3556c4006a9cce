"""Runs a scenario: places brokers on hosts, drives conservative time windows, writes the run.

The coordinator advances in chunks of one sampling interval of virtual time (for the
progress bar), skipping idle stretches by starting each chunk at the earliest pending event
anywhere. Within a chunk, several hosts run conservative windows: each ends at the earliest
time any broker could send a message (a pending completion, or a pending arrival plus the
cost profile's smallest service time) plus the lookahead, the smallest latency a cross-host
message can have: that of the overlay links between hosts and, when the protocol stack
opens links of its own (any broker to any other), the default latency. Ray hosts exchange
their batches directly between windows, without the coordinator.
"""
from __future__ import annotations

import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import networkx as nx

import topologies

from protocols.stack import broker_class
from workloads.oracle import expected_subscribers
from workloads.trace import Injection

from .costs import CostModel
from .engine import Settings
from .faults import FaultSchedule
from .host import BrokerHost, HostSpec, Status, next_window_start, window_end
from .partition import partition
from .results import write_manifest, write_table

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_stop_requests: list[str] = []  # why the driver was asked to stop (a signal); checked every chunk


def request_stop(reason: str) -> None:
    """Make the run in progress stop at its next chunk, failing with ``reason``. A signal
    handler calls it before raising: an exception raised while the interpreter runs a
    destructor is reported and dropped, and the run would go on."""
    _stop_requests.append(reason)


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


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("pubsub-emu", "ray", "numpy", "pyarrow", "networkx"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def run(spec: RunSpec, run_dir: Path, address: str | None = None, progress: bool | None = None) -> dict:
    """Run ``spec`` into ``run_dir``; returns the manifest. Raises after recording a failure."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=False)
    manifest = {
        "name": spec.name, "seed": spec.seed, "status": "running", "scenario": spec.scenario,
        "brokers": spec.graph.number_of_nodes(), "versions": versions(),
    }
    write_manifest(run_dir, manifest)
    started = time.perf_counter()
    try:
        hosts = _host_count(spec, address)
        manifest["hosts"] = hosts
        placement = partition(spec.graph, max(hosts, 1))
        _write_static_tables(run_dir, spec.graph, placement)
        if spec.faults is not None:
            _write_expected(run_dir, spec)
        transport = _transport(spec, run_dir, hosts, placement, address)
        try:
            manifest["host_nodes"] = transport.nodes()
            end_us, statuses = _drive(spec, transport, _lookahead(spec, hosts, placement), started, progress)
        finally:
            transport.close()
        arrivals = sum(s.arrivals for s in statuses)
        manifest.update(status="complete", sim_end_us=end_us, events=arrivals, windows=statuses[0].windows,
                        host_busy_s=[round(s.busy_s, 3) for s in statuses],
                        host_waiting_s=[round(s.waiting_s, 3) for s in statuses])
    except BaseException as exc:
        manifest.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        raise
    finally:
        manifest["wall_s"] = round(time.perf_counter() - started, 3)
        if manifest.get("events"):
            manifest["events_per_s"] = round(manifest["events"] / max(manifest["wall_s"], 1e-9), 1)
        write_manifest(run_dir, manifest)
    return manifest


def _host_count(spec: RunSpec, address: str | None) -> int:
    brokers = spec.graph.number_of_nodes()
    if spec.hosts == "all":
        return brokers
    if spec.hosts == "auto":
        return max(1, min(_worker_cpus(_ray(address)), brokers))
    return min(int(spec.hosts), brokers)


def _worker_cpus(ray) -> int:
    """The CPUs broker hosts may use: every CPU Ray reports, minus the driver's node's when the
    cluster has other nodes (on a cluster the driver's node is the head)."""
    total = int(ray.cluster_resources().get("CPU", 1))
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) < 2:
        return total
    driver = ray.get_runtime_context().get_node_id()
    mine = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes if n["NodeID"] == driver)
    return max(total - mine, 1)


def _lookahead(spec: RunSpec, hosts: int, placement: dict[str, int]) -> int:
    """The smallest latency a message between two hosts can have: that of the overlay links
    the placement cuts, and the default latency of links a protocol opens (when its stack
    opens any)."""
    graph = spec.graph
    latencies = [d["latency_us"] for a, b, d in graph.edges(data=True) if placement[a] != placement[b]]
    if broker_class(spec.protocol).opens_links:
        latencies.append(spec.settings.default_latency)
    if hosts <= 1 or not latencies:
        return spec.settings.sample_interval  # nothing crosses hosts: a window per chunk
    return min(latencies)


def _write_static_tables(run_dir: Path, graph: nx.Graph, placement: dict[str, int]) -> None:
    names = sorted(graph)
    write_table(run_dir / "brokers" / "part-0.parquet", "brokers", {
        "broker": names, "role": [graph.nodes[n].get("role") for n in names], "host": [placement[n] for n in names],
    })
    edges = sorted(tuple(sorted(e)) for e in graph.edges)
    write_table(run_dir / "links" / "part-0.parquet", "links", {
        "a": [a for a, _ in edges], "b": [b for _, b in edges],
        "latency_us": [graph.edges[a, b]["latency_us"] for a, b in edges],
    })


def _write_expected(run_dir: Path, spec: RunSpec) -> None:
    """What the delivery oracle expects of each publication (the analysis counts the
    deliveries faults cost against it)."""
    found = expected_subscribers(spec.injections, spec.protocol.get("check_conformance", True))
    write_table(run_dir / "expected" / "part-0.parquet", "expected", {
        "pub_id": [p for p, _, _ in found], "t_pub_us": [t for _, t, _ in found],
        "subscribers": [n for _, _, n in found]})


def host_specs(spec: RunSpec, run_dir: Path, hosts: int, placement: dict[str, int]) -> list[HostSpec]:
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
            host=host, hosts=max(hosts, 1), run_dir=str(run_dir),
            neighbors={n: overlay[n] for n in mine}, overlay=overlay,
            index_of=index_of, host_of=placement, latency=latency, costs=spec.costs.as_dict(),
            settings=spec.settings, protocol=spec.protocol,
            injections=[i for i in spec.injections if placement[i.broker] == host], faults=spec.faults,
        ))
    return specs


# ---------------------------------------------------------------------- transports


class _LocalTransport:
    """Hosts as plain objects in this process (``hosts: 0``, and tests)."""

    def __init__(self, specs: list[HostSpec]) -> None:
        self.hosts = [BrokerHost(s) for s in specs]
        self.incoming: list[list] = [[] for _ in self.hosts]

    def status(self) -> list[Status]:
        return [h.status() for h in self.hosts]

    def run_window(self, until: int) -> list[Status]:
        results = [h.run_window(until, *self.incoming[i]) for i, h in enumerate(self.hosts)]
        self.incoming = [[r[1 + d] for r in results if r[1 + d]] for d in range(len(self.hosts))]
        return [r[0] for r in results]

    def run_chunk(self, statuses: list[Status], stop: int, lookahead: int) -> list[Status]:
        start = next_window_start(statuses)
        while start < stop:
            statuses = self.run_window(int(min(window_end(statuses, lookahead), stop)))
            start = next_window_start(statuses)
        return statuses

    def finish(self, end: int) -> list[Status]:
        return [h.finish(end) for h in self.hosts]

    def nodes(self) -> list[str | None]:
        return [None for _ in self.hosts]  # in this process, not on a Ray node

    def close(self) -> None:
        pass


class _RayTransport:
    """Hosts as Ray actors that exchange their batches directly (see ``BrokerHost.run_chunk``).

    With ``cpus_per_host`` > 0 every host reserves that many CPUs in a placement group of one
    bundle per host, spread over the nodes (a head started with no CPUs gets none); with 0
    they reserve nothing (a laptop may run more hosts than it has cores) and are spread as
    Ray sees fit."""

    PLACEMENT_TIMEOUT_S = 120

    def __init__(self, specs: list[HostSpec], ray, cpus_per_host: float = 0) -> None:
        self.ray = ray
        self.group = None
        # two threads per host: one runs windows while the other takes peers' deliveries
        remote = ray.remote(BrokerHost)
        options = {"num_cpus": cpus_per_host, "max_concurrency": 2}
        if cpus_per_host:
            self.group = self._placement_group(len(specs), cpus_per_host)
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            self.actors = [remote.options(**options, scheduling_strategy=PlacementGroupSchedulingStrategy(self.group, i))
                           .remote(s) for i, s in enumerate(specs)]
        else:
            self.actors = [remote.options(**options, scheduling_strategy="SPREAD").remote(s) for s in specs]
        ray.get([a.connect.remote(self.actors) for a in self.actors])

    def _placement_group(self, hosts: int, cpus: float):
        from ray.util.placement_group import placement_group, remove_placement_group

        group = placement_group([{"CPU": cpus}] * hosts, strategy="SPREAD")
        ready, _ = self.ray.wait([group.ready()], timeout=self.PLACEMENT_TIMEOUT_S)
        if not ready:
            remove_placement_group(group)
            raise RuntimeError(f"{hosts} hosts of {cpus:g} CPUs each do not fit the cluster "
                               f"({self.ray.cluster_resources().get('CPU', 0):g} CPUs): lower runtime.hosts "
                               "or runtime.cpus_per_host")
        return group

    def nodes(self) -> list[str | None]:
        return self.ray.get([a.node.remote() for a in self.actors])

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        if self.group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.group)

    def status(self) -> list[Status]:
        return self.ray.get([a.status.remote() for a in self.actors])

    def run_chunk(self, statuses: list[Status], stop: int, lookahead: int) -> list[Status]:
        return self.ray.get([a.run_chunk.remote(statuses, stop, lookahead) for a in self.actors])

    def finish(self, end: int) -> list[Status]:
        return self.ray.get([a.finish.remote(end) for a in self.actors])


def ray_runtime_env() -> dict:
    """Lets Ray workers import this project even when it runs from a checkout, not installed."""
    pythonpath = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": pythonpath}}


def _ray(address: str | None):
    import ray

    if not ray.is_initialized():
        ray.init(
            address=address, include_dashboard=False, configure_logging=True, logging_level="WARNING",
            log_to_driver=False, runtime_env=ray_runtime_env(),
        )
    return ray


def _transport(spec: RunSpec, run_dir: Path, hosts: int, placement, address):
    specs = host_specs(spec, run_dir, hosts, placement)
    if hosts == 0:
        return _LocalTransport(specs)
    return _RayTransport(specs, _ray(address), spec.cpus_per_host)


# ---------------------------------------------------------------------- the window loop


def _drive(spec: RunSpec, transport, lookahead: int, started: float, progress: bool | None):
    end = spec.duration_us if spec.duration_us is not None else float("inf")
    chunk = spec.settings.sample_interval
    bar = _progress_bar(spec, progress)
    statuses = transport.status()
    while True:
        if _stop_requests:
            raise SystemExit(_stop_requests[0])
        start = next_window_start(statuses)
        if start >= end:
            break
        stop = min(int(start) + chunk, end)
        statuses = transport.run_chunk(statuses, stop, lookahead)
        if bar is not None:
            _update_bar(bar, stop, statuses, started)
    final = spec.duration_us if spec.duration_us is not None else max(s.last_event_t for s in statuses)
    statuses = transport.finish(final)
    if bar is not None:
        _update_bar(bar, final, statuses, started)
        bar.close()
    return final, statuses


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


def _update_bar(bar, until: float, statuses: list[Status], started: float) -> None:
    events = sum(s.arrivals for s in statuses)
    wall = max(time.perf_counter() - started, 1e-9)
    bar.n = min(until / 1e6, bar.total) if bar.total else until / 1e6
    line = f"{events / wall:,.0f} events/s, largest queue {max(s.largest_queue for s in statuses)}"
    if len(statuses) > 1:  # where the time goes: the slowest host works while the others wait
        slowest = max(range(len(statuses)), key=lambda h: statuses[h].busy_s)
        line += (f", {len(statuses)} hosts, {statuses[0].windows / wall:,.0f} windows/s, "
                 f"slowest host {slowest} busy {statuses[slowest].busy_s / wall:.0%}")
    bar.set_postfix_str(line)

