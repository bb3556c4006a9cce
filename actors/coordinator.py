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

import os
import platform
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

import networkx as nx

import topologies

from protocols.errors import InputError
from protocols.stack import broker_class
from workloads.oracle import expected_subscribers
from workloads.trace import Injection

from .checkpoints import Checkpoint, Checkpoints
from .costs import CostModel
from .engine import Settings
from .faults import FaultSchedule
from .host import BrokerHost, HostSpec, Status, collecting_rarely, next_window_start, window_end
from .partition import host_weights, partition
from .results import as_run_dir, discard_parts, write_manifest, write_table
from .storage import RunDir

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_stop_requests: list[str] = []  # why the driver was asked to stop (a signal); checked every chunk
_kept_hosts: dict | None = None  # see hosts_kept


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
        "brokers": spec.graph.number_of_nodes(), "versions": versions(),
    }
    write_manifest(run_dir, manifest)
    with _recording(run_dir, manifest) as clock:
        hosts = _host_count(spec, address)
        manifest["hosts"] = hosts
        transport = _transport(spec, run_dir, hosts, address)
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
        transport = _transport(spec, run_dir, hosts, address)
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
        manifest.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
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
        end_us, statuses = _drive(spec, transport, _lookahead(spec, hosts, placement), checkpoints, manifest,
                                  clock, progress)
    manifest["host_nodes"] = transport.nodes()  # a host restored after a loss may be elsewhere
    manifest.update(status="complete", sim_end_us=end_us, events=sum(s.arrivals for s in statuses),
                    windows=statuses[0].windows, host_busy_s=[round(s.busy_s, 3) for s in statuses],
                    host_waiting_s=[round(s.waiting_s, 3) for s in statuses],
                    host_behind_s=[round(s.behind_s, 3) for s in statuses])
    if checkpoints.latest is not None:
        manifest["checkpoints"] = checkpoints.latest.epoch
    checkpoints.remove()


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


def _lookahead(spec: RunSpec, hosts: int, placement: dict[str, int]) -> int:
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
    found = expected_subscribers(spec.injections, spec.protocol.get("check_conformance", True))
    write_table(run_dir, "expected/part-0.parquet", "expected", {
        "pub_id": [p for p, _, _ in found], "t_pub_us": [t for _, t, _ in found],
        "subscribers": [n for _, _, n in found]})


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


# ---------------------------------------------------------------------- transports


class _LocalTransport:
    """Hosts as plain objects in this process (``hosts: 0``, and tests)."""

    collects = False

    def host_weights(self) -> None:
        return None  # one process: nothing to weigh

    def start(self, specs: list[HostSpec], checkpoint: Checkpoint | None = None) -> None:
        """The hosts of ``specs``, as they were at ``checkpoint`` or new (None)."""
        self.specs = specs
        self.restore(checkpoint)

    def restore(self, checkpoint: Checkpoint | None) -> None:
        self.hosts = [BrokerHost(s, checkpoint.snapshots[s.host] if checkpoint else None) for s in self.specs]
        self.incoming: list[list] = [[] for _ in self.hosts]

    def checkpoint(self, paths: list[str]) -> list[int]:
        self._hand_over()
        return [host.checkpoint(path) for host, path in zip(self.hosts, paths)]

    def _hand_over(self) -> None:
        """Give every host what the others sent it (nothing stays between hosts)."""
        for host, batches in zip(self.hosts, self.incoming):
            host.receive(*batches)
        self.incoming = [[] for _ in self.hosts]

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
        self._hand_over()  # what is still on its way is in flight at the end
        return [h.finish(end) for h in self.hosts]

    def nodes(self) -> list[str | None]:
        return [None for _ in self.hosts]  # in this process, not on a Ray node

    def close(self) -> None:
        pass


class HostLost(RuntimeError):
    """A host actor died: its process was killed or its node is gone (not an error of its own)."""

    def __init__(self, host: int, cause: BaseException) -> None:
        super().__init__(f"host {host} lost: {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")
        self.host = host


class _RayTransport:
    """Hosts as Ray actors that exchange their batches directly (see ``BrokerHost.run_chunk``).

    With ``cpus_per_host`` > 0 every host reserves that many CPUs in a placement group of one
    bundle per host, spread over the nodes (a head started with no CPUs gets none); with 0
    they reserve nothing (a laptop may run more hosts than it has cores) and are dealt out
    over the nodes in turn (``_spread``). A host actor that dies (its process killed, its node
    gone) raises ``HostLost`` from the call that notices; the others may be blocked waiting
    for its batch, so ``restore`` replaces them all. With ``collect_into`` (output.collect: driver) hosts
    write no files: the driver takes them after every call and writes them there.

    Actors start empty, so that the brokers can be partitioned knowing where each host runs
    (``host_weights``), and are then given their brokers (``start``)."""

    PLACEMENT_TIMEOUT_S = 120

    def __init__(self, ray, hosts: int, cpus_per_host: float = 0, collect_into: RunDir | None = None) -> None:
        self.ray = ray
        self.cpus_per_host = cpus_per_host
        self.collect_into = collect_into
        self.collects = collect_into is not None
        self.finished = False  # every host returned from ``finish``: none waits for a peer
        self.group = self._placement_group(hosts, cpus_per_host) if cpus_per_host else None
        self.actors = self._empty_actors(hosts)

    def _empty_actors(self, hosts: int) -> list:
        kept = self._kept(hosts)
        remote = self.ray.remote(BrokerHost)
        options = {"num_cpus": self.cpus_per_host}
        if self.group is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            placements = [PlacementGroupSchedulingStrategy(self.group, i) for i in range(hosts)]
        else:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            placements = [NodeAffinitySchedulingStrategy(node, soft=False) for node in self._spread(hosts)]
        return kept + [remote.options(**options, scheduling_strategy=placements[h]).remote()
                       for h in range(len(kept), hosts)]

    def _spread(self, hosts: int) -> list[str]:
        """The node of each of ``hosts`` hosts that reserve no CPUs: in turn over the live nodes
        with CPUs, the driver's last (on a cluster, the head), so that N hosts on N nodes run
        one on each. (Ray's SPREAD strategy does not promise that: on a three-node local
        cluster it put two of three hosts on one node, and so did a soft node affinity, which
        gives way to a node still starting its workers.) Only live nodes are chosen: a host
        lost with its node is restored elsewhere."""
        driver = self.ray.get_runtime_context().get_node_id()
        cpus = self._live_node_cpus()
        with_cpus = [node for node, count in cpus.items() if count > 0]
        order = sorted(with_cpus or list(cpus), key=lambda node: (node == driver, node))
        return [order[h % len(order)] for h in range(hosts)]

    def _keeps_hosts(self) -> bool:
        return _kept_hosts is not None and self.group is None

    def _kept(self, hosts: int) -> list:
        """Up to ``hosts`` kept host actors that still answer (see ``hosts_kept``)."""
        if not self._keeps_hosts():
            return []
        if not _same_ray_job(_kept_hosts):  # kept under an earlier Ray session: gone with it
            _kept_hosts.update(job=self.ray.get_runtime_context().get_job_id(), actors=[])
        taken = _kept_hosts["actors"][:hosts]
        del _kept_hosts["actors"][:hosts]
        answering = []
        for actor in taken:
            try:
                self.ray.get(actor.__ray_ready__.remote())
                answering.append(actor)
            except self.ray.exceptions.RayActorError:
                pass
        return answering

    def host_weights(self) -> list[float]:
        """Each host's share of a CPU on the node it runs on (see ``partition.host_weights``)."""
        return host_weights(self.nodes(), self._live_node_cpus())

    def _live_node_cpus(self) -> dict[str, float]:
        """The CPUs of each live node of the cluster, by node id."""
        return {n["NodeID"]: n.get("Resources", {}).get("CPU", 0) for n in self.ray.nodes() if n.get("Alive")}

    def start(self, specs: list[HostSpec], checkpoint: Checkpoint | None = None) -> None:
        """Give the hosts their brokers, as they were at ``checkpoint`` or new (None)."""
        self.specs = specs
        snapshots = checkpoint.snapshots if checkpoint else None
        if self.collect_into is not None:  # the hosts can neither read the snapshots nor delete parts
            for host in range(len(specs)):
                discard_parts(self.collect_into, host, checkpoint.epoch if checkpoint else 0)
            snapshots = snapshots and [self.collect_into.read_bytes(path) for path in snapshots]
        self._gather([actor.start.remote(replace(s, injections=[]) if snapshots else s,
                                         snapshots[s.host] if snapshots else None)
                      for actor, s in zip(self.actors, specs)])
        authkey = os.urandom(32)  # only this run's hosts may send each other batches (pickles)
        addresses = self._gather([a.listen.remote(authkey) for a in self.actors])
        self.relayed = relays(self.nodes())
        self._gather([a.connect.remote(addresses, self.relayed, authkey) for a in self.actors])

    def restore(self, checkpoint: Checkpoint | None) -> None:
        """New host actors (anywhere in the cluster), as they were at ``checkpoint`` or from
        the start (None)."""
        self._kill_actors()
        self.actors = self._empty_actors(len(self.specs))
        self.start(self.specs, checkpoint)

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

    def _gather(self, calls: list) -> list:
        """The results of one call per host, failing as soon as any fails: a host blocked
        waiting for a dead peer's batch would never return."""
        host_of = {call: host for host, call in enumerate(calls)}
        waiting = list(calls)
        while waiting:
            done, waiting = self.ray.wait(waiting, num_returns=1)
            try:
                self.ray.get(done[0])
            except self.ray.exceptions.RayActorError as exc:
                raise HostLost(host_of[done[0]], exc) from exc
        return self.ray.get(calls)

    def _kill_actors(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []

    def nodes(self) -> list[str | None]:
        return self._gather([a.node.remote() for a in self.actors])

    def close(self) -> None:
        if self.finished and self._keeps_hosts():
            _kept_hosts["actors"] += self.actors  # idle: the run's last call returned
            self.actors = []
        self._kill_actors()
        if self.group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.group)

    def _store_files(self) -> None:
        if self.collect_into is not None:
            for files in self._gather([a.take_files.remote() for a in self.actors]):
                for path, data in files:
                    self.collect_into.write_bytes(path, data)

    def checkpoint(self, paths: list[str]) -> list[int]:
        epochs = self._gather([a.checkpoint.remote(path) for a, path in zip(self.actors, paths)])
        self._store_files()
        return epochs

    def status(self) -> list[Status]:
        return self._gather([a.status.remote() for a in self.actors])

    def run_chunk(self, statuses: list[Status], stop: int, lookahead: int) -> list[Status]:
        statuses = self._gather([a.run_chunk.remote(statuses, stop, lookahead) for a in self.actors])
        self._store_files()
        return statuses

    def finish(self, end: int) -> list[Status]:
        statuses = self._gather([a.finish.remote(end) for a in self.actors])
        self._store_files()
        self.finished = True
        return statuses


def relays(nodes: list[str | None]) -> bool:
    """Whether hosts exchange their batches through host 0 rather than pair by pair: where
    more than two hosts share nodes, the messages (each pickled, sent and woken for) compete
    for the same CPUs and a relay makes 2 (N - 1) a window instead of N (N - 1); with a node
    each, pairs run in parallel."""
    return len(nodes) > 2 and len(set(nodes)) < len(nodes)


@contextmanager
def hosts_kept():
    """Within it, the host actors of a run that completes outlive it, and later runs in this
    process take them up before they start new ones; leaving it kills the kept ones. Starting
    a host is starting a process: a Ray worker, this project's imports and its compiled
    kernels loaded, about 3 s of CPU on a small machine (bench/RESULTS.md), and a process that
    makes many runs (the tests, a notebook) pays it once per host instead of once per run.
    Only hosts that reserve no CPUs (``runtime.cpus_per_host`` 0) are kept; a host's
    ``start`` replaces all of its state, so a kept one starts a run as a new one would."""
    global _kept_hosts
    outer = _kept_hosts
    _kept_hosts = {"job": None, "actors": []}
    try:
        yield
    finally:
        kept, _kept_hosts = _kept_hosts, outer
        if kept["actors"] and _same_ray_job(kept):
            import ray

            for actor in kept["actors"]:
                ray.kill(actor)


def _same_ray_job(kept: dict) -> bool:
    """Whether ``kept``'s actors belong to the Ray session this process is connected to now."""
    import ray

    return ray.is_initialized() and kept["job"] == ray.get_runtime_context().get_job_id()


def ray_runtime_env() -> dict:
    """Lets Ray workers import this project even when it runs from a checkout, not installed."""
    pythonpath = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": pythonpath}}


def _ray(address: str | None):
    import ray

    if not ray.is_initialized():
        ray.init(
            address=address, include_dashboard=False, configure_logging=True, logging_level="ERROR",
            log_to_driver=False, runtime_env=ray_runtime_env(),
        )
    return ray


def _transport(spec: RunSpec, run_dir: RunDir, hosts: int, address: str | None):
    """The hosts, as objects in this process (``hosts: 0``) or as Ray actors, not started."""
    if hosts == 0:
        return _LocalTransport()
    collect_into = run_dir if spec.collect == "driver" else None
    return _RayTransport(_ray(address), hosts, spec.cpus_per_host, collect_into)


# ---------------------------------------------------------------------- the window loop


def _drive(spec: RunSpec, transport, lookahead: int, checkpoints: Checkpoints, manifest: dict, clock,
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
        if _stop_requests:
            raise SystemExit(_stop_requests[0])
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

