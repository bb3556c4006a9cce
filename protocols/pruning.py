"""Selective and incremental pruning of subscription trees on unsubscribe, over active covering.

Implements "Congestion Avoidance with Selective Filter Aggregation in Content-Based Routing
Networks" (``variant: selective``) and its conference version "Congestion Avoidance with
Incremental Filter Aggregation in Content-Based Routing Networks" (``variant: incremental``).
Publications carry statistics headers (``distance``: hops since the last broker that matched
more than one subscription; ``count``: how many such brokers, selective only). A subscriber's
broker (SHB) keeps a window of (publication, publisher, distance, count) per local
subscription and, on unsubscribe, attaches per publisher the critical distance: how far the
unsubscription travels toward that publisher before the subscription S is better kept as an
aggregate of the subscriptions it covers (NRS(S)). Where it stops, S stays *preserved* in
that neighbour's covering table: it is no longer routed or delivered, but keeps covering
NRS(S) there, so they stop there too and the burst never reaches the publishers' side.

Deliberate differences from the papers:
- advertisements are identified by their publisher (a client's advertisements share one
  last hop), and the statistics are updated by every broker a publication reaches, the
  publisher's and the subscriber's brokers included, so a recorded distance d sends the
  unsubscription exactly to the broker d hops away where the publication last matched more
  than one subscription, and that broker keeps S toward the publisher;
- M, the number of subscriptions a broker would trigger toward a neighbour, is the number of
  withheld subscriptions there that S covers (an upper bound: some may have other coverers);
  where M is 0 S is never preserved (it would hold nothing back), the unsubscription goes on
  with its decremented tuples;
- a preserved entry is withdrawn (a traditional unsubscription) once it covers no withheld
  subscription at its neighbour any more, so preserved entries do not accumulate forever;
- an unsubscription deferred at a congested broker (incremental) is charged when it arrives;
  its routing work, done at the first sampling tick after the queue drains, is not charged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .broker import Route, configured
from .covering import ActiveCovering
from .errors import unknown_key
from .messages import Message
from .plugins import Needs, Protocol

VARIANTS = ("selective", "incremental")
NO_STATISTICS = ("preserve", "unsubscribe")


@dataclass(frozen=True)
class PruningSettings:
    variant: str = "selective"
    threshold: float = 0.9  # selective: phi
    thresholds: tuple[float, float] | list[float] = (0.6, 0.9)  # incremental: phi1 (many triggered), phi2
    min_count: int = 0  # selective: below this largest recorded count, the statistics count as none
    no_statistics: str = "preserve"  # selective without statistics: send no tuples (the paper) or unsubscribe
    window_us: int = 120_000_000  # how long a recorded publication counts
    many_lg: float = 3.7  # incremental: lg M at or above which phi1 applies
    few_lg: float = 1.0  # incremental: lg M below which a broker always removes S
    congested_queue: int = 1_000  # incremental: queue length above which big unsubscriptions wait
    congestion_trigger: int = 10  # incremental: M from which an unsubscription counts as big

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "PruningSettings":
        """Settings from a scenario's ``protocol.pruning`` mapping (``window`` a duration);
        ValueError names the key."""
        known = [k for k in cls.__dataclass_fields__ if k != "window_us"] + ["window"]
        values = dict(given)
        for key in values:
            if key not in known:
                raise ValueError(unknown_key(key, known))
        if values.setdefault("variant", "selective") not in VARIANTS:
            raise ValueError(f"variant: expected one of {', '.join(VARIANTS)}, got {values['variant']!r}")
        if values.get("no_statistics", cls.no_statistics) not in NO_STATISTICS:
            raise ValueError(f"no_statistics: expected one of {', '.join(NO_STATISTICS)}, "
                             f"got {values['no_statistics']!r}")
        if "window" in values:
            values["window_us"] = parse_duration(values.pop("window"), "window")
        thresholds = values.get("thresholds", list(cls.thresholds))
        if not isinstance(thresholds, (list, tuple)) or len(thresholds) != 2:
            raise ValueError(f"thresholds: expected two fractions [phi1, phi2], got {thresholds!r}")
        values["thresholds"] = list(thresholds)
        for key, value in (("threshold", values.get("threshold", cls.threshold)),
                           ("thresholds", thresholds[0]), ("thresholds", thresholds[1])):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{key}: expected fractions in (0, 1], got {value!r}")
        for key in ("min_count", "congested_queue", "congestion_trigger"):
            value = values.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key}: expected a non-negative integer, got {value!r}")
        for key in ("many_lg", "few_lg"):
            if isinstance(values.get(key, 0), bool) or not isinstance(values.get(key, 0), (int, float)):
                raise ValueError(f"{key}: expected a number, got {values[key]!r}")
        return cls(**values)


def critical_distance(distances: list[int], phi: float) -> int:
    """The smallest x such that at least ``phi`` of ``distances`` are at most x."""
    ordered = sorted(distances)
    return ordered[max(math.ceil(phi * len(ordered)) - 1, 0)]


@dataclass(frozen=True, slots=True)
class WindowEntry:
    t: int
    pub_id: str
    publisher: str
    distance: int
    count: int

    @property
    def nbytes(self) -> int:
        return entry_nbytes(self.pub_id, self.publisher)


def entry_nbytes(pub_id: str, publisher: str) -> int:
    """What one recorded (publication, subscription) entry is counted as in ``window_bytes``."""
    return 8 + len(pub_id) + len(publisher) + 8


class DeliveryWindows:
    """The publications delivered to each local subscription (by its PRT slot) over the last
    ``window_us``, in arrays: a record per publication delivered here and an entry per
    (record, subscription), both in delivery order, so that a publication's deliveries are
    recorded in one step and the oldest ones expire from the front for every subscription at
    once (``expire``: the broker does it at every sampling tick). A subscription's entries are
    read (and dropped) when it unsubscribes; ``entries`` and ``nbytes`` count those held (an
    entry's size is its ``WindowEntry.nbytes``)."""

    def __init__(self, window_us: int) -> None:
        self.window_us = window_us
        self.records: list[tuple[str, str, int, int]] = []  # (pub_id, publisher, distance, count)
        self.record_t = np.zeros(64, np.int64)
        self.record_nbytes = np.zeros(64, np.int64)
        self.record_first = np.zeros(64, np.int64)  # its first entry
        self.entry_slot = np.zeros(256, np.int32)  # -1: dropped with its subscription
        self.head = 0  # the oldest live record
        self.used = 0  # entries
        self.entries = self.nbytes = 0

    def record(self, now: int, pub_id: str, publisher: str, distance: int, count: int, slots: np.ndarray) -> None:
        if not len(slots):  # (every record has an entry: expire sums them per record)
            return
        r, first = len(self.records), self.used
        if r == len(self.record_t):
            for name in ("record_t", "record_nbytes", "record_first"):
                setattr(self, name, np.concatenate([getattr(self, name), np.zeros(r, np.int64)]))
        if first + len(slots) > len(self.entry_slot):
            grown = np.zeros(max(2 * len(self.entry_slot), first + len(slots)), np.int32)
            grown[:first] = self.entry_slot[:first]
            self.entry_slot = grown
        self.records.append((pub_id, publisher, distance, count))
        nbytes = entry_nbytes(pub_id, publisher)
        self.record_t[r], self.record_nbytes[r], self.record_first[r] = now, nbytes, first
        self.entry_slot[first : first + len(slots)] = slots
        self.used += len(slots)
        self.entries += len(slots)
        self.nbytes += len(slots) * nbytes

    def expire(self, now: int) -> None:
        """Drop the records of publications delivered at or before ``now - window_us``."""
        last, cutoff = len(self.records), now - self.window_us
        if self.head == last or self.record_t[self.head] > cutoff:
            return
        end = self.head + int(np.searchsorted(self.record_t[self.head : last], cutoff, "right"))
        first, stop = int(self.record_first[self.head]), int(self.record_first[end]) if end < last else self.used
        live = (self.entry_slot[first:stop] >= 0).astype(np.int64)
        per_record = np.add.reduceat(live, self.record_first[self.head : end] - first)
        self.entries -= int(per_record.sum())
        self.nbytes -= int(per_record @ self.record_nbytes[self.head : end])
        self.head = end
        if 2 * end > last:
            self._compact()

    def take(self, slot: int, now: int) -> list[WindowEntry]:
        """The live entries of the subscription at ``slot``, oldest first, dropped from the window."""
        self.expire(now)
        if self.head == len(self.records):
            return []
        first = self.record_first[self.head]
        positions = first + np.flatnonzero(self.entry_slot[first : self.used] == slot)
        if not len(positions):
            return []
        self.entry_slot[positions] = -1
        records = self.head + np.searchsorted(self.record_first[self.head : len(self.records)], positions, "right") - 1
        self.entries -= len(positions)
        self.nbytes -= int(self.record_nbytes[records].sum())
        return [WindowEntry(int(self.record_t[r]), *self.records[r]) for r in records.tolist()]

    def _compact(self) -> None:
        """Move the live records and their entries to the front."""
        head, last = self.head, len(self.records)
        first = int(self.record_first[head]) if head < last else self.used
        for name in ("record_t", "record_nbytes", "record_first"):
            values = getattr(self, name)
            values[: last - head] = values[head:last]
        self.record_first[: last - head] -= first
        self.entry_slot[: self.used - first] = self.entry_slot[first : self.used]
        self.records = self.records[head:]
        self.used -= first
        self.head = 0


class Pruning(ActiveCovering):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pruning = configured(self.settings, "pruning", PruningSettings)
        self.pruning_window = DeliveryWindows(self.pruning.window_us)
        self.pruning_preserved: dict[str, dict[tuple, Message]] = {n: {} for n in self.neighbors}
        self.pruning_deferred: list[tuple[Message, str]] = []
        self._pruning_tuples: tuple | None = None  # the tuple list of the unsubscription in hand

    # ------------------------------------------------------------------ statistics

    def publication_arrived(self, msg: Message, match, sender) -> Message:
        """Update the statistics: 0 at the publisher's broker; then, at every broker the
        publication reaches, ``distance`` restarts from 0 (and ``count`` grows) where it
        matches more than one subscription, and grows by one elsewhere."""
        distance, count = (0, 0) if sender is None else (msg.header("distance", 0), msg.header("count", 0))
        if len(match.slots) > 1:
            distance, count = 0, count + 1
        else:
            distance += 1
        msg = super().publication_arrived(msg, match, sender)
        if self.pruning.variant == "selective":
            return msg.with_headers(distance=distance, count=count)
        return msg.with_headers(distance=distance)

    def deliver_locally(self, msg: Message, slots: np.ndarray, ctx) -> None:
        self.pruning_window.record(ctx.now, msg.id, msg.client, msg.header("distance", 0), msg.header("count", 0),
                                   slots)
        super().deliver_locally(msg, slots, ctx)

    def tick(self, ctx) -> None:
        self.pruning_window.expire(ctx.now)
        self._retry_deferred(ctx)
        super().tick(ctx)

    def awaits_tick(self) -> bool:
        return bool(self.pruning_deferred) or super().awaits_tick()

    def protocol_samples(self) -> dict:
        window = self.pruning_window
        return {**super().protocol_samples(), "preserved": sum(map(len, self.pruning_preserved.values())),
                "window_entries": window.entries, "window_bytes": window.nbytes}

    # ------------------------------------------------------------------ unsubscription

    def prune_tuples(self, window: list[WindowEntry]) -> tuple | None:
        """The SHB's tuple list for unsubscribing a subscription whose ``window`` this is: per
        publisher (publisher, pruneDis) (selective) or (publisher, pruneDis1, pruneDis2)
        (incremental). Without statistics (selective: nothing recorded, or the largest count
        below ``min_count``) the list is empty, as the selective paper's Algorithm 1 has it: no
        publisher's tuple travels, so S is preserved wherever it holds subscriptions back;
        ``no_statistics: unsubscribe`` returns None instead, an unsubscription the traditional
        way. Incremental with nothing recorded sends an empty list: each broker then decides
        by M alone (removes S where lg M is small, keeps it elsewhere)."""
        selective = self.pruning.variant == "selective"
        if selective and max((e.count for e in window), default=-1) < self.pruning.min_count or not window:
            return None if selective and self.pruning.no_statistics == "unsubscribe" else ()
        by_publisher: dict[str, list[int]] = {}
        for entry in window:
            by_publisher.setdefault(entry.publisher, []).append(entry.distance)
        phis = (self.pruning.threshold,) if self.pruning.variant == "selective" else self.pruning.thresholds
        return tuple((publisher, *(critical_distance(d, phi) for phi in phis))
                     for publisher, d in sorted(by_publisher.items()))

    def on_unsub(self, msg: Message, sender, ctx) -> None:
        if msg.key not in self.subs:
            return
        if sender is None:
            tuples = self.prune_tuples(self.pruning_window.take(self.subs[msg.key].slot, ctx.now))
        elif self._congested(msg, ctx):
            self.pruning_deferred.append((msg, sender))
            ctx.event("unsubscription_deferred", sub_id=msg.id, queue_len=ctx.queue_len)
            return
        else:
            tuples = msg.header("prune")
        self._unsubscribe(msg, sender, ctx, tuples)

    def _unsubscribe(self, msg: Message, sender, ctx, tuples: tuple | None) -> None:
        self._pruning_tuples = tuples
        try:
            super().on_unsub(msg, sender, ctx)
        finally:
            self._pruning_tuples = None

    def _congested(self, msg: Message, ctx) -> bool:
        """Incremental: a big unsubscription (M of at least ``congestion_trigger``) waits while
        the queue is longer than ``congested_queue``."""
        if self.pruning.variant != "incremental" or ctx.queue_len <= self.pruning.congested_queue:
            return False
        f = self.subs[msg.key].msg.filter
        triggered = sum(self._held_back(f, hop) for hop in self.neighbors if msg.key in self.covering_sent[hop])
        return triggered >= self.pruning.congestion_trigger

    def _held_back(self, f, hop: str) -> int:
        """M toward ``hop``: the withheld subscriptions ``f`` covers there."""
        return len(self.covering_withheld[hop].covered_by(f))

    def _retry_deferred(self, ctx) -> None:
        waiting, self.pruning_deferred = self.pruning_deferred, []
        for msg, sender in waiting:
            if msg.key not in self.subs:
                continue
            if self._congested(msg, ctx):
                self.pruning_deferred.append((msg, sender))
            else:
                self._unsubscribe(msg, sender, ctx, msg.header("prune"))

    def send_unsubscription(self, route: Route, hop: str, ctx, headers: tuple = ()) -> None:
        key, tuples = route.msg.key, self._pruning_tuples
        if key in self.covering_withheld[hop]:
            super().send_unsubscription(route, hop, ctx, headers)
            self._drop_idle_preserved(route.msg.filter, hop, ctx)
            return
        if tuples is None:  # a traditional unsubscription
            super().send_unsubscription(route, hop, ctx, headers)
            return
        triggered = self._held_back(route.msg.filter, hop)
        toward = {r.msg.client: r.last_hop for r in self.advs.values()}
        mine = [t for t in tuples if toward.get(t[0]) == hop]
        if self.pruning.variant == "selective":
            onward = tuple((p, d - 1) for p, d in mine if d > 0)
            forward = bool(onward) or not triggered
        else:
            onward = tuple((p, max(d1 - 1, 0), max(d2 - 1, 0)) for p, d1, d2 in mine)
            forward = self._incremental_forwards(triggered, mine)
        if forward:
            super().send_unsubscription(route, hop, ctx, (("prune", onward),))
        else:
            self.pruning_preserved[hop][key] = route.msg
            ctx.event("subscription_preserved", sub_id=route.msg.id, hop=hop, held_back=triggered)

    def resend_subscriptions(self, hop: str, ctx) -> None:
        """After a fault the neighbour keeps only what is sent again: nothing stays preserved."""
        self.pruning_preserved[hop] = {}
        super().resend_subscriptions(hop, ctx)

    def _incremental_forwards(self, triggered: int, mine: list[tuple]) -> bool:
        """Incremental: by lg M, always remove, or use pruneDis1 (many) or pruneDis2."""
        lg = math.log10(triggered) if triggered else -math.inf
        if lg < self.pruning.few_lg:
            return True
        column = 1 if lg >= self.pruning.many_lg else 2
        return any(t[column] > 0 for t in mine)

    # ------------------------------------------------------------------ preserved entries

    def _withdraw(self, key, hop: str, ctx, cause: str) -> None:
        preserved = self.pruning_preserved[hop].pop(key, None)
        if preserved is None:
            super()._withdraw(key, hop, ctx, cause)
            return
        self.covering_sent[hop].remove(key)  # a newly sent coverer replaces it upstream
        ctx.send(hop, preserved.unsubscription(cause=cause))

    def _drop_idle_preserved(self, removed, hop: str, ctx) -> None:
        """Withdraw preserved entries toward ``hop`` that covered the ``removed`` filter and
        now cover no withheld subscription there (a traditional unsubscription)."""
        preserved = self.pruning_preserved[hop]
        for key in self.covering_sent[hop].covering(removed):
            msg = preserved.get(key)
            if msg is not None and not self._held_back(msg.filter, hop):
                del preserved[key]
                self.covering_sent[hop].remove(key)
                ctx.send(hop, msg.unsubscription())


PROTOCOL = Protocol(
    key="pruning",
    paper="Congestion Avoidance with Selective Filter Aggregation in Content-Based Routing Networks (selective); "
          "Congestion Avoidance with Incremental Filter Aggregation in Content-Based Routing Networks (incremental)",
    summary="selective or incremental pruning of subscription trees on unsubscribe: a broad subscription stays "
            "as an aggregate where removing it would release a burst",
    settings=PruningSettings,
    mixins=lambda settings: (Pruning,),
    classes=(Pruning,),
    order=30,
    needs=(Needs("covering", ("active", "packing"),
                 "a pruned subscription keeps covering those it held back, in active covering's tables"),),
)
