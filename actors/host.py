"""A broker host: one engine and its result writer, run in-process or as a Ray actor.

Hosts advance in conservative windows. ``run_window`` takes the batches other hosts sent to
this one, processes every event before ``until``, and returns a small status plus one batch
per destination host. Under Ray, ``run_chunk`` runs many windows without the coordinator:
after each window a host sends every peer its batch and status directly (over the
``channels`` between hosts; they arrive through ``deliver``), waits for theirs, and computes
the next window's start from the same statuses as every other host, so all hosts walk the
same windows and the coordinator only sees chunk boundaries.
"""
from __future__ import annotations

import gc
import pickle
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

from protocols.compiled import PURE_PYTHON, running_compiled
from protocols.stack import broker_class, make_broker
from workloads.trace import Injection

from .channels import Channels
from .costs import CostModel
from .engine import Engine, Settings
from .faults import FaultSchedule
from .partition import boundary_distances
from .results import TableWriter
from .storage import Collected


@dataclass
class HostSpec:
    host: int
    hosts: int
    run_dir: str | None  # None: the driver takes the host's files and writes them (output.collect: driver)
    neighbors: dict[str, list[str]]  # this host's brokers -> their overlay neighbours
    overlay: dict[str, list[str]]  # every broker -> its overlay neighbours
    index_of: dict[str, int]
    host_of: dict[str, int]
    latency: dict[tuple[str, str], int]
    costs: dict
    settings: Settings
    protocol: dict
    injections: list[Injection]
    faults: FaultSchedule | None = None


@dataclass
class Status:
    next_time: float  # earliest pending local event
    next_outgoing: float  # earliest arrival among messages just sent to other hosts
    next_output: float  # earliest time a broker here, or one receiving those messages, could send to another host
    arrivals: int
    largest_queue: int
    last_event_t: int
    windows: int = 0  # windows run so far
    busy_s: float = 0.0  # wall time spent running them
    waiting_s: float = 0.0  # wall time spent waiting for the other hosts' batches
    behind_s: float = 0.0  # of that, the time the window's busiest host ran longer (summed over windows)


def next_window_start(statuses: list[Status]) -> float:
    """The earliest pending event anywhere, counting messages still on their way between hosts."""
    return min(min(s.next_time, s.next_outgoing) for s in statuses)


def window_end(statuses: list[Status], lookahead: int) -> float:
    """Where the next window ends: no message sent from now on can reach another host before
    the earliest output anywhere plus the smallest cross-host latency (``lookahead``)."""
    return min(s.next_output for s in statuses) + lookahead


# Second-generation collections between two full ones (Python's default: 10). A host's heap
# grows by its routing tables all run long, and at the default a full collection walks all of
# it every few seconds: 16 times, 3.5 s of a 70 s one-host scale_500 run, where this leaves one
# and the same peak memory (bench/RESULTS.md, issue 40).
FULL_COLLECTION_EVERY = 1000


def collect_rarely() -> None:
    """Make this process's full garbage collections rare (a host's own process)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


@contextmanager
def collecting_rarely():
    """Full garbage collections rare while hosts run in the caller's process; as before after."""
    thresholds = gc.get_threshold()
    collect_rarely()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@contextmanager
def collections_paused():
    """No garbage collection while a host's state is pickled or unpickled: the pickler makes
    an object or two per object of the state and keeps them to its end, so collections would
    walk ever more of them for nothing (a fifth of a checkpoint's time, bench/LOG.md)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def behind_busiest(before: list[Status], after: list[Status], host: int) -> float:
    """How much longer than ``host`` the busiest host ran its window, from every host's
    statuses (in host order) before the window and after it."""
    ran = [a.busy_s - b.busy_s for a, b in zip(after, before)]
    return max(ran) - ran[host]


def _fresh_broker(neighbors: dict[str, list[str]], protocol: dict, overlay: dict[str, list[str]], name: str):
    """A new, empty broker ``name`` (at the start, and when a crashed one restarts)."""
    return make_broker(name, neighbors[name], protocol, overlay)


def _to_boundary(spec: HostSpec, min_service: int) -> list[float] | None:
    """By broker index, how far each broker is from a send to another host (see
    ``partition.boundary_distances``); None where any broker may send to any other host
    (a stack that opens links or moves clients)."""
    if broker_class(spec.protocol).opens_links:
        return None
    distances = boundary_distances(spec.overlay, spec.host_of, spec.latency, min_service)
    return [distances[name] for name in sorted(spec.index_of, key=spec.index_of.get)]


class BrokerHost:
    """``snapshot``: what ``checkpoint`` wrote (its path in the run directory, or its bytes);
    the host continues from it, its ``spec.injections`` giving the operations still to come. Either way,
    the host first deletes its result parts from the epoch it starts at on: a restored or
    restarted host writes nothing twice."""

    def __init__(self, spec: HostSpec | None = None, snapshot: str | bytes | None = None) -> None:
        self.channels = Channels()
        if spec is not None:
            self.start(spec, snapshot)
        else:  # a Ray actor, started once the driver knows where it runs, in a process of its own
            collect_rarely()

    def start(self, spec: HostSpec, snapshot: str | bytes | None = None) -> None:
        self.spec = replace(spec, injections=[])
        self.writer = TableWriter(Collected() if spec.run_dir is None else spec.run_dir, spec.host)
        self.relay = False
        self.inbox: dict[int, dict[int, tuple]] = {}
        self.arrived = threading.Condition()
        if snapshot is None:
            epoch, self.window_number = 0, 0
            # wall time running windows / waiting for peers / behind the busiest host (measured only)
            self.busy_s = self.waiting_s = self.behind_s = 0.0
            self.engine = self._new_engine(spec)
        else:
            with collections_paused():
                state = self._unpickled(snapshot)
            epoch, self.window_number, self.busy_s, self.waiting_s, self.behind_s, self.engine = state
            self.engine.writer = self.writer
            self.engine.reinject(spec.injections)
        self.writer.discard_after(epoch)

    def _unpickled(self, snapshot: str | bytes):
        try:
            return pickle.loads(snapshot) if isinstance(snapshot, bytes) else self.writer.run_dir.read_pickle(snapshot)
        except TypeError as error:  # a compiled class made by its __init__ with none of its arguments
            if "required argument" not in str(error) or not running_compiled():
                raise
            raise RuntimeError(f"the checkpoint was written before the compiled build ({error}): resume it with "
                               f"{PURE_PYTHON}=1 (docs/architecture.md, \"The compiled build\")") from error

    def _new_engine(self, spec: HostSpec) -> Engine:
        fresh_broker = partial(_fresh_broker, spec.neighbors, spec.protocol, spec.overlay)
        brokers = {name: fresh_broker(name) for name in spec.neighbors}
        costs = CostModel(**spec.costs)
        engine = Engine(brokers, spec.index_of, spec.host_of, spec.host, spec.latency, costs, spec.settings,
                        self.writer, spec.faults, fresh_broker, _to_boundary(spec, costs.min_service_us()))
        for injection in spec.injections:
            engine.inject(injection.t_us, injection.broker, injection.seq, injection.message)
        return engine

    def status(self, outbox: dict | None = None) -> Status:
        outbox = outbox or {}
        outgoing = [a for batch in outbox.values() for a in batch]
        next_outgoing = min((a.key[0] for a in outgoing), default=float("inf"))
        engine = self.engine
        next_output = min(engine.earliest_output(), engine.earliest_output_of(outgoing))
        return Status(
            engine.next_time(), next_outgoing, next_output, engine.arrivals, engine.largest_queue(), engine.last_event_t,
            self.window_number, self.busy_s, self.waiting_s, self.behind_s,
        )

    def receive(self, *batches) -> None:
        """Batches other hosts sent to this one."""
        for batch in batches:
            self.engine.receive(batch)

    def run_window(self, until: int, *batches):
        started = time.perf_counter()
        self.receive(*batches)
        self.engine.run_until(until)
        outbox = self.engine.take_outbox()
        self.window_number += 1
        self.busy_s += time.perf_counter() - started
        return (self.status(outbox), *[outbox.get(h, []) for h in range(self.spec.hosts)])

    def node(self) -> str | None:
        """The Ray node this host runs on (None outside Ray)."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None

    def listen(self, authkey: bytes) -> tuple[str, int]:
        """Where the other hosts reach this one during the run (see ``actors.channels``)."""
        return self.channels.listen(authkey)

    def connect(self, addresses: list[tuple[str, int]], relay: bool, authkey: bytes) -> None:
        """Open channels to the peers, by host number (every host calls this at once).
        ``relay``: batches and statuses travel through host 0 (a channel between host 0 and
        each other host, instead of one between every two hosts)."""
        me, hosts = self.spec.host, self.spec.hosts
        peers = [0] if relay and me != 0 else [h for h in range(hosts) if h != me]
        self.channels.open(peers, addresses, authkey, self.deliver)
        self.relay = relay

    def deliver(self, window: int, sender: int, batch: list, status: Status) -> None:
        """A peer's batch and status after its window number ``window`` (from the channels' receiving thread)."""
        with self.arrived:
            self.inbox.setdefault(window, {})[sender] = (batch, status)
            self.arrived.notify_all()

    def run_chunk(self, statuses: list[Status], stop: int, lookahead: int) -> Status:
        """Run windows, starting from every host's ``statuses``, until the next one would begin
        at or after ``stop``."""
        exchange = self._relayed if self.relay else self._direct
        start = next_window_start(statuses)
        while start < stop:
            status, *batches = self.run_window(int(min(window_end(statuses, lookahead), stop)))
            incoming, after = exchange(self.window_number, batches, status)
            self.behind_s += behind_busiest(statuses, after, self.spec.host)
            statuses = after
            for batch in incoming:
                self.engine.receive(batch)
            start = next_window_start(statuses)
        return self.status()

    def _direct(self, number: int, batches: list, status: Status) -> tuple[list, list[Status]]:
        """Every peer its batch and this status; theirs back (batches and statuses in host order)."""
        others = [h for h in range(self.spec.hosts) if h != self.spec.host]
        for host in others:
            self.channels.send(host, (number, self.spec.host, batches[host], status))
        received = self._await(number, len(others))
        statuses = [status if h == self.spec.host else received[h][1] for h in range(self.spec.hosts)]
        return [received[h][0] for h in sorted(received)], statuses

    def _relayed(self, number: int, batches: list, status: Status) -> tuple[list, list[Status]]:
        """Through host 0: every other host sends it all its batches and its status, and gets
        back the batches for it (in sender order) and every status."""
        me, hosts = self.spec.host, self.spec.hosts
        if me != 0:
            self.channels.send(0, (number, me, batches, status))
            return self._await(number, 1)[0]
        received = self._await(number, hosts - 1)
        sent = {0: batches, **{h: b for h, (b, _) in received.items()}}
        statuses = [status] + [received[h][1] for h in range(1, hosts)]
        for host in range(1, hosts):
            self.channels.send(host, (number, 0, [sent[h][host] for h in range(hosts) if h != host], statuses))
        return [sent[h][0] for h in range(1, hosts)], statuses

    def _await(self, number: int, count: int) -> dict[int, tuple]:
        """The ``count`` deliveries of window ``number``, by sender."""
        started = time.perf_counter()
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.inbox.get(number, ())) == count)
            received = self.inbox.pop(number, {})
        self.waiting_s += time.perf_counter() - started
        return received

    def take_files(self) -> list[tuple[str, bytes]]:
        """The files written since the last call, for the driver to store (output.collect: driver)."""
        return self.writer.run_dir.take()

    def finish(self, end: int) -> Status:
        self.engine.finish(end)
        self.writer.flush()
        return self.status()

    def checkpoint(self, snapshot: str) -> int:
        """Commit the results so far, start a new result epoch and write the host's state to
        ``snapshot`` in the run directory (at a chunk boundary: nothing is on its way between
        hosts); returns the epoch."""
        epoch = self.writer.next_epoch()
        measured = (self.busy_s, self.waiting_s, self.behind_s)
        with collections_paused():
            self.writer.run_dir.write_pickle(snapshot, (epoch, self.window_number, *measured, self.engine))
        return epoch
