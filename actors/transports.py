"""How a run's broker hosts are held: as objects in this process (``hosts: 0``, tests) or as
Ray actors that exchange their windows' batches directly; starting Ray, keeping host actors
from one run to the next, and what Ray's workers need to import the project."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from protocols.compiled import PURE_PYTHON

from .checkpoints import Checkpoint
from .host import BrokerHost, HostSpec, Status, next_window_start, window_end
from .partition import host_weights
from .results import discard_parts
from .storage import RunDir

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_kept_hosts: dict | None = None  # see hosts_kept


class LocalTransport:
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


class RayTransport:
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
        self._gather([actor.start.remote(s, snapshots[s.host] if snapshots else None)
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
    kernels loaded, about 3 s of CPU on a small machine (bench/LOG.md), and a process that
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
    """Lets Ray workers import this project even when it runs from a checkout, not installed, and
    run the sources of a compiled build if this process was asked to (protocols/compiled.py)."""
    pythonpath = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    asked = {PURE_PYTHON: os.environ[PURE_PYTHON]} if PURE_PYTHON in os.environ else {}  # (the hosts' build too)
    return {"env_vars": {"PYTHONPATH": pythonpath} | asked}


def connect_ray(address: str | None):
    import ray

    if not ray.is_initialized():
        ray.init(
            address=address, include_dashboard=False, configure_logging=True, logging_level="ERROR",
            log_to_driver=False, runtime_env=ray_runtime_env(),
        )
    return ray


def transport_for(spec, run_dir: RunDir, hosts: int, address: str | None):
    """The hosts, as objects in this process (``hosts: 0``) or as Ray actors, not started."""
    if hosts == 0:
        return LocalTransport()
    collect_into = run_dir if spec.collect == "driver" else None
    return RayTransport(connect_ray(address), hosts, spec.cpus_per_host, collect_into)


def worker_cpus(ray) -> int:
    """The CPUs broker hosts may use: every CPU Ray reports, minus the driver's node's when the
    cluster has other nodes (on a cluster the driver's node is the head)."""
    total = int(ray.cluster_resources().get("CPU", 1))
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) < 2:
        return total
    driver = ray.get_runtime_context().get_node_id()
    mine = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes if n["NodeID"] == driver)
    return max(total - mine, 1)
