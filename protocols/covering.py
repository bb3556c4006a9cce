"""Subscription covering as an output filter per next hop, the way PADRES applies it.

Implements the covering baselines of "Congestion Avoidance with Selective Filter Aggregation
in Content-Based Routing Networks" (and its conference version "...Incremental Filter
Aggregation..."): a subscription bound for a neighbour is not sent when one already sent
there covers it. ``LazyCovering`` stops there; ``ActiveCovering`` also withdraws (sends
unsubscriptions for) the subscriptions a newly sent one covers. Unsubscribing a sent
subscription releases, as the burst, every withheld subscription it covered that no other
sent subscription still covers; a subscription covered by two others is released once both
are gone. Released (un)subscriptions carry the triggering id in ``cause``.
``PackingCovering`` is active covering whose cause-tagged (un)subscriptions for one handled
message and one neighbour travel as batches (``sub_batch``/``unsub_batch``: each run of
consecutive ones, in their order; a burst is one run), unpacked at the receiver and charged
there item by item.
Deliberate differences from PADRES: released subscriptions go out before the unsubscription
that released them (the neighbour never lacks both, so no publication is lost in between),
and most general first (fewest predicates, then key), so a released coverer keeps the
subscriptions it covers withheld.

Per neighbour, ``routed_subs`` (the base broker's) is exactly ``covering_sent`` plus
``covering_withheld`` over the neighbour's scopes (``covering_scope``: the neighbour itself,
unless a stack narrows it).
"""
from __future__ import annotations

from dataclasses import replace
from itertools import groupby

from .broker import Route
from .index import FilterIndex
from .messages import Message
from .plugins import Protocol


class _Tables(dict):
    """Covering tables by scope, each made when first asked for."""

    def __init__(self, work, scopes) -> None:
        super().__init__()
        self.work = work
        for scope in scopes:
            self[scope] = FilterIndex(work)

    def __missing__(self, scope) -> FilterIndex:
        table = self[scope] = FilterIndex(self.work)
        return table


class LazyCovering:
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.covering_sent = _Tables(self.work, self.neighbors)
        self.covering_withheld = _Tables(self.work, self.neighbors)

    def rewire(self, neighbors) -> None:
        super().rewire(neighbors)
        for tables in (self.covering_sent, self.covering_withheld):
            for scope in [s for s in tables if (s[0] if isinstance(s, tuple) else s) not in self.hop_index]:
                del tables[scope]

    def covering_scope(self, route: Route, hop: str):
        """The covering tables a subscription toward ``hop`` is compared within: the
        neighbour's (a stack whose copies skip brokers narrows it, see soft links)."""
        return hop

    def covering_scopes_toward(self, hop: str) -> list:
        """Every scope ``covering_scope`` gave subscriptions sent toward ``hop``."""
        return [hop]

    def send_subscription(self, route: Route, hop: str, ctx, cause: str | None = None) -> None:
        f, scope = route.msg.filter, self.covering_scope(route, hop)
        if self.covering_sent[scope].is_covered(f):
            self.covering_withheld[scope].add(route.msg.key, f)
        else:
            self._send_covering(route, hop, ctx, cause)

    def _send_covering(self, route: Route, hop: str, ctx, cause: str | None) -> None:
        self.covering_sent[self.covering_scope(route, hop)].add(route.msg.key, route.msg.filter)
        ctx.send(hop, route.msg if cause is None else replace(route.msg, cause=cause))

    def resend_subscriptions(self, hop: str, ctx) -> None:
        """After a fault: forget what was sent toward ``hop`` and decide again, most general
        first (as a release does)."""
        for scope in self.covering_scopes_toward(hop):
            self.covering_sent[scope] = FilterIndex(self.work)
            self.covering_withheld[scope] = FilterIndex(self.work)
        for route in sorted(self.routed_toward(hop), key=lambda r: (_generality(r.msg.filter), r.msg.key)):
            self.send_subscription(route, hop, ctx)

    def sent_toward(self, hop: str) -> set:
        return {key for scope in self.covering_scopes_toward(hop) for key in self.covering_sent[scope].keys()}

    def forget_routed(self, route: Route, hop: str) -> None:
        super().forget_routed(route, hop)
        scope = self.covering_scope(route, hop)
        for table in (self.covering_sent[scope], self.covering_withheld[scope]):
            if route.msg.key in table:
                table.remove(route.msg.key)

    def send_unsubscription(self, route: Route, hop: str, ctx, headers: tuple = ()) -> None:
        key, scope = route.msg.key, self.covering_scope(route, hop)
        if key in self.covering_withheld[scope]:
            self.covering_withheld[scope].remove(key)
            return
        self.covering_sent[scope].remove(key)
        self._release(route, hop, ctx)
        super().send_unsubscription(route, hop, ctx, headers)

    def _release(self, removed: Route, hop: str, ctx) -> None:
        """Send the withheld subscriptions ``removed`` covered that nothing sent covers now."""
        scope = self.covering_scope(removed, hop)
        withheld, sent = self.covering_withheld[scope], self.covering_sent[scope]
        candidates = withheld.covered_by(removed.msg.filter)
        candidates.sort(key=lambda k: (_generality(withheld.filter(k)), k))
        for key in candidates:
            if key in withheld and not sent.is_covered(withheld.filter(key)):
                withheld.remove(key)
                self.send_subscription(self.subs[key], hop, ctx, cause=removed.msg.id)


class ActiveCovering(LazyCovering):
    def _send_covering(self, route: Route, hop: str, ctx, cause: str | None) -> None:
        now_covered = self.covering_sent[self.covering_scope(route, hop)].covered_by(route.msg.filter)
        super()._send_covering(route, hop, ctx, cause)
        for key in now_covered:
            self._withdraw(key, hop, ctx, cause=route.msg.id)

    def _withdraw(self, key, hop: str, ctx, cause: str) -> None:
        """Unsubscribe ``hop`` from a sent subscription that a newly sent one covers."""
        route = self.subs[key]
        scope = self.covering_scope(route, hop)
        self.covering_sent[scope].remove(key)
        self.covering_withheld[scope].add(key, route.msg.filter)
        ctx.send(hop, route.msg.unsubscription(cause=cause))


def _generality(f) -> int:
    """Fewer predicates first: the most general subscriptions go out before those they cover."""
    return min(len(d.predicates) for d in f.disjuncts)


class PackingCovering(ActiveCovering):
    def handle(self, msg: Message, sender, ctx) -> None:
        packer = _Packer(ctx)
        super().handle(msg, sender, packer)
        packer.flush()

    def on_sub_batch(self, msg: Message, sender, ctx) -> None:
        for item in msg.items:
            self.handle(item, sender, ctx)

    on_unsub_batch = on_sub_batch


class _Packer:
    """A broker context that holds back a handled message's (un)subscriptions per neighbour
    and sends them in their order, each run of consecutive released subscriptions as one
    ``sub_batch`` and each run of consecutive withdrawals as one ``unsub_batch`` (a burst is
    one such run). Keeping the order keeps active covering's guarantees: a neighbour never
    lacks a coverer, and a key withdrawn and released again in one handling ends up sent."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.now, self.queue_len = ctx.now, ctx.queue_len
        self.held: dict[str, list[Message]] = {}

    def send(self, destination: str, message: Message) -> None:
        if message.kind in ("sub", "unsub"):
            self.held.setdefault(destination, []).append(message)
        else:
            self.ctx.send(destination, message)

    def deliver(self, publication, sub_ids, clients) -> None:
        self.ctx.deliver(publication, sub_ids, clients)

    def event(self, kind: str, **detail) -> None:
        self.ctx.event(kind, **detail)

    def __getattr__(self, name: str):
        return getattr(self.ctx, name)  # the rest of the context (other stacks' needs) as it is

    def flush(self) -> None:
        for destination, messages in self.held.items():
            for batch_kind, run in groupby(messages, key=_batch_kind):
                run = list(run)
                if batch_kind is None or len(run) == 1:
                    for message in run:
                        self.ctx.send(destination, message)
                else:
                    self.ctx.send(destination, Message(batch_kind, run[0].cause, items=tuple(run), cause=run[0].cause))


def _batch_kind(message: Message) -> str | None:
    """The batch a cause-tagged (un)subscription travels in; None for ordinary traffic."""
    return None if message.cause is None else message.kind + "_batch"


PROTOCOL = Protocol(
    key="covering",
    paper="Congestion Avoidance with Selective Filter Aggregation in Content-Based Routing Networks",
    summary="subscription covering as an output filter per next hop: lazy, active, or packing (active, its "
            "bursts travelling as one batch message)",
    choices=("none", "lazy", "active", "packing"),
    mixins=lambda value: {"none": (), "lazy": (LazyCovering,), "active": (ActiveCovering,),
                          "packing": (PackingCovering,)}[value],
    classes=(LazyCovering, ActiveCovering, PackingCovering),
    order=90,
)
