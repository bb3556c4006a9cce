"""The base content-based broker: advertisement-based routing as in PADRES and SIENA.

Advertisements flood the acyclic overlay and build the subscription routing table (SRT:
advertisement -> last hop). Subscriptions travel toward the last hops of intersecting
advertisements and build the publication routing table (PRT: subscription -> last hop).
Publications follow matching subscriptions in reverse, one copy per distinct next hop, never
back where they came from. Deliberate difference from PADRES: a publication that conforms to
none of its publisher's advertisements is dropped at its first broker and reported as an
event (``check_conformance: false`` lets it through).

A broker never sends directly: every effect goes through the context the runtime passes in
(``send``, ``deliver``, ``event``, ``now``), so this module imports neither Ray nor time.

Hooks protocols override (and extend with ``super()``):
  ``on_<kind>(msg, sender, ctx)``     handle an arriving message of that kind (sender None:
                                     from a local client)
  ``subscription_next_hops(route)``  neighbours a subscription is routed toward
  ``publication_next_hops(msg, matched, sender)``  neighbours a publication copy goes to
  ``publication_arrived(msg, matched, sender)``  the publication as this broker delivers and
                                     forwards it (protocols update its headers here)
  ``deliver_locally(msg, route, ctx)`` hand a publication to a local subscriber
  ``send_subscription(route, hop, ctx)`` / ``send_unsubscription(route, hop, ctx)``
                                     the output filter: what physically crosses to a neighbour
                                     when a subscription starts / stops being routed there
  ``tick(ctx)``                      periodic work (called every sampling interval)
  ``awaits_tick()``                  True while the broker holds work only a tick will do
                                     (a run until idle goes on to the next tick)
  ``protocol_samples()``             a protocol's extra sample columns (results SCHEMAS)
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from .index import FilterIndex, Work
from .language import conforms
from .messages import Message

Key = tuple[str, int]


class Context(Protocol):
    """What the runtime offers a broker while it handles one message."""

    now: int  # virtual time in microseconds
    queue_len: int  # messages waiting in this broker's mailbox

    def send(self, destination: str, message: Message) -> None: ...

    def deliver(self, publication: Message, sub_id: str, client: str) -> None: ...

    def event(self, kind: str, **detail) -> None: ...


@dataclass(slots=True)
class Route:
    """A routing-table entry: the message that installed it and where it came from.

    For a subscription, ``toward`` counts the intersecting advertisements per last hop: the
    neighbours it is routed toward are those with a count (except its own last hop).
    """

    msg: Message
    last_hop: str | None  # None: a local client
    toward: Counter = field(default_factory=Counter)


class Broker:
    def __init__(self, name: str, neighbors, settings: dict | None = None) -> None:
        self.name = name
        self.neighbors: list[str] = sorted(neighbors)
        self.settings = dict(settings or {})
        self.check_conformance = bool(self.settings.get("check_conformance", True))
        self.work = Work()
        self.srt = FilterIndex(self.work)
        self.prt = FilterIndex(self.work)
        self.advs: dict[Key, Route] = {}
        self.subs: dict[Key, Route] = {}
        # per neighbour, the subscriptions routed there (insertion-ordered dict used as a set)
        self.routed_subs: dict[str, dict[Key, None]] = {n: {} for n in self.neighbors}

    # ------------------------------------------------------------------ dispatch

    def handle(self, msg: Message, sender: str | None, ctx: Context) -> None:
        handler = getattr(self, "on_" + msg.kind, None)
        if handler is None:
            raise ValueError(f"broker {self.name}: no handler for message kind {msg.kind!r}")
        handler(msg, sender, ctx)

    def tick(self, ctx: Context) -> None:
        """Periodic work; the base broker has none."""

    def awaits_tick(self) -> bool:
        return False

    def protocol_samples(self) -> dict:
        """Values of the protocol's own sample columns; the base broker has none."""
        return {}

    @property
    def prt_size(self) -> int:
        return len(self.prt)

    @property
    def srt_size(self) -> int:
        return len(self.srt)

    # ------------------------------------------------------------------ advertisements

    def on_adv(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if msg.key in self.advs:
            return
        self.srt.add(msg.key, msg.filter)
        self.advs[msg.key] = Route(msg, sender)
        for hop in self.neighbors:
            if hop != sender:
                ctx.send(hop, msg)
        if sender is not None:
            subs, routed = self.subs, self.routed_subs[sender]
            for key in self.prt.intersected_by(msg.filter):
                route = subs[key]
                route.toward[sender] += 1
                if key not in routed and route.last_hop != sender:  # most are routed there already
                    self._route_subscription(route, sender, ctx)

    def on_unadv(self, msg: Message, sender: str | None, ctx: Context) -> None:
        route = self.advs.pop(msg.key, None)
        if route is None:
            return
        self.srt.remove(msg.key)
        for hop in self.neighbors:
            if hop != sender:
                ctx.send(hop, msg)
        if sender is not None:
            routed = self.routed_subs[sender]
            for key in self.prt.intersected_by(route.msg.filter):
                toward = self.subs[key].toward
                toward[sender] -= 1
                if toward[sender] == 0:
                    del toward[sender]
                    if key in routed:
                        self._unroute_subscription(self.subs[key], sender, ctx)

    # ------------------------------------------------------------------ subscriptions

    def on_sub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if msg.key in self.subs:
            return
        route = Route(msg, sender)
        advs = self.advs
        hops = [advs[key].last_hop for key in self.srt.intersecting(msg.filter)]
        route.toward.update(hop for hop in hops if hop is not None)
        self.prt.add(msg.key, msg.filter)
        self.subs[msg.key] = route
        for hop in self.subscription_next_hops(route):
            self._route_subscription(route, hop, ctx)

    def on_unsub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        route = self.subs.pop(msg.key, None)
        if route is None:
            return
        self.prt.remove(msg.key)
        for hop in self.neighbors:
            if msg.key in self.routed_subs[hop]:
                self._unroute_subscription(route, hop, ctx)

    def subscription_next_hops(self, route: Route) -> list[str]:
        return sorted(hop for hop in route.toward if hop != route.last_hop)

    def _route_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        routed = self.routed_subs[hop]
        if route.msg.key not in routed:
            routed[route.msg.key] = None
            self.send_subscription(route, hop, ctx)

    def _unroute_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        del self.routed_subs[hop][route.msg.key]
        self.send_unsubscription(route, hop, ctx)

    def send_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        ctx.send(hop, route.msg)

    def send_unsubscription(self, route: Route, hop: str, ctx: Context, headers: tuple = ()) -> None:
        ctx.send(hop, route.msg.unsubscription(headers=headers))

    # ------------------------------------------------------------------ publications

    def on_pub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if sender is None and self.check_conformance and not self._conforms(msg):
            ctx.event("nonconforming_publication", pub_id=msg.id, client=msg.client)
            return
        matched = self.prt.matching(msg.publication)
        msg = self.publication_arrived(msg, matched, sender)
        subs = self.subs
        for key in matched:
            route = subs[key]
            if route.last_hop is None:
                self.deliver_locally(msg, route, ctx)
        hops = self.publication_next_hops(msg, matched, sender)
        if hops:
            copy = msg.forwarded()  # immutable: every next hop can take the same copy
            for hop in hops:
                ctx.send(hop, copy)

    def publication_arrived(self, msg: Message, matched: list[Key], sender: str | None) -> Message:
        return msg

    def deliver_locally(self, msg: Message, route: Route, ctx: Context) -> None:
        ctx.deliver(msg, route.msg.id, route.msg.client)

    def publication_next_hops(self, msg: Message, matched: list[Key], sender: str | None) -> list[str]:
        subs = self.subs
        hops = {subs[key].last_hop for key in matched}
        hops.discard(None)
        hops.discard(sender)
        return sorted(hops)

    def _conforms(self, msg: Message) -> bool:
        return any(
            route.last_hop is None and route.msg.client == msg.client and conforms(msg.publication, route.msg.filter)
            for route in self.advs.values()
        )

    # ------------------------------------------------------------------ client moves

    def on_detach(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """The client ``msg.id`` leaves: withdraw its subscriptions and advertisements here."""
        client = msg.id
        for key, route in list(self.subs.items()):
            if route.last_hop is None and route.msg.client == client:
                self.on_unsub(Message("unsub", key[0], key[1], client=client), None, ctx)
        for key, route in list(self.advs.items()):
            if route.last_hop is None and route.msg.client == client:
                self.on_unadv(Message("unadv", key[0], key[1], client=client), None, ctx)

    def on_attach(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """The client ``msg.id`` arrives and re-issues its advertisements and subscriptions."""
        for item in msg.items:
            self.handle(item, None, ctx)
