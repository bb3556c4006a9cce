"""The discrete-event core of one host: virtual time, bounded mailboxes, service by cost.

Ordering rules (the whole determinism story, in one place):
- Virtual time is an int of microseconds; nothing here reads the wall clock.
- Every event has a total key ``(t, rank, broker, sender, seq)``: at one instant, service
  completions (rank 0) come before message arrivals (rank 1); arrivals at one broker are
  ordered by sender index (clients are -1) and the sender's own send counter. The key never
  depends on which host a broker lives on, so any partition processes the same sequence.
- Each broker is a single server with one FIFO mailbox holding at most ``capacity`` waiting
  messages. A message's effects (sends, deliveries) happen when its service ends; they leave
  then and arrive after the link's latency.
- Samples at multiples of ``sample_interval`` see the state after every event at that time.
- Where brokers have an uplink (``uplink_us``: the time one message takes to leave), a
  broker's outgoing messages leave one after another, in the order it sent them, and
  arrive the link's latency after they have left.
- Fault transitions (actors/faults.py: crashes, restarts, links coming back) come first at
  their instant (rank -1), ordered by broker index and the fault's place in the scenario.
  A crash empties the broker's mailbox and replaces it with a fresh broker that takes no
  messages (they are dropped, ``crashed broker``) until it restarts; its local clients keep
  their operations but publications meanwhile (they are lost) and, at the restart, re-issue
  the advertisements and subscriptions the broker held for them, then those operations. At a
  restart, and when a link that was down, cut by a partition or lossy is back, the brokers on
  both sides resynchronise it (``Broker.link_restored``).
- A broker may pause a local client (its operations wait outside the mailbox, those already
  queued included) and resume it at another broker: the waiting and the future operations
  then arrive there in their order, no sooner than the default latency after the resume
  (the client reconnecting), keeping their trace sequence numbers.
"""
from __future__ import annotations

import heapq
import json
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from protocols.broker import Broker
from protocols.language import Publication, attributes_of, rebuilt_by_constructor, set_attributes
from protocols.messages import Message

from .costs import CostModel
from .faults import CRASHED, MAILBOX_FULL, FaultSchedule, Transition
from .results import PROTOCOL_SAMPLE_COLUMNS, TableWriter

FAULT, COMPLETION, ARRIVAL = -1, 0, 1


@dataclass(slots=True)
class Arrival:
    """A message at (or waiting for) a broker's mailbox; becomes a ``messages`` row.
    ``origin``: what set it off (``origin_of_fault``, or the trace sequence number of the client
    operation whose handling sent it, hop after hop); None for what a broker sent on its own.
    ``issued``: for a client operation that a move of its client delayed, when it was issued
    (it is in flight, not yet to come, if the run ends before it arrives)."""

    key: tuple
    broker: str
    sender: str | None
    message: Message
    queue_len: int = 0
    origin: int | None = None
    issued: int | None = None

    def __reduce__(self):  # by one constructor call, as ``rebuilt_by_constructor`` (Injected too: see there)
        return Arrival, (self.key, self.broker, self.sender, self.message, self.queue_len, self.origin, self.issued)


class Injected(Arrival):
    """A client operation's arrival as ``Engine.inject`` makes it from the workload. While it is
    to come, a checkpoint records its sequence number rather than the arrival, and a restored
    host makes it again from its injections (``Engine.reinject``): at the papers' sizes the
    operations to come are millions of objects, which were most of a checkpoint's pickling
    time and of the memory it took. Pickled (arrived: queued, held) as the arrival it now is
    (``Arrival.__reduce__``)."""

    __slots__ = ()


def origin_of_fault(number: int) -> int:
    """The ``origin`` of what a fault's transitions set off (its recovery): negative, apart
    from the trace's sequence numbers."""
    return -1 - number


@dataclass(slots=True)
class Server:
    """A broker's mailbox and server state."""

    name: str
    index: int  # the broker's index: its place in the total order of events
    broker: Broker
    queue: deque = field(default_factory=deque)
    blocked: list = field(default_factory=list)  # heap of (key, Arrival) waiting on their links
    busy_until: int | None = None
    busy_since: int = 0
    busy_done: int = 0  # total service time of completed messages
    busy_sampled: int = 0  # busy total at the previous sample
    send_seq: int = 0
    uplink_free: int = 0  # when the uplink has sent every message handed to it
    uplink_sent: int = 0  # messages handed to the uplink since the previous sample
    in_service: "_Context | None" = None  # the effects of the message in service
    links: dict = field(default_factory=dict)  # destination -> (latency, index, host), as used
    crashed: bool = False
    generation: int = 0  # services started before the last crash complete into the void
    held: list = field(default_factory=list)  # its clients' operations while it is crashed
    reissue: list = field(default_factory=list)  # what its clients re-issue when it restarts
    last_arrival: dict = field(default_factory=dict)  # destination -> latest arrival on a delayed link

    def __reduce__(self):  # (compiled with mypyc, an object is made by its ``__init__``: protocols/compiled.py)
        return rebuilt_by_constructor(self)


class _Context:
    """The broker context while one message is handled (see protocols.broker.Context)."""

    __slots__ = ("now", "queue_len", "uplink_utilisation", "queued_us", "sends", "deliveries", "events",
                 "client_moves", "origin", "_engine", "_server", "_kind")

    def __init__(self, now: int, queue_len: int, uplink_utilisation: float = 0.0, queued_us: int = 0,
                 engine: "Engine | None" = None, server: "Server | None" = None, kind: str = "",
                 origin: int | None = None) -> None:
        self.now = now
        self.origin = origin  # of the messages sent (Arrival.origin)
        self.queue_len = queue_len
        self.uplink_utilisation = uplink_utilisation  # over the last sampling interval
        self.queued_us = queued_us  # how long the message in hand waited in the mailbox
        self.sends: list[tuple[str, Message]] = []
        self.deliveries: list[tuple[Message, Sequence[str], Sequence]] = []
        self.events: list[tuple[str, dict]] = []
        self.client_moves: list[tuple[str, str, bool]] = []  # (client, broker, paused: on the way there)
        self._engine, self._server, self._kind = engine, server, kind

    def __reduce__(self):  # (compiled with mypyc, an object is made by its ``__init__``: protocols/compiled.py)
        return _Context, (self.now, self.queue_len), attributes_of(self)

    def __setstate__(self, state: dict | tuple) -> None:  # (a tuple: pickled before it had ``__reduce__``)
        set_attributes(self, state)

    def latency(self, destination: str) -> int:
        """The latency of this broker's link to ``destination`` (a ping)."""
        assert self._engine is not None and self._server is not None
        return self._engine.link(self._server, destination)[0]

    def service_us(self) -> int:
        """The service time the message in hand has cost so far."""
        assert self._engine is not None and self._server is not None
        return self._engine.costs.service_us(self._kind, self._server.broker.work) if self._kind else 0

    def pause_client(self, client: str, toward: str) -> None:
        self.client_moves.append((client, toward, True))

    def resume_client(self, client: str, broker: str) -> None:
        self.client_moves.append((client, broker, False))

    def send(self, destination: str, message: Message) -> None:
        self.sends.append((destination, message))

    def deliver(self, publication: Message, sub_ids: Sequence[str], clients: Sequence) -> None:
        self.deliveries.append((publication, sub_ids, clients))

    def event(self, kind: str, **detail) -> None:
        self.events.append((kind, detail))


@dataclass
class Settings:
    capacity: int = 100_000
    overflow: str = "drop"  # drop | block
    sample_interval: int = 1_000_000
    default_latency: int = 1_000
    uplink_us: int = 0  # how long one message occupies a broker's uplink (0: no uplink limit)


class Engine:
    """Runs the brokers of one host; messages to other hosts go to ``outbox``."""

    def __init__(
        self,
        brokers: dict[str, Broker],
        index_of: dict[str, int],
        host_of: dict[str, int],
        host: int,
        latency: dict[tuple[str, str], int],
        costs: CostModel,
        settings: Settings,
        writer: TableWriter | None = None,
        faults: FaultSchedule | None = None,
        fresh_broker=None,
        to_boundary: list[float] | None = None,
    ) -> None:
        """``fresh_broker(name)``: a new, empty broker (a crashed one's restart); needed with
        ``faults`` that crash brokers. ``to_boundary``: by broker index, the least time from
        the end of a service at that broker until its host could send to another host
        (``partition.boundary_distances``); None: any broker may send to another host."""
        self.brokers = brokers
        self.index_of = index_of
        self.host_of = host_of
        self.host = host
        self.latency = latency
        self.costs = costs
        self.settings = settings
        self.writer = writer
        self.servers = {name: Server(name, index_of[name], brokers[name]) for name in sorted(brokers)}
        self.heap: list = []  # events as flat tuples, their key's fields then the item (one tuple: half the comparisons)
        self.outbox: dict[int, list] = {}
        self.next_sample = settings.sample_interval
        self.min_service = costs.min_service_us()
        self.to_boundary = to_boundary if to_boundary is not None else [0] * len(index_of)
        self.last_event_t = 0
        self.arrivals = 0
        self.paused: dict[tuple[str, str | None], list[Arrival]] = {}  # (broker, client) -> its waiting operations
        self.paused_toward: dict[tuple[str, str], str] = {}  # (broker, client) -> where it is moving
        self.faults = faults if faults is not None and faults.faults else None
        self.fresh_broker = fresh_broker
        self.to_come = array("q")  # after a restore, until ``reinject``: the operations still to come
        if self.faults:
            for order, transition in enumerate(self.faults.transitions(self.servers)):
                key = (transition.t, FAULT, index_of[transition.broker], transition.fault.number, order)
                heapq.heappush(self.heap, (*key, transition))

    def __reduce__(self):  # (compiled with mypyc, an object is made by its ``__init__``: protocols/compiled.py)
        made = (self.brokers, self.index_of, self.host_of, self.host, self.latency, self.costs, self.settings)
        return Engine, made, self.__getstate__()

    def __getstate__(self) -> dict:
        """A checkpoint holds the engine's state; its result writer belongs to the host, and
        of the client operations still to come only their sequence numbers (``Injected``)."""
        heap, to_come = [], array("q")
        for entry in self.heap:
            if type(entry[-1]) is Injected:
                to_come.append(entry[-1].origin)  # type: ignore[arg-type]  # (its sequence number)
            else:
                heap.append(entry)
        return attributes_of(self) | {"writer": None, "heap": heap, "to_come": array("q", sorted(to_come))}

    def __setstate__(self, state: dict) -> None:
        set_attributes(self, {"to_come": array("q")} | state)
        if self.heap and len(self.heap[0]) == 2:  # a checkpoint written when events were (key, item)
            self.heap = [(*key, item) for key, item in self.heap]
        heapq.heapify(self.heap)

    def reinject(self, injections: Sequence) -> None:
        """After a restore, the client operations the checkpoint recorded as still to come,
        made again from the host's ``injections`` (in sequence order, as the workload made them)."""
        to_come, self.to_come = iter(self.to_come), array("q")
        wanted = next(to_come, None)
        for injection in injections:
            if injection.seq == wanted:
                self.inject(*injection)
                wanted = next(to_come, None)
        if wanted is not None:
            raise ValueError(f"the checkpoint awaits operation {wanted}, which the host's workload does not hold")

    # ------------------------------------------------------------------ inputs

    def inject(self, t_us: int, broker: str, seq: int, message: Message) -> None:
        """A client operation entering ``broker``'s mailbox at ``t_us``. A publication enters
        as a copy: routing tables keep its encoding on it (protocols/index.py), which must go
        once it is routed, not stay for the run with the workload the caller holds."""
        if message.publication is not None:
            message = replace(message, publication=Publication(message.publication.items))
        key = (t_us, ARRIVAL, self.index_of[broker], -1, seq)
        heapq.heappush(self.heap, (*key, Injected(key, broker, None, message, origin=seq)))

    def receive(self, batch: list[Arrival]) -> None:
        """Messages sent by brokers on other hosts."""
        for arrival in batch:
            heapq.heappush(self.heap, (*arrival.key, arrival))

    def next_time(self) -> float:
        """The earliest pending event; a due sample counts while anything is pending, so no
        window skips past it (broker ticks run at samples and may send across hosts), and
        while a broker awaits a tick (deferred work)."""
        if self.heap:
            return min(self.heap[0][0], self.next_sample)
        if any(broker.awaits_tick() for broker in self.brokers.values()):
            return self.next_sample
        return float("inf")

    def earliest_output(self) -> float:
        """The earliest time a broker here could send a message to another host: a pending
        event's time plus its broker's distance to the host's boundary (``to_boundary``; a
        pending arrival adds the smallest service time first, a fault counts at its time),
        or a due sample (brokers tick at samples, and a tick may send). The heap is walked
        only where it holds events before the best bound found so far."""
        heap = self.heap
        if not heap:
            return self.next_time()
        best, to_boundary, min_service = self.next_sample, self.to_boundary, self.min_service
        unvisited, size = [0], len(heap)
        while unvisited:
            i = unvisited.pop()
            t, rank, index = heap[i][:3]
            if t >= best:
                continue  # and so are the events below it
            if rank == ARRIVAL:
                t += min_service + to_boundary[index]
            elif rank == COMPLETION:
                t += to_boundary[index]
            best = min(best, t)
            unvisited.extend(child for child in (2 * i + 1, 2 * i + 2) if child < size)
        return best

    def earliest_output_of(self, arrivals: list[Arrival]) -> float:
        """The earliest time messages on their way to other hosts could make a broker there
        send to yet another host."""
        to_boundary, min_service = self.to_boundary, self.min_service
        return min((a.key[0] + min_service + to_boundary[a.key[2]] for a in arrivals), default=float("inf"))

    # ------------------------------------------------------------------ running

    def run_until(self, until: int) -> None:
        """Process every event before ``until`` (and the samples due before it)."""
        heap = self.heap
        while heap and heap[0][0] < until:
            t, rank, _, generation, _, item = heapq.heappop(heap)
            if t >= self.next_sample:
                self._sample_until(t)
            self.last_event_t = t
            if rank == COMPLETION:  # the item is the Server
                if generation == item.generation:  # else its broker crashed while serving
                    self._serve(self._end_service(item, t), item, t)
            elif rank == ARRIVAL:
                self._arrive(item, t)
            else:
                self._fault(item, t)
        self._sample_until(until)

    def _arrive(self, arrival: Arrival, t: int) -> None:
        if arrival.sender is None and self.paused:
            held = self.paused.get((arrival.broker, arrival.message.client))
            if held is not None:
                held.append(arrival)
                return
        server = self.servers[arrival.broker]
        if server.crashed and arrival.sender is None and arrival.message.kind != "pub":
            server.held.append(arrival)  # the client waits for its broker; it arrives at the restart
            return
        self.arrivals += 1
        arrival.queue_len = len(server.queue)
        if server.crashed:
            self._record_message(arrival, None, None, 0, dropped=True, cause=CRASHED)
        elif server.busy_until is None and not server.queue:
            self._serve(arrival, server, t)
        elif len(server.queue) < self.settings.capacity:
            server.queue.append(arrival)
        elif self.settings.overflow == "block":
            heapq.heappush(server.blocked, (arrival.key, arrival))
        else:
            self._record_message(arrival, None, None, 0, dropped=True, cause=MAILBOX_FULL)

    def _serve(self, arrival: Arrival | None, server: Server, t: int) -> None:
        """Serve ``arrival``, and the messages waiting behind it while services take no time.

        A service that ends at ``t`` completes at once: its completion event would be the next
        one anyway (completions at an instant come before arrivals, and other brokers'
        completions at that instant touch neither this broker nor times before ``t``)."""
        while arrival is not None:
            end = self._start(arrival, server, t)
            if end > t:
                heapq.heappush(self.heap, (end, COMPLETION, server.index, server.generation, 0, server))
                return
            arrival = self._end_service(server, t)

    def _start(self, arrival: Arrival, server: Server, t: int) -> int:
        """Handle ``arrival`` at ``t``; its effects wait in the server's ``in_service`` until
        its service ends (returned)."""
        broker = server.broker
        message = arrival.message
        context = server.in_service = _Context(
            t, len(server.queue) + len(server.blocked), queued_us=t - arrival.key[0], engine=self, server=server,
            kind=message.kind, origin=arrival.origin)
        broker.work.reset()
        broker.handle(message, arrival.sender, context)
        if message.items and message.kind.endswith("_batch"):  # charged as its items would be
            service = self.costs.service_us(message.kind.removesuffix("_batch"), broker.work, len(message.items))
        else:
            service = self.costs.service_us(message.kind, broker.work)
        if self.faults:
            service = round(service * self.faults.slow_factor(server.name, t))
        end = t + service
        server.busy_until, server.busy_since = end, t
        self._record_message(arrival, t, end, len(context.sends), dropped=False)
        for kind, detail in context.events:
            self._record_event(t, server.name, kind, detail)
        return end

    def _end_service(self, server: Server, t: int) -> Arrival | None:
        """Apply the effects of the server's message in service; returns the next one to serve."""
        server.busy_done += t - server.busy_since
        server.busy_until = None
        done, server.in_service = server.in_service, None
        assert done is not None
        name = server.name
        if self.writer:
            for publication, sub_ids, clients in done.deliveries:
                self.writer.extend_run("deliveries", len(sub_ids), (
                    publication.id, sub_ids, clients, name, publication.t_pub, t, publication.hops))
                self.writer.append("delivery_groups", publication.id, name, publication.t_pub, t, publication.hops,
                                   len(sub_ids))
        for destination, message in done.sends:
            self._send(server, destination, message, t, done.origin)
        self._move_clients(server, done.client_moves, t)
        following = None
        if server.queue:
            following = server.queue.popleft()
        elif server.blocked:
            following = heapq.heappop(server.blocked)[1]
        while server.blocked and len(server.queue) < self.settings.capacity:
            server.queue.append(heapq.heappop(server.blocked)[1])
        return following

    def link(self, server: Server, destination: str) -> tuple[int, int, int]:
        """(latency, broker index, host) of the link from ``server`` to ``destination``."""
        link = server.links.get(destination)
        if link is None:
            latency = self.latency.get((server.name, destination), self.settings.default_latency)
            link = server.links[destination] = (latency, self.index_of[destination], self.host_of[destination])
        return link

    def _send(self, server: Server, destination: str, message: Message, t: int, origin: int | None) -> None:
        latency, index, host = self.link(server, destination)
        uplink = self.settings.uplink_us
        if uplink:
            server.uplink_free = max(t, server.uplink_free) + uplink
            server.uplink_sent += 1
            t = server.uplink_free
        seq = server.send_seq
        server.send_seq += 1
        arrive, cause = t + latency, None
        if self.faults:
            arrive, cause = self._faulty_link(server, destination, t, arrive, seq)
        arrival = Arrival((arrive, ARRIVAL, index, server.index, seq), destination, server.name, message, origin=origin)
        if cause is None:
            self._route(arrival, host)
        else:
            self._record_message(arrival, None, None, 0, dropped=True, cause=cause)

    def _faulty_link(self, server: Server, destination: str, t: int, arrive: int, seq: int):
        """(arrival time, drop cause or None) of a message sent at ``t`` under the faults: a
        delayed link adds its delay but keeps its order (no message overtakes another)."""
        faults = self.faults
        assert faults is not None
        cause = faults.drop_cause(server.name, destination, t, seq)
        if cause is None and faults.delays(server.name, destination):
            arrive = max(arrive + faults.extra_delay(server.name, destination, t, seq),
                         server.last_arrival.get(destination, 0))
            server.last_arrival[destination] = arrive
        return arrive, cause

    def _route(self, arrival: Arrival, host: int) -> None:
        if host == self.host:
            heapq.heappush(self.heap, (*arrival.key, arrival))
        else:
            if arrival.sender is not None and self.to_boundary[self.index_of[arrival.sender]]:
                raise RuntimeError(
                    f"{arrival.sender} sent {arrival.message.kind} to {arrival.broker} on host {host}, but it has no "
                    "overlay neighbour there: a stack whose brokers send beyond their neighbours must say so "
                    "(opens_links), or windows between hosts end too late")
            self.outbox.setdefault(host, []).append(arrival)

    # ------------------------------------------------------------------ clients that move

    def _move_clients(self, server: Server, moves: list[tuple[str, str, bool]], t: int) -> None:
        for client, broker, paused in moves:
            if paused:
                self._pause(server, client, broker)
            else:
                self._resume(server, client, broker, t)

    def _pause(self, server: Server, client: str, toward: str) -> None:
        """Hold ``client``'s operations at ``server``'s broker, those queued there included,
        while it moves to ``toward``."""
        self.paused_toward[server.name, client] = toward
        held = self.paused.setdefault((server.name, client), [])
        mine = lambda a: a.sender is None and a.message.client == client  # noqa: E731
        held.extend(a for a in server.queue if mine(a))
        kept = [a for a in server.queue if not mine(a)]
        server.queue.clear()
        server.queue.extend(kept)
        held.extend(a for _, a in sorted(server.blocked) if mine(a))
        server.blocked[:] = [(k, a) for k, a in server.blocked if not mine(a)]
        heapq.heapify(server.blocked)

    def _resume(self, server: Server, client: str, broker: str, t: int) -> None:
        """Send ``client``'s held and future operations at ``server``'s broker to ``broker``."""
        held = self.paused.pop((server.name, client), [])
        self.paused_toward.pop((server.name, client), None)

        def mine(entry) -> bool:  # the heap holds service completions and fault transitions too
            item = entry[-1]
            return (entry[1] == ARRIVAL and item.broker == server.name and item.sender is None
                    and item.message.client == client)

        future = sorted((entry for entry in self.heap if mine(entry)), key=lambda entry: entry[:-1])
        if future:  # in place: the event loop holds the heap
            self.heap[:] = [entry for entry in self.heap if not mine(entry)]
            heapq.heapify(self.heap)
        index, host = self.index_of[broker], self.host_of[broker]
        earliest = t + self.settings.default_latency
        for arrival in held + [entry[-1] for entry in future]:
            t_arrive, _, _, _, seq = arrival.key
            key = (max(t_arrive, earliest), ARRIVAL, index, -1, seq)
            issued = arrival.issued if arrival.issued is not None else t_arrive if t_arrive < key[0] else None
            self._route(Arrival(key, broker, None, arrival.message, origin=arrival.origin, issued=issued), host)

    def take_outbox(self) -> dict[int, list[Arrival]]:
        outbox, self.outbox = self.outbox, {}
        return outbox

    # ------------------------------------------------------------------ observation

    def _record_message(self, arrival: Arrival, start, end, sent: int, dropped: bool, cause: str | None = None) -> None:
        if self.writer:
            m = arrival.message
            self.writer.append(
                "messages", arrival.broker, arrival.sender, m.kind, m.id, arrival.key[0], start, end,
                arrival.queue_len, sent, dropped, cause, len(m.items) if m.kind.endswith("_batch") else None, m.cause,
                arrival.origin,
            )

    def _record_event(self, t: int, broker: str, kind: str, detail: dict) -> None:
        if self.writer:
            self.writer.append("events", t, broker, kind, json.dumps(detail, sort_keys=True, default=str))

    def _sample_until(self, t: int) -> None:
        """Take every periodic sample due strictly before ``t``."""
        while self.next_sample < t:
            self.sample(self.next_sample)
            self.next_sample += self.settings.sample_interval

    def sample(self, t: int) -> None:
        interval = self.settings.sample_interval
        uplink = self.settings.uplink_us
        for name, server in self.servers.items():
            busy = server.busy_done + (min(t, server.busy_until) - server.busy_since if server.busy_until else 0)
            broker = server.broker
            queue_len = len(server.queue) + len(server.blocked)
            # the share of the interval the uplink needs for what was handed to it (at most 1)
            utilisation = min(server.uplink_sent * uplink / interval, 1.0) if uplink else None
            server.uplink_sent = 0
            if self.writer:
                extras = broker.protocol_samples()
                self.writer.append(
                    "samples", t, name, queue_len, broker.prt_size, broker.srt_size, busy - server.busy_sampled,
                    *(extras.get(column) for column in PROTOCOL_SAMPLE_COLUMNS), utilisation,
                )
            server.busy_sampled = busy
            if server.crashed:
                continue
            context = _Context(t, queue_len, utilisation or 0.0, engine=self, server=server)
            broker.tick(context)
            self._apply(server, context, t)

    # ------------------------------------------------------------------ faults

    def _fault(self, transition: Transition, t: int) -> None:
        server = self.servers[transition.broker]
        fault = transition.fault
        if transition.action == "record":
            started = t == fault.start
            self._record_event(t, server.name, "fault_started" if started else "fault_ended", fault.describe())
        elif transition.action == "crash":
            self._record_event(t, server.name, "fault_started", fault.describe())
            self._crash(server, t)
        elif transition.action == "restart":
            self._record_event(t, server.name, "fault_ended", fault.describe())
            self._restart(server, t, origin_of_fault(fault.number))
        elif not server.crashed:  # the link to ``peer`` is back, unless another fault still holds it
            peer = transition.peer
            assert peer is not None
            if self._link_up(server, peer, t):
                context = _Context(t, len(server.queue), engine=self, server=server,
                                   origin=origin_of_fault(fault.number))
                server.broker.link_restored(peer, context)
                self._apply(server, context, t)

    def _link_up(self, server: Server, peer: str, t: int) -> bool:
        assert self.faults is not None
        return self.faults.link_up(server.name, peer, t)

    def _crash(self, server: Server, t: int) -> None:
        """The broker loses its state, its queue and the message in service. Clients it had
        paused, on their way to another broker, go there at once (their handoff is lost)."""
        for (paused_at, client), toward in sorted(self.paused_toward.items()):
            if paused_at == server.name:
                self._resume(server, client, toward, t)
        lost = list(server.queue) + [a for _, a in sorted(server.blocked)]
        server.queue.clear()
        server.blocked.clear()
        for arrival in lost:
            self._record_message(arrival, None, None, 0, dropped=True, cause=CRASHED)
        if server.busy_until is not None:
            server.busy_done += server.busy_until - server.busy_since  # it was busy until then
        server.busy_until, server.in_service = None, None
        server.generation += 1
        broker = server.broker
        server.reissue = [route.msg for table in (broker.advs, broker.subs) for route in table.values()
                          if route.last_hop is None]
        server.broker = self.brokers[server.name] = self.fresh_broker(server.name)
        server.crashed = True

    def _restart(self, server: Server, t: int, origin: int) -> None:
        """The broker is back, empty: it resynchronises its links (so its neighbours drop
        what they held from it), then its clients re-issue their advertisements and
        subscriptions, then the operations they issued meanwhile. What the restart sets off
        has the fault's ``origin``; the operations keep their own."""
        server.crashed = False
        context = _Context(t, len(server.queue), engine=self, server=server, origin=origin)
        for neighbour in server.broker.neighbors:
            if self._link_up(server, neighbour, t):
                server.broker.link_restored(neighbour, context)
        self._apply(server, context, t)
        index = server.index
        reissue, server.reissue = server.reissue, []
        for i, message in enumerate(reissue):
            key = (t, ARRIVAL, index, -1, i - len(reissue))  # before any operation of the trace
            heapq.heappush(self.heap, (*key, Arrival(key, server.name, None, message, origin=origin)))
        held, server.held = server.held, []
        for arrival in held:
            key = (t, ARRIVAL, index, -1, arrival.key[4])
            heapq.heappush(self.heap, (*key, Arrival(key, server.name, None, arrival.message, origin=arrival.origin)))

    def _apply(self, server: Server, context: _Context, t: int) -> None:
        """What a broker did outside any message's service (a tick, a resynchronisation):
        its events, its sends (leaving at ``t``) and its clients' moves."""
        for kind, detail in context.events:
            self._record_event(t, server.name, kind, detail)
        for destination, message in context.sends:
            self._send(server, destination, message, t, context.origin)
        self._move_clients(server, context.client_moves, t)

    def finish(self, end: int) -> None:
        """Close the run at ``end``: the last samples, rows for messages still waiting, and
        the ``in_flight`` rows of messages still on their links and of client operations held
        back (their client paused, their broker crashed)."""
        self._sample_until(end)
        self.sample(end)
        for server in self.servers.values():
            waiting = list(server.queue) + [a for _, a in sorted(server.blocked)]
            for arrival in waiting:
                self._record_message(arrival, None, None, 0, dropped=False)
        if self.writer:  # client operations still to come are not in flight
            on_links = [entry[-1] for entry in sorted(self.heap, key=lambda entry: entry[:-1])
                        if entry[1] == ARRIVAL and (entry[-1].sender is not None or entry[-1].issued is not None)]
            held = [a for _, waiting in sorted(self.paused.items()) for a in waiting]
            held += [a for server in self.servers.values() for a in server.held]
            for arrival in on_links:
                self._record_in_flight(arrival, arrival.key[0])
            for arrival in held:
                self._record_in_flight(arrival, None)

    def _record_in_flight(self, arrival: Arrival, t_arrive: int | None) -> None:
        assert self.writer is not None
        m = arrival.message
        self.writer.append("in_flight", arrival.broker, arrival.sender, m.kind, m.id, t_arrive, arrival.origin)

    def largest_queue(self) -> int:
        return max((len(s.queue) + len(s.blocked) for s in self.servers.values()), default=0)
