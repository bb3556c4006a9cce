"""Publisher relocation: POP and GRAPE, with a lossless migration protocol.

Implements "Publisher Placement Algorithms in Content-based Publish/Subscribe" (Cheung and
Jacobsen, ICDCS 2010): POP (publisher optimistic placement) and GRAPE (greedy relocation of
publishers of events). There is no public code; where the paper is silent the choices below
keep deliveries exact.

- A publisher's broker (the one holding its advertisements as local) traces some of its
  publications: header ``trace``. Every broker that handles a traced copy records what it did
  with it: which neighbours it forwarded it to and how many local subscribers it delivered to.
- POP: per publisher, windows of ``window``; a publication is traced with probability
  1 - T/N, T the publications traced so far in the current window and N the paper's cap
  ``trace_cap`` (50: at most 50 traces a window). ``trace_cap: previous_window`` is our
  earlier rule: N the publications of the previous window (every one traced in the first
  window, or after an empty one; about 63% of publications at a steady rate). A
  broker sends its ``trace_reply`` upstream once it has delivered locally and heard from every
  neighbour it forwarded the copy to, carrying the cumulative subscriber count; every broker
  keeps per neighbour (and for its local subscribers) a running average of those counts (new
  value weighted ``average_weight``, the paper's default 0.25; ``mean``, ours: every trace
  since the averages began weighted alike, the n-th by 1/n). After ``trace_threshold``
  traces, none outstanding, phase 2 walks (``pop_walk``) toward the next closest broker: the
  neighbour whose average exceeds the sum of all other neighbours', the local one and
  everything upstream of the walk; where none qualifies, the walk ends and ``pop_target``
  returns the target to the publisher's broker.
- GRAPE: trace sessions of ``trace_threshold`` consecutive publications. A broker records per
  session a bit vector of the traced publications it delivered locally, its local deliveries,
  the mean queueing plus matching (service) time of the traced copies and the latency to the
  broker it got them from. After the session, ``trace_collect`` goes down the trace tree and
  ``trace_report``s come back up, each concatenating its subtree's records. The publisher's
  broker scores every broker of the tree (``grape_scores``): the messages the session's
  publications would have cost from there (the edges of the smallest subtree joining it and
  each publication's delivering brokers, from the bit vectors) and the mean delivery delay
  from there (per hop: link latency plus the broker's queueing and matching). It keeps the
  candidates whose normalised primary metric (0 at the best, 1 at the worst) is within
  (100 - ``weight``) percent, and takes the best of those on the other metric.
- When a publisher may move again: after its next ``trace_threshold`` traces, whatever the
  last move was (the paper's rule for both algorithms; its POP section leaves "a threshold
  parameter to dampen any potential ping-pong effect" to future work). ``hysteresis`` (percent,
  default 0: the paper's) is that threshold, ours: POP's next closest neighbour must exceed the
  rest by more than ``hysteresis`` percent of the rest, and GRAPE moves only when the chosen
  broker improves the current one's primary metric by more than ``hysteresis`` percent.
- Migration (both): the publisher's broker pauses the publisher (its publications wait,
  those queued at the broker too) and sends a ``migration_adv`` along the overlay path to the
  target. Every broker on the path, the first included, re-points the publisher's
  advertisements toward the target before passing it on: it routes the subscriptions that now
  intersect an advertisement toward the next hop and unroutes (the covering and pruning
  stacks' output filters decide what crosses) those that no longer intersect any
  advertisement toward the previous one. The target makes them local and returns
  ``migration_done``; the publisher then resumes at the target, where its waiting
  publications go first, in its order. An event ``publisher_migrated`` records the publisher,
  from, to, start and end times and the selection time.

Deliberate choices and differences:
- The migration advertisement is the migration update: the paper sends updates along the
  path as a separate pass, but an update travelling back from the target would let
  subscriptions it re-routes reach the target after the publisher resumed there (lost
  deliveries). Travelling forward, every re-routed subscription reaches the next broker ahead
  of the advertisement (links are FIFO), and every publication sent before the pause is ahead
  of both, so nothing is lost, duplicated or reordered.
- Traces and their state are kept per publisher (a client), not per advertisement: all of a
  publisher's advertisements move together.
- A client that holds local subscriptions at its broker is not relocated (its subscriptions
  would have to move too); it keeps tracing.
- GRAPE's "matching delay" is the service time the cost model charges the traced copy; the
  ping delay is the link's latency.
- A broker starts its POP averages for a publisher afresh when the publisher's traces come to
  it from another neighbour than before (the publisher moved): the old averages describe the
  tree as seen from the old place.
- A lost trace message (a full mailbox that drops) leaves its publisher tracing forever.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

import numpy as np

from .broker import configured
from .errors import unknown_key
from .messages import Message
from .plugins import OFF, Needs, Protocol
from .routing import LOCAL

ALGORITHMS = ("grape", "pop")
METRICS = ("load", "delay")
# the message kinds this protocol adds (its control overhead)
CONTROL_KINDS = ("trace_reply", "trace_collect", "trace_report", "pop_walk", "pop_target",
                 "migration_adv", "migration_done")


@dataclass(frozen=True)
class RelocationSettings:
    algorithm: str = "grape"
    metric: str = "load"  # grape: the primary metric
    weight: float = 100  # grape: percent
    trace_threshold: int = 100
    window_us: int = 60_000_000  # pop
    trace_cap: int | None = 50  # pop: N, the traces a window allows; None: the previous window's publications
    hysteresis: float = 0  # percent a move must gain (0: the paper's, which has no damping)
    average_weight: float | None = 0.25  # pop: a new trace's weight in the running averages (the paper's); None: mean

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "RelocationSettings":
        """Settings from a scenario's ``protocol.relocation`` mapping; ValueError names the key."""
        known = ("algorithm", "metric", "weight", "trace_threshold", "window", "trace_cap", "hysteresis",
                 "average_weight")
        values = dict(given)
        for key in values:
            if key not in known:
                raise ValueError(unknown_key(key, known))
        if "window" in values:
            values["window_us"] = parse_duration(values.pop("window"), "window")
        for key, choices in (("algorithm", ALGORITHMS), ("metric", METRICS)):
            if values.setdefault(key, getattr(cls, key)) not in choices:
                raise ValueError(f"{key}: expected one of {', '.join(choices)}, got {values[key]!r}")
        weight = values.get("weight", cls.weight)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= 100:
            raise ValueError(f"weight: expected a percentage from 0 to 100, got {weight!r}")
        hysteresis = values.get("hysteresis", cls.hysteresis)
        if isinstance(hysteresis, bool) or not isinstance(hysteresis, (int, float)) or not 0 <= hysteresis < 100:
            raise ValueError(f"hysteresis: expected a percentage from 0 to under 100, got {hysteresis!r}")
        average = values.get("average_weight", cls.average_weight)
        if average == MEAN:
            values["average_weight"] = None
        elif isinstance(average, bool) or not isinstance(average, (int, float)) or not 0 < average <= 1:
            raise ValueError(f"average_weight: expected a weight above 0 and at most 1, or {MEAN!r}, got {average!r}")
        threshold = values.get("trace_threshold", cls.trace_threshold)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(f"trace_threshold: expected a positive integer, got {threshold!r}")
        cap = values.get("trace_cap", cls.trace_cap)
        if cap == PREVIOUS_WINDOW:
            values["trace_cap"] = None
        elif isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"trace_cap: expected a positive integer or {PREVIOUS_WINDOW!r}, got {cap!r}")
        return cls(**values)


PREVIOUS_WINDOW = "previous_window"  # POP's trace_cap: our earlier rule (see the module's docstring)
MEAN = "mean"  # POP's average_weight: every trace weighted alike (see the module's docstring)


def _words(bits: int) -> int:
    """The 64-bit words a bit vector ``bits`` takes (one at least)."""
    return max(1, (bits.bit_length() + 63) // 64)


# ---------------------------------------------------------------------- GRAPE's selection


class BrokerTrace(NamedTuple):
    """What one broker recorded over a GRAPE trace session."""

    broker: str
    parent: str | None  # where the traced copies came from (None: the publisher's broker)
    delivered: int  # bit i: the session's i-th traced publication was delivered here
    deliveries: int  # local deliveries of the session's traced publications
    processing_us: float  # mean queueing plus matching time of a traced copy here
    latency_us: int  # of the link from the parent


def grape_scores(traces: list[BrokerTrace]) -> dict[str, tuple[int, float]]:
    """Per broker of the trace tree: (messages the session's publications would have cost had
    the publisher been there, mean delivery delay from there in microseconds)."""
    by_name = {t.broker: t for t in traces}
    children: dict[str, list[str]] = {name: [] for name in by_name}
    for t in traces:
        if t.parent is not None:
            children[t.parent].append(t.broker)
    root = next(t.broker for t in traces if t.parent is None)
    order = _preorder(root, children)
    below = {}  # broker -> OR of the bit vectors in its subtree
    for name in reversed(order):
        below[name] = by_name[name].delivered
        for child in children[name]:
            below[name] |= below[child]
    outside = {root: 0}  # broker -> OR of the bit vectors outside its subtree
    for name in order:
        for child in children[name]:
            siblings = 0
            for other in children[name]:
                if other != child:
                    siblings |= below[other]
            outside[child] = outside[name] | by_name[name].delivered | siblings
    everything = (1 << max((t.delivered.bit_length() for t in traces), default=0)) - 1
    scores = {}
    for candidate in order:
        inside_of = _ancestors(candidate, by_name)  # the subtrees the candidate lies in
        messages = 0
        for name in order[1:]:  # every tree edge, named by its lower end
            mine = below[name] | (everything if name in inside_of else 0)
            theirs = outside[name] | (0 if name in inside_of else everything)
            messages += (mine & theirs).bit_count()
        scores[candidate] = (messages, _mean_delay(candidate, by_name, children))
    return scores


def _preorder(root: str, children: dict[str, list[str]]) -> list[str]:
    order, stack = [], [root]
    while stack:
        name = stack.pop()
        order.append(name)
        stack.extend(sorted(children[name], reverse=True))
    return order


def _ancestors(name: str, by_name: dict[str, BrokerTrace]) -> set[str]:
    """``name`` and the brokers above it up to (not including) the root."""
    found = set()
    while by_name[name].parent is not None:
        found.add(name)
        name = by_name[name].parent
    return found


def _mean_delay(source: str, by_name: dict[str, BrokerTrace], children: dict[str, list[str]]) -> float:
    """Mean over the session's deliveries of the delay from ``source`` to the delivering broker:
    per hop the link's latency and the receiving broker's processing, plus ``source``'s own."""
    delay = {source: by_name[source].processing_us}
    queue = deque([source])
    while queue:
        name = queue.popleft()
        parent = by_name[name].parent
        links = [(child, by_name[child].latency_us) for child in children[name]]
        if parent is not None:
            links.append((parent, by_name[name].latency_us))
        for other, latency in links:
            if other not in delay:
                delay[other] = delay[name] + latency + by_name[other].processing_us
                queue.append(other)
    deliveries = sum(t.deliveries for t in by_name.values())
    if not deliveries:
        return 0.0
    return sum(delay[name] * t.deliveries for name, t in by_name.items()) / deliveries


def grape_choice(scores: dict[str, tuple[int, float]], metric: str, weight: float, current: str,
                 hysteresis: float = 0) -> str:
    """The candidates whose normalised primary metric is within (100 - weight) percent of the
    best, then the best of those on the other metric (ties: the current broker, then by name);
    the current broker unless the choice improves its primary metric by more than
    ``hysteresis`` percent."""
    primary = 0 if metric == "load" else 1
    values = [score[primary] for score in scores.values()]
    best, worst = min(values), max(values)
    slack = (100 - weight) / 100 * (worst - best)
    kept = [name for name, score in scores.items() if score[primary] - best <= slack]
    chosen = min(kept, key=lambda name: (scores[name][1 - primary], scores[name][primary], name != current, name))
    if hysteresis and current in scores:
        if scores[chosen][primary] >= (1 - hysteresis / 100) * scores[current][primary]:
            return current
    return chosen


# ---------------------------------------------------------------------- POP's selection


def pop_next(averages: dict[int, float], came_from: int | None, upstream: float, hysteresis: float = 0) -> int | None:
    """POP's next closest broker: the neighbour (index) whose average subscriber count exceeds
    the sum of every other neighbour's, the local one (key LOCAL) and ``upstream`` (everything
    behind the walk) by more than ``hysteresis`` percent of that sum; None where no neighbour
    qualifies."""
    downstream = {n: v for n, v in averages.items() if n != LOCAL and n != came_from}
    total = sum(downstream.values()) + averages.get(LOCAL, 0.0) + upstream
    for neighbour, value in sorted(downstream.items()):
        if value > (total - value) * (1 + hysteresis / 100):
            return neighbour
    return None


# ---------------------------------------------------------------------- broker state


@dataclass
class _Publisher:
    """A publisher attached to this broker, as the relocation protocol sees it."""

    client: str
    rng: random.Random
    phase: str = "tracing"  # tracing | selecting | migrating
    selection_started: int = 0
    migration_started: int = 0
    # POP
    window_start: int = 0
    window_pubs: int = 0
    previous_window_pubs: int = 0  # 0: no previous window (trace every publication)
    window_traced: int = 0
    traces_started: int = 0
    traces_done: int = 0
    # GRAPE
    sessions: int = 0
    session_index: int = 0


@dataclass
class _PopTrace:
    """A traced publication waiting here for its neighbours' replies (POP)."""

    client: str
    upstream: str | None
    local: int
    waiting: set
    counts: dict = field(default_factory=dict)  # neighbour index -> its reply's count


@dataclass
class _SessionRecord:
    """What this broker saw of a GRAPE trace session."""

    parent: str | None
    latency_us: int
    children: set = field(default_factory=set)
    delivered: int = 0
    deliveries: int = 0
    processing_us: int = 0
    traced: int = 0

    def trace(self, name: str) -> BrokerTrace:
        return BrokerTrace(name, self.parent, self.delivered, self.deliveries,
                           self.processing_us / max(self.traced, 1), self.latency_us)


class Relocation:
    # a publisher resumes at a broker on any host: the lookahead must allow for that
    opens_links = True

    def __init__(self, name, neighbors, settings=None, overlay=None) -> None:
        super().__init__(name, neighbors, settings, overlay)
        self.relocation = configured(self.settings, "relocation", RelocationSettings)
        self.relocation_seed = self.settings.get("seed", 0)
        self.overlay = overlay or {name: list(neighbors)}
        self.publishers: dict[str, _Publisher] = {}
        self.pop_traces: dict[str, _PopTrace] = {}
        # publisher -> (where its traces come from, how many it has averaged, neighbour index (LOCAL) -> average count)
        self.pop_averages: dict[str, tuple[str | None, int, dict[int, float]]] = {}
        self.grape_sessions: dict[str, _SessionRecord] = {}  # session id -> this broker's record
        self.grape_collecting: dict[str, tuple[set, list]] = {}  # session id -> (children waited for, traces)
        self._next_hops: dict[str, str] | None = None
        self._traced: list | None = None  # [hops, local deliveries] of the traced copy in hand
        # client -> the migration advertisement this broker sent on, until its completion passes
        self.migrations_ahead: dict[str, Message] = {}

    def protocol_samples(self) -> dict:
        return {**super().protocol_samples(), "trace_state": self.trace_state()}

    def trace_state(self) -> int:
        """The values this broker's relocation state holds, the paper's memory overhead as the
        emulator can count it (a number, a name, a member of a set or 64 bits of a bit vector
        each): the record of every publisher attached here; POP's traced publications waiting
        for replies and its running averages per publisher; GRAPE's session records and the
        records it is collecting from downstream."""
        held = len(self.publishers) * len(fields(_Publisher))
        held += sum(3 + len(t.waiting) + len(t.counts) for t in self.pop_traces.values())
        held += sum(2 + len(averages) for _, _, averages in self.pop_averages.values())
        held += sum(5 + _words(r.delivered) + len(r.children) for r in self.grape_sessions.values())
        held += sum(len(waiting) + sum(5 + _words(t.delivered) for t in traces)
                    for waiting, traces in self.grape_collecting.values())
        return held

    # ------------------------------------------------------------------ publications

    def on_pub(self, msg: Message, sender: str | None, ctx) -> None:
        publisher = None
        if sender is None:
            publisher = self._publisher(msg.client, ctx)
            msg = self._traced_at_source(publisher, msg, ctx)
        trace = msg.header("trace")
        if trace is None:
            super().on_pub(msg, sender, ctx)
            return
        self._traced = [[], 0]
        try:
            super().on_pub(msg, sender, ctx)
            hops, local = self._traced
        finally:
            self._traced = None
        if trace[0] == "pop":
            self._pop_traced(msg, sender, hops, local, ctx)
        else:
            self._grape_traced(msg, trace, sender, hops, local, ctx)
            if publisher is not None and publisher.session_index == self.relocation.trace_threshold:
                publisher.phase, publisher.selection_started = "selecting", ctx.now
                self._grape_collect(trace[1], msg.client, None, ctx)

    def publication_next_hops(self, msg: Message, match, sender) -> list[str]:
        hops = super().publication_next_hops(msg, match, sender)
        if self._traced is not None:
            self._traced[0] = list(hops)
        return hops

    def deliver_locally(self, msg: Message, slots: np.ndarray, ctx) -> None:
        if self._traced is not None:
            self._traced[1] += len(slots)
        super().deliver_locally(msg, slots, ctx)

    def _publisher(self, client: str, ctx) -> _Publisher:
        publisher = self.publishers.get(client)
        if publisher is None:
            rng = random.Random(f"relocation/{self.relocation_seed}/{self.name}/{client}")
            publisher = self.publishers[client] = _Publisher(client, rng, window_start=ctx.now)
        return publisher

    def _traced_at_source(self, publisher: _Publisher, msg: Message, ctx) -> Message:
        """The publication as its broker sends it: with a ``trace`` header if it is traced."""
        if publisher.phase != "tracing":
            return msg
        if self.relocation.algorithm == "grape":
            index = publisher.session_index
            publisher.session_index += 1
            return msg.with_headers(trace=("grape", self._session_id(publisher), index))
        self._roll_window(publisher, ctx.now)
        publisher.window_pubs += 1
        if publisher.traces_started >= self.relocation.trace_threshold:
            return msg
        cap = self.relocation.trace_cap
        allowed = publisher.previous_window_pubs if cap is None else cap
        if allowed and publisher.rng.random() >= 1 - publisher.window_traced / allowed:
            return msg
        publisher.window_traced += 1
        publisher.traces_started += 1
        return msg.with_headers(trace=("pop",))

    def _roll_window(self, publisher: _Publisher, now: int) -> None:
        window = self.relocation.window_us
        elapsed = (now - publisher.window_start) // window
        if elapsed:
            publisher.previous_window_pubs = publisher.window_pubs if elapsed == 1 else 0
            publisher.window_start += elapsed * window
            publisher.window_pubs = publisher.window_traced = 0

    def _holds_subscriptions(self, client: str) -> bool:
        return bool(self.prt.local_keys_of(client))

    # ------------------------------------------------------------------ POP

    def _pop_traced(self, msg: Message, sender: str | None, hops: list[str], local: int, ctx) -> None:
        trace = _PopTrace(msg.client, sender, local, set(hops))
        if hops:
            self.pop_traces[msg.id] = trace
        else:
            self._pop_trace_done(msg.id, trace, ctx)

    def on_trace_reply(self, msg: Message, sender: str, ctx) -> None:
        trace = self.pop_traces[msg.id]
        trace.counts[self.hop_index[sender]] = msg.header("count")
        trace.waiting.discard(sender)
        if not trace.waiting:
            del self.pop_traces[msg.id]
            self._pop_trace_done(msg.id, trace, ctx)

    def _pop_trace_done(self, pub_id: str, trace: _PopTrace, ctx) -> None:
        upstream, traced, averages = self.pop_averages.get(trace.client, (trace.upstream, 0, {}))
        if upstream != trace.upstream:  # the publisher moved: what was downstream is not any more
            traced, averages = 0, {}
        traced += 1
        self.pop_averages[trace.client] = (trace.upstream, traced, averages)
        weight = self.relocation.average_weight or 1 / traced
        for hop in (LOCAL, *range(len(self.neighbors))):
            new = trace.local if hop == LOCAL else trace.counts.get(hop, 0)
            old = averages.get(hop)
            averages[hop] = new if old is None else (1 - weight) * old + weight * new
        if trace.upstream is not None:
            count = trace.local + sum(trace.counts.values())
            ctx.send(trace.upstream, Message("trace_reply", pub_id, client=trace.client, headers=(("count", count),)))
            return
        publisher = self.publishers.get(trace.client)
        if publisher is None or publisher.phase != "tracing":
            return
        publisher.traces_done += 1
        if publisher.traces_done >= self.relocation.trace_threshold:
            publisher.phase, publisher.selection_started = "selecting", ctx.now
            self._pop_walk(trace.client, self.name, 0.0, None, (self.name,), ctx)

    def on_pop_walk(self, msg: Message, sender: str, ctx) -> None:
        self._pop_walk(msg.client, msg.header("origin"), msg.header("upstream"), sender, msg.header("path"), ctx)

    def _pop_walk(self, client: str, origin: str, upstream: float, came_from: str | None, path: tuple, ctx) -> None:
        averages = self.pop_averages.get(client, (None, 0, {}))[2]
        back = None if came_from is None else self.hop_index[came_from]
        step = pop_next(averages, back, upstream, self.relocation.hysteresis)
        if step is not None:
            hop = self.neighbors[step]
            behind = upstream + sum(v for n, v in averages.items() if n not in (step, back))
            ctx.send(hop, Message("pop_walk", client, client=client, headers=(
                ("origin", origin), ("path", (*path, hop)), ("upstream", behind))))
        elif came_from is None:
            self._selected(client, self.name, ctx)
        else:
            self._pop_return(client, self.name, path, ctx)

    def on_pop_target(self, msg: Message, sender: str, ctx) -> None:
        path = msg.header("path")
        if path[0] == self.name:
            self._selected(msg.client, msg.header("target"), ctx)
        else:
            self._pop_return(msg.client, msg.header("target"), path, ctx)

    def _pop_return(self, client: str, target: str, path: tuple, ctx) -> None:
        """Pass the walk's result one step back along its path."""
        back = path[path.index(self.name) - 1]
        ctx.send(back, Message("pop_target", client, client=client, headers=(("path", path), ("target", target))))

    # ------------------------------------------------------------------ GRAPE

    def _session_id(self, publisher: _Publisher) -> str:
        return f"{publisher.client}@{self.name}#{publisher.sessions}"

    def _grape_traced(self, msg: Message, trace: tuple, sender: str | None, hops: list[str], local: int, ctx) -> None:
        _, session, index = trace
        record = self.grape_sessions.get(session)
        if record is None:
            latency = 0 if sender is None else ctx.latency(sender)
            record = self.grape_sessions[session] = _SessionRecord(sender, latency)
        record.children.update(hops)
        if local:
            record.delivered |= 1 << index
            record.deliveries += local
        record.processing_us += ctx.queued_us + ctx.service_us()
        record.traced += 1

    def _grape_collect(self, session: str, client: str, parent: str | None, ctx) -> None:
        """The session is over here: ask the brokers it reached for their records."""
        record = self.grape_sessions.setdefault(session, _SessionRecord(parent, 0))
        children = sorted(record.children)
        for child in children:
            ctx.send(child, Message("trace_collect", session, client=client))
        self.grape_collecting[session] = (set(children), [])
        if not children:
            self._grape_report(session, client, ctx)

    def on_trace_collect(self, msg: Message, sender: str, ctx) -> None:
        self._grape_collect(msg.id, msg.client, sender, ctx)

    def on_trace_report(self, msg: Message, sender: str, ctx) -> None:
        waiting, traces = self.grape_collecting[msg.id]
        traces.extend(msg.header("traces"))
        waiting.discard(sender)
        if not waiting:
            self._grape_report(msg.id, msg.client, ctx)

    def _grape_report(self, session: str, client: str, ctx) -> None:
        _, traces = self.grape_collecting.pop(session)
        record = self.grape_sessions.pop(session)
        traces = (record.trace(self.name), *traces)
        if record.parent is not None:
            ctx.send(record.parent, Message("trace_report", session, client=client, headers=(("traces", traces),)))
            return
        scores = grape_scores(list(traces))
        choice = grape_choice(scores, self.relocation.metric, self.relocation.weight, self.name,
                              self.relocation.hysteresis)
        self._selected(client, choice, ctx)

    # ------------------------------------------------------------------ migration

    def _selected(self, client: str, target: str, ctx) -> None:
        """The selection phase found ``target``: migrate there, or trace again from here."""
        publisher = self.publishers[client]
        ctx.event("relocation_selected", publisher=client, target=target,
                  algorithm=self.relocation.algorithm, selection_us=ctx.now - publisher.selection_started)
        if target == self.name or self._holds_subscriptions(client):
            self._trace_again(publisher)
            return
        publisher.phase, publisher.migration_started = "migrating", ctx.now
        ctx.pause_client(client, target)
        advs = tuple(self.advs[key].msg for key in sorted(self.srt.local_keys_of(client)))
        self._migrate(Message("migration_adv", client, client=client, headers=(
            ("advs", advs), ("origin", self.name), ("started", ctx.now), ("target", target))), ctx)

    def _trace_again(self, publisher: _Publisher) -> None:
        publisher.phase = "tracing"
        publisher.traces_started = publisher.traces_done = 0
        publisher.sessions += 1
        publisher.session_index = 0

    def on_migration_adv(self, msg: Message, sender: str, ctx) -> None:
        self._migrate(msg, ctx)

    def _migrate(self, msg: Message, ctx) -> None:
        """Re-point the publisher's advertisements toward the target, then pass the migration
        advertisement on (the target returns the completion instead)."""
        target = msg.header("target")
        onward = None if target == self.name else self._toward(target)
        for adv in msg.header("advs"):
            if adv.key in self.advs:
                self._repoint(adv.key, onward, ctx)
            else:  # this broker restarted empty, and neither neighbour sent it the advertisement again
                self.on_adv(adv, onward, ctx)
        if onward is not None:
            self.migrations_ahead[msg.client] = msg
            ctx.send(onward, msg)
        else:
            self._migration_done(replace(msg, kind="migration_done"), ctx)

    def on_migration_done(self, msg: Message, sender: str, ctx) -> None:
        self._migration_done(msg, ctx)

    def _migration_done(self, msg: Message, ctx) -> None:
        """Pass the completion on toward the origin, which resumes the publisher at the target;
        a completion the origin is not waiting for (sent again after a fault, or reaching an
        origin that restarted empty, whose paused publisher went to the target at its crash)
        changes nothing."""
        client, origin = msg.client, msg.header("origin")
        ahead = self.migrations_ahead.get(client)
        if ahead is not None and ahead.header("started") == msg.header("started"):
            del self.migrations_ahead[client]
        if origin != self.name:
            ctx.send(self._toward(origin), msg)
            return
        target = msg.header("target")
        publisher = self.publishers.get(client)
        if publisher is None or publisher.phase != "migrating" or publisher.migration_started != msg.header("started"):
            return
        del self.publishers[client]
        ctx.resume_client(client, target)
        ctx.event("publisher_migrated", publisher=client, origin=self.name, target=target,
                  algorithm=self.relocation.algorithm, t_start_us=publisher.migration_started, t_end_us=ctx.now,
                  selection_us=publisher.migration_started - publisher.selection_started)

    def link_restored(self, hop: str, ctx) -> None:
        """After the link's resynchronisation, send again the migrations this broker passed to
        ``hop`` that have not completed: the advertisement or its completion may have been
        lost with the link or the neighbour (re-pointing twice changes nothing)."""
        super().link_restored(hop, ctx)
        for client in sorted(self.migrations_ahead):
            msg = self.migrations_ahead[client]
            if self._toward(msg.header("target")) == hop:
                ctx.send(hop, msg)

    def _repoint(self, key, hop: str | None, ctx) -> None:
        """Advertisement ``key`` now comes from ``hop`` (None: a local client here)."""
        route = self.advs[key]
        old, route.last_hop = route.last_hop, hop
        self.srt.set_last_hop(route.slot, self._index(hop))
        adv, subs = route.msg.filter, self.subs
        if hop is not None:
            for sub in self.prt.keys_of(self.prt.advertised(adv, self.hop_index[hop])):
                self._route_subscription(subs[sub], hop, ctx)
        if old is not None:
            for sub in self.prt.keys_of(self.prt.unadvertised(adv, self.hop_index[old])):
                self._unroute_subscription(subs[sub], old, ctx)

    def _toward(self, broker: str) -> str:
        """The neighbour on the overlay path from here to ``broker``."""
        if self._next_hops is None:
            self._next_hops = {}
            queue = deque()
            for hop in self.neighbors:
                self._next_hops[hop] = hop
                queue.append(hop)
            while queue:
                name = queue.popleft()
                for other in self.overlay[name]:
                    if other != self.name and other not in self._next_hops:
                        self._next_hops[other] = self._next_hops[name]
                        queue.append(other)
        return self._next_hops[broker]


PROTOCOL = Protocol(
    key="relocation",
    paper="Publisher Placement Algorithms in Content-based Publish/Subscribe",
    summary="publisher relocation, POP or GRAPE, with a lossless migration protocol",
    settings=RelocationSettings,
    mixins=lambda settings: (Relocation,),
    classes=(Relocation,),
    order=20,
    needs=(Needs("soft_links", (OFF,), "a migration re-points advertisements along the primary tree, and soft "
                                       "links' anchors do not follow it"),),
)
