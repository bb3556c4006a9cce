"""Subscription covering as an output filter per next hop, the way PADRES applies it.

Implements the covering baselines of "Congestion Avoidance with Selective Filter Aggregation
in Content-Based Routing Networks" (and its conference version "...Incremental Filter
Aggregation..."): a subscription bound for a neighbour is not sent when one already sent
there covers it. ``LazyCovering`` stops there; ``ActiveCovering`` also withdraws (sends
unsubscriptions for) the subscriptions a newly sent one covers. Unsubscribing a sent
subscription releases, as the burst, every withheld subscription it covered that no other
sent subscription still covers; a subscription covered by two others is released once both
are gone. Released (un)subscriptions carry the triggering id in ``cause``.
Deliberate difference: released subscriptions go out most general first (fewest predicates,
then key), so a released coverer keeps the subscriptions it covers withheld.

Per neighbour, ``routed_subs`` (the base broker's) is exactly ``covering_sent`` plus
``covering_withheld``.
"""
from __future__ import annotations

from dataclasses import replace

from .broker import Route
from .index import FilterIndex
from .messages import Message


class LazyCovering:
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.covering_sent = {n: FilterIndex(self.work) for n in self.neighbors}
        self.covering_withheld = {n: FilterIndex(self.work) for n in self.neighbors}

    def send_subscription(self, route: Route, hop: str, ctx, cause: str | None = None) -> None:
        f = route.msg.filter
        if self.covering_sent[hop].covering(f):
            self.covering_withheld[hop].add(route.msg.key, f)
        else:
            self._send_covering(route, hop, ctx, cause)

    def _send_covering(self, route: Route, hop: str, ctx, cause: str | None) -> None:
        self.covering_sent[hop].add(route.msg.key, route.msg.filter)
        ctx.send(hop, route.msg if cause is None else replace(route.msg, cause=cause))

    def send_unsubscription(self, route: Route, hop: str, ctx) -> None:
        key = route.msg.key
        if key in self.covering_withheld[hop]:
            self.covering_withheld[hop].remove(key)
            return
        self.covering_sent[hop].remove(key)
        super().send_unsubscription(route, hop, ctx)
        self._release(route, hop, ctx)

    def _release(self, removed: Route, hop: str, ctx) -> None:
        """Send the withheld subscriptions ``removed`` covered that nothing sent covers now."""
        withheld, sent = self.covering_withheld[hop], self.covering_sent[hop]
        candidates = withheld.covered_by(removed.msg.filter)
        candidates.sort(key=lambda k: (len(withheld.filter(k).predicates), k))
        for key in candidates:
            if key in withheld and not sent.covering(withheld.filter(key)):
                withheld.remove(key)
                self.send_subscription(self.subs[key], hop, ctx, cause=removed.msg.id)


class ActiveCovering(LazyCovering):
    def _send_covering(self, route: Route, hop: str, ctx, cause: str | None) -> None:
        sent = self.covering_sent[hop]
        now_covered = sent.covered_by(route.msg.filter)
        super()._send_covering(route, hop, ctx, cause)
        for key in now_covered:
            covered = self.subs[key].msg
            sent.remove(key)
            self.covering_withheld[hop].add(key, covered.filter)
            ctx.send(hop, Message("unsub", covered.id, covered.gen, client=covered.client, cause=route.msg.id))
