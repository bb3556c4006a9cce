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

Routing state lives in two routing tables (protocols/routing.py): the SRT (advertisements)
and the PRT (subscriptions), whose entries carry last hops, per-neighbour counts of
intersecting advertisements and per-neighbour routed flags in arrays; each question the
broker asks is one compiled call. ``self.advs`` and ``self.subs`` map keys to ``Route``s.

Hooks protocols override (and extend with ``super()``):
  ``on_<kind>(msg, sender, ctx)``     handle an arriving message of that kind (sender None:
                                     from a local client)
  ``subscription_next_hops(route)``  neighbours a subscription is routed toward
  ``publication_next_hops(msg, match, sender)``  neighbours a publication copy goes to
                                     (``match``: the PRT's answer, an index ``Match`` whose
                                     ``slots`` are the matching subscriptions, ``groups`` the
                                     base broker's next hops as neighbour indices)
  ``publication_arrived(msg, match, sender)``  the publication as this broker delivers and
                                     forwards it (protocols update its headers here)
  ``deliver_locally(msg, slots, ctx)`` hand a publication to the local subscriptions at
                                     ``slots`` (PRT slots, in slot order)
  ``send_subscription(route, hop, ctx)`` / ``send_unsubscription(route, hop, ctx)``
                                     the output filter: what physically crosses to a neighbour
                                     when a subscription starts / stops being routed there
  ``tick(ctx)``                      periodic work (called every sampling interval)
  ``awaits_tick()``                  True while the broker holds work only a tick will do
                                     (a run until idle goes on to the next tick)
  ``protocol_samples()``             a protocol's extra sample columns (results SCHEMAS)
  ``sender_direction(sender)``       the neighbour a publication from ``sender`` came through
  ``link_restored(hop, ctx)``        the link to ``hop`` is back after a fault (it was down or
                                     lossy, or a broker restarted): resynchronise it
  ``resend_subscriptions(hop, ctx)`` send again what is routed toward ``hop`` (protocols
                                     first reset their per-neighbour output state)
  ``rewire(neighbors)`` / ``forget_routed(route, hop)``  a Delta-move changes the links, and
                                     a neighbour holds a subscription from its other side now
                                     (protocols drop their per-neighbour state for either)

Client moves (a handoff, section "client moves" below): a ``move`` at time T detaches the
client from its old broker and attaches it, with new incarnations (``gen``) of its filters, at
the new one. Each incarnation of a subscription delivers only the publications published in
its own window: the new one those published at T or later, the old one those published before
T. The old broker keeps the old subscriptions until every publication published before T that
could match them has reached it: it sends a marker (``move_flush``) toward every neighbour with
an intersecting advertisement, each broker passes it on likewise and answers ``move_flushed``
once its own upstream has answered. Links and mailboxes are FIFO and a broker's local clients'
publications before T are ahead of the marker in its mailbox, so the answer arrives behind
every such publication; the old subscriptions are then withdrawn. A broker keeps at most one
marker out per link: flush requests made while one is out ride the next, sent when it comes
back (a later marker trails more, never less), so many clients moving at once cost a hub a few
markers per round trip instead of a round per move (the mobile rush hour). A publication is
delivered at most once per subscription whatever the stack (the windows do not overlap), and
exactly once when published while the subscriber is settled, where publications travel the
advertisement tree (not over soft links or multi-tree routes, and not with ``delay`` faults
that reorder a link).

Recovery (after emulated faults): ``link_restored`` sends the neighbour every advertisement
it would have flooded there and, through ``resend_subscriptions``, every subscription routed
there, then a ``link_sync`` naming them all; the neighbour ignores what it already holds and
withdraws what it holds from this broker that the sync does not name (unsubscriptions lost
while the link was down, or everything, when this broker restarted empty).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .index import Match, Work
from .language import conforms, rebuilt_by_constructor
from .messages import Message
from .routing import LOCAL, RoutingTable

Key = tuple[str, int]


class Context(Protocol):
    """What the runtime offers a broker while it handles one message."""

    now: int  # virtual time in microseconds
    queue_len: int  # messages waiting in this broker's mailbox

    def send(self, destination: str, message: Message) -> None: ...

    def deliver(self, publication: Message, sub_ids: Sequence[str], clients: Sequence) -> None: ...  # one each

    def event(self, kind: str, **detail) -> None: ...

    # what stacks that measure or move clients use (publisher relocation)
    queued_us: int  # how long the message in hand waited in the mailbox

    def latency(self, destination: str) -> int: ...  # of this broker's link there

    def service_us(self) -> int: ...  # the service time the message in hand has cost so far

    def pause_client(self, client: str, toward: str) -> None: ...  # its operations wait (queued ones too)
    # while it moves to ``toward``: it goes there at once if this broker crashes meanwhile

    def resume_client(self, client: str, broker: str) -> None: ...  # they go to ``broker`` from now on


def configured(settings: dict, key: str, settings_class):
    """A configured mixin's settings: ``settings[key]`` as ``settings_class``, given as the
    class itself or as the mapping of its fields (what a scenario resolves to)."""
    given = settings[key]
    return given if isinstance(given, settings_class) else settings_class(**given)


@dataclass(slots=True)
class Route:
    """A routing-table entry: the message that installed it, where it came from, and its slot
    in the table (where its routing metadata lives)."""

    msg: Message
    last_hop: str | None  # None: a local client
    slot: int

    __reduce__ = rebuilt_by_constructor


@dataclass(slots=True)
class _Flush:
    """A flush request: done once a marker sent after it has come back from every direction
    (neighbour index) in ``waiting``. Then it answers the marker ``answer`` of neighbour
    ``reply_to``, or, where it came from this broker's own detach (``reply_to`` None), drains
    the subscriptions ``keys`` its client left behind at ``cut``."""

    waiting: set[int]
    items: tuple[Message, ...]  # the moving subscriptions: where the markers must go
    reply_to: str | None = None
    answer: Key = ("", 0)
    client: str = ""
    gen: int = 0
    keys: list[Key] = field(default_factory=list)
    cut: int = 0


class Broker:
    # True in a stack that opens links between brokers that are not overlay neighbours: the
    # runtime then bounds cross-host latency by the default latency, not only the overlay's
    opens_links = False

    def __init__(self, name: str, neighbors, settings: dict | None = None, overlay: dict | None = None) -> None:
        """``overlay``: every broker's overlay neighbours, for stacks that need the topology
        beyond this broker's own links (the base broker does not)."""
        self.name = name
        self.neighbors: list[str] = sorted(neighbors)
        self.hop_index = {hop: i for i, hop in enumerate(self.neighbors)}
        self.settings = dict(settings or {})
        self.check_conformance = bool(self.settings.get("check_conformance", True))
        self.work = Work()
        self.srt = RoutingTable(self.neighbors, self.work)
        self.prt = RoutingTable(self.neighbors, self.work)
        self.advs: dict[Key, Route] = {}
        self.subs: dict[Key, Route] = {}
        # flush requests by number; per direction the marker out there (its number and the
        # requests riding it) and the requests waiting for the next marker that way
        self.flushes: dict[int, _Flush] = {}
        self.markers_out: dict[int, tuple[int, list[int]]] = {}
        self.markers_next: dict[int, list[int]] = {}
        self.flush_count = 0

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

    @property
    def routed_subs(self) -> dict[str, list[Key]]:
        """Per neighbour, the keys of the subscriptions routed there (for inspection)."""
        return {hop: self.prt.routed_keys(i) for i, hop in enumerate(self.neighbors)}

    def rewire(self, neighbors) -> None:
        """Change this broker's overlay links to ``neighbors`` (a Delta-move, see
        protocols/deltamoves.py): routing metadata follows each neighbour's name; a dropped
        neighbour must have no entries left."""
        self.neighbors = sorted(neighbors)
        self.hop_index = {hop: i for i, hop in enumerate(self.neighbors)}
        self.srt.set_neighbors(self.neighbors)
        self.prt.set_neighbors(self.neighbors)

    def _index(self, hop: str | None) -> int:
        return LOCAL if hop is None else self.hop_index[hop]

    def sender_direction(self, sender: str | None) -> int:
        """The neighbour index a publication from ``sender`` came through (LOCAL: from its
        publisher); a stack whose brokers send beyond their neighbours maps others here."""
        return self._index(sender)

    # ------------------------------------------------------------------ advertisements

    def on_adv(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if msg.key in self.advs:
            return
        slot = self.srt.add_route(msg.key, msg.filter, self._index(sender), msg.client)
        self.advs[msg.key] = Route(msg, sender, slot)
        for hop in self.neighbors:
            if hop != sender:
                ctx.send(hop, msg)
        if sender is not None:
            subs = self.subs
            for key in self.prt.keys_of(self.prt.advertised(msg.filter, self.hop_index[sender])):
                self._route_subscription(subs[key], sender, ctx)

    def on_unadv(self, msg: Message, sender: str | None, ctx: Context) -> None:
        route = self.advs.pop(msg.key, None)
        if route is None:
            return
        self.srt.remove(msg.key)
        for hop in self.neighbors:
            if hop != sender:
                ctx.send(hop, msg)
        if sender is not None:
            subs = self.subs
            for key in self.prt.keys_of(self.prt.unadvertised(route.msg.filter, self.hop_index[sender])):
                self._unroute_subscription(subs[key], sender, ctx)

    # ------------------------------------------------------------------ subscriptions

    def on_sub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if msg.key in self.subs:
            return
        toward = self.srt.hop_counts(msg.filter)
        slot = self.prt.add_route(msg.key, msg.filter, self._index(sender), msg.client)
        self.prt.toward[slot] = toward
        route = self.subs[msg.key] = Route(msg, sender, slot)
        for hop in self.subscription_next_hops(route):
            self._route_subscription(route, hop, ctx)

    def on_unsub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        route = self.subs.pop(msg.key, None)
        if route is None:
            return
        for hop in self.prt.routed_hops(route.slot):
            self._unroute_subscription(route, self.neighbors[hop], ctx)
        self.prt.remove(msg.key)

    def subscription_next_hops(self, route: Route) -> list[str]:
        neighbors = self.neighbors
        return [neighbors[hop] for hop in self.prt.routable_hops(route.slot)]

    def _route_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        routed, index = self.prt.routed, self.hop_index[hop]
        if not routed[route.slot, index]:
            routed[route.slot, index] = True
            self.send_subscription(route, hop, ctx)

    def _unroute_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        self.prt.routed[route.slot, self.hop_index[hop]] = False
        self.send_unsubscription(route, hop, ctx)

    def send_subscription(self, route: Route, hop: str, ctx: Context) -> None:
        ctx.send(hop, route.msg)

    def forget_routed(self, route: Route, hop: str) -> None:
        """``hop`` holds the subscription from its other side now (a Delta-move turned the
        path round): no longer routed there, and nothing to withdraw."""
        self.prt.routed[route.slot, self.hop_index[hop]] = False

    def send_unsubscription(self, route: Route, hop: str, ctx: Context, headers: tuple = ()) -> None:
        ctx.send(hop, route.msg.unsubscription(headers=headers))

    # ------------------------------------------------------------------ publications

    def on_pub(self, msg: Message, sender: str | None, ctx: Context) -> None:
        if sender is None and self.check_conformance and not self._conforms(msg):
            ctx.event("nonconforming_publication", pub_id=msg.id, client=msg.client)
            return
        match = self.prt.publication(msg.publication, self.sender_direction(sender))
        msg = self.publication_arrived(msg, match, sender)
        if len(match.local):
            self._deliver(msg, match.local, ctx)
        hops = self.publication_next_hops(msg, match, sender)
        if hops:
            copy = msg.forwarded()  # immutable: every next hop can take the same copy
            for hop in hops:
                ctx.send(hop, copy)

    def publication_arrived(self, msg: Message, match: Match, sender: str | None) -> Message:
        return msg

    def _deliver(self, msg: Message, slots: np.ndarray, ctx: Context) -> None:
        """Deliver to those of the matching local subscriptions at ``slots`` whose incarnation's
        window holds the publication."""
        slots = self.prt.delivering(slots, msg.t_pub)
        if len(slots):
            self.deliver_locally(msg, slots, ctx)

    def deliver_locally(self, msg: Message, slots: np.ndarray, ctx: Context) -> None:
        ctx.deliver(msg, self.prt.ids_of(slots), self.prt.clients_of(slots))

    def publication_next_hops(self, msg: Message, match: Match, sender: str | None) -> list[str]:
        neighbors = self.neighbors
        return [neighbors[hop] for hop in match.groups]

    def _conforms(self, msg: Message) -> bool:
        advs = self.advs
        return any(conforms(msg.publication, advs[key].msg.filter) for key in self.srt.local_keys_of(msg.client))

    # ------------------------------------------------------------------ client moves

    def on_detach(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """The client ``msg.id`` leaves at ``msg.t_pub``: withdraw its advertisements now, and
        its subscriptions once the publications published before then have flushed here."""
        client, cut = msg.id, msg.t_pub
        # its local entries of this incarnation (not an earlier one still draining here)
        for key in self.srt.local_keys_of(client):
            if key[1] == msg.gen:
                self.on_unadv(Message("unadv", key[0], key[1], client=client), None, ctx)
        subs = self.subs
        routes = [subs[key] for key in self.prt.local_keys_of(client) if key[1] == msg.gen]
        for route in routes:
            self.prt.until[route.slot] = cut
        directions = {hop for route in routes for hop in self.prt.routable_hops(route.slot)}
        self._request_flush(_Flush(directions, tuple(route.msg for route in routes), client=client, gen=msg.gen,
                                   keys=[route.msg.key for route in routes], cut=cut), ctx)

    def on_move_flush(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """Pass a marker on toward every other neighbour with an advertisement intersecting one
        of the moving subscriptions it asks about; answer once they all have."""
        came_from, others = self.hop_index[sender], len(self.neighbors) - 1
        directions: set[int] = set()
        for item in msg.items:
            if len(directions) == others:  # every other neighbour already: ask no more
                break
            directions.update(hop for hop in self.srt.hop_counts(item.filter).nonzero()[0].tolist()
                              if hop != came_from)
        self._request_flush(_Flush(directions, msg.items, reply_to=sender, answer=msg.key), ctx)

    def on_move_flushed(self, msg: Message, sender: str | None, ctx: Context) -> None:
        direction = self.hop_index[sender]
        out = self.markers_out.get(direction)
        if out is not None and out[0] == msg.gen:  # not a late answer to a marker given up
            self._marker_answered(direction, ctx)

    def _request_flush(self, flush: _Flush, ctx: Context) -> None:
        """Send a marker each way ``flush`` waits for, or, where one is already out that way,
        let the request ride the next one (sent when that one comes back): markers trail
        everything sent before them, so a later one serves every request made before it,
        and a broker has at most one marker out per link however many clients move."""
        number = self.flush_count = self.flush_count + 1
        self.flushes[number] = flush
        for direction in sorted(flush.waiting):
            if direction in self.markers_out:
                self.markers_next.setdefault(direction, []).append(number)
            else:
                self._send_marker(direction, [number], ctx)
        if not flush.waiting:
            self._flush_done(number, ctx)

    def _send_marker(self, direction: int, numbers: list[int], ctx: Context) -> None:
        seq = self.flush_count = self.flush_count + 1
        self.markers_out[direction] = (seq, numbers)
        items = tuple(item for number in numbers for item in self.flushes[number].items)
        ctx.send(self.neighbors[direction], Message("move_flush", self.name, seq, items=items))

    def _marker_answered(self, direction: int, ctx: Context) -> None:
        _, numbers = self.markers_out.pop(direction)
        riding_next = self.markers_next.pop(direction, None)
        if riding_next:
            self._send_marker(direction, riding_next, ctx)
        for number in numbers:
            flush = self.flushes[number]
            flush.waiting.discard(direction)
            if not flush.waiting:
                self._flush_done(number, ctx)

    def _flush_done(self, number: int, ctx: Context) -> None:
        flush = self.flushes.pop(number)
        if flush.reply_to is not None:
            ctx.send(flush.reply_to, Message("move_flushed", *flush.answer))
            return
        for sub in flush.keys:
            if sub in self.subs:
                self.on_unsub(Message("unsub", sub[0], sub[1], client=flush.client), None, ctx)
        if flush.keys:
            ctx.event("move_drained", client=flush.client, gen=flush.gen, t_move_us=flush.cut,
                      subscriptions=len(flush.keys))

    # ------------------------------------------------------------------ recovery

    def link_restored(self, hop: str, ctx: Context) -> None:
        # what the neighbour had to answer was lost with the link (or with its restart)
        if self.hop_index[hop] in self.markers_out:
            self._marker_answered(self.hop_index[hop], ctx)
        flooded = [route.msg for route in self.advs.values() if route.last_hop != hop]
        for msg in flooded:
            ctx.send(hop, msg)
        recorder = _SentSubscriptions(ctx, hop)
        self.resend_subscriptions(hop, recorder)
        ctx.send(hop, Message("link_sync", self.name, headers=(
            ("advs", tuple(msg.key for msg in flooded)), ("subs", tuple(recorder.keys)))))

    def resend_subscriptions(self, hop: str, ctx: Context) -> None:
        for route in self.routed_toward(hop):
            self.send_subscription(route, hop, ctx)

    def sent_toward(self, hop: str) -> set[Key]:
        """The keys of the subscriptions neighbour ``hop`` holds from this broker."""
        return set(self.prt.routed_keys(self.hop_index[hop]))

    def routed_toward(self, hop: str) -> list[Route]:
        """The subscriptions routed toward neighbour ``hop``, in slot order."""
        subs = self.subs
        return [subs[key] for key in self.prt.routed_keys(self.hop_index[hop])]

    def on_link_sync(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """Withdraw what this broker holds from ``sender`` that the sync does not name."""
        advs, subs = set(msg.header("advs")), set(msg.header("subs"))
        for key, route in list(self.subs.items()):
            if route.last_hop == sender and key not in subs:
                self.on_unsub(Message("unsub", key[0], key[1], client=route.msg.client), sender, ctx)
        for key, route in list(self.advs.items()):
            if route.last_hop == sender and key not in advs:
                self.on_unadv(Message("unadv", key[0], key[1], client=route.msg.client), sender, ctx)

    def on_attach(self, msg: Message, sender: str | None, ctx: Context) -> None:
        """The client ``msg.id`` arrives at ``msg.t_pub`` and re-issues its advertisements and
        subscriptions; these deliver what is published from then on."""
        for item in msg.items:
            self.handle(item, None, ctx)
            if item.kind == "sub":
                self.prt.since[self.subs[item.key].slot] = msg.t_pub


class _SentSubscriptions:
    """A context that passes everything on and keeps, in order, the keys of the subscriptions
    that end up sent to ``hop`` (sent, and not withdrawn again)."""

    def __init__(self, ctx: Context, hop: str) -> None:
        self.ctx, self.hop = ctx, hop
        self.sent: dict[Key, None] = {}

    @property
    def keys(self) -> list[Key]:
        return list(self.sent)

    def send(self, destination: str, message: Message) -> None:
        if destination == self.hop:
            for item in message.items if message.kind.endswith("_batch") else (message,):
                if item.kind == "sub":
                    self.sent[item.key] = None
                elif item.kind == "unsub":
                    self.sent.pop(item.key, None)
        self.ctx.send(destination, message)

    def __getattr__(self, name: str):
        return getattr(self.ctx, name)
