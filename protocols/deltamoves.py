"""Delta-moves: a broker moves its primary link within its Delta-neighbourhood while
publications flow, none lost and none delivered twice.

Implements the Delta-move of "Opportunistic Multi-Path Forwarding in Content-Based
Publish/Subscribe Overlays" (Kazemzadeh and Jacobsen, Middleware 2012): broker A replaces its
primary link to neighbour B by one to C, a broker on B's side at most ``delta`` hops from A
(the old path A, B = P1, ..., Pk = C; the new one A, C, ..., B). Only A and the path's
brokers, the move's region, change state: the entries that came from A's side (S) turn round
along the path, and what crosses each path link is derived again.

Phases, in messages of their own kinds (rows of ``messages``):
1. Init: A locks the region (``dmove_lock`` along the old path to C, ``dmove_locked`` back
   along it). From its lock to the end of the move a region broker holds back the messages
   of clients and of brokers outside the region (publications never wait), so the lock
   wave trails everything sent toward C and ``dmove_locked`` everything sent toward A: when
   it reaches A, no routing message is under way inside the region. A broker refuses
   (``dmove_refused``, back to A, which tries again at its next tick) while it takes part in
   another move, or before every earlier move of the scenario that shares it has ended there:
   moves that share brokers run in the scenario's order, the order validation planned their
   paths in.
2. Update: ``dmove_relabel`` travels the old path with the keys of S's advertisements and
   subscriptions (A holds them all). Each broker keeps a snapshot of its routing state for the
   publications already under way, turns S's entries toward their new direction (A: B's
   side's toward C) and rewires its links (A: B -> C; B drops A; C adds A). Two sweeps then
   derive again what crosses each path link: from A along the new path to B, then back. At
   each step a broker sends the next one the subscriptions it routes there that the next one
   lacks (known from the snapshot, and over the new link from what the other end said it
   holds) and a ``dmove_sync`` naming all it routes there; the next one withdraws what it
   holds from that side that the sync does not name (covering decides afresh what it sends,
   as after a fault). Sweep one
   settles what flows away from A, sweep two what flows toward A; a subscription flowing one
   way never changes what a broker routes the other way, so two sweeps suffice.
3. Wrap-up: A switches to the new tree and the switch travels the new path
   (``dmove_switch``); drain markers (``dmove_drain``) travel the old path both ways behind
   the last publication routed on the old tree; a broker drained on its old links says
   ``dmove_end`` to its region neighbours, and once it has heard that from all of them it drops
   its snapshot, handles what it held back, and is done (events ``delta_move_started``,
   ``delta_move_done`` and, for a refused lock, ``delta_move_waiting`` at A).

Publications: inside the region a publication travels wholly on the old tree or wholly on the
new one. It enters the region once (both trees have the same links into it), and the broker
it enters decides: the old tree before that broker switched, the new one after. A region
broker stamps a new-tree publication (header ``tree``: the move's index); one from a region
neighbour without the stamp is on the old tree, unless that neighbour has said ``dmove_end``.
Old-tree publications are routed by the snapshots, new-tree ones by the re-derived state,
which is complete at every region broker before the first switch: no publication is lost or
delivered twice, and the subscriptions in place before the move receive throughout.

Under S1, S2 and SH copies skip brokers, and the brokers near the path decide where on the
old tree's views and anchors: the move's zone is every broker within ``delta`` hops of the
region (no other broker's view or anchors change, and none reaches a region broker in one
skip). Around the phases above:
0. Before the lock, A asks the zone (``dmove_zone``). A zone broker forwards on the primary
   tree from then until the move is over, tells each region broker that no copy skipping to
   it from here follows (``dmove_quiet``, behind any it sent), and says ``dmove_ready`` to A
   once it is done with every earlier move whose zone it is in: moves near a broker change its
   tree in the scenario's order. A locks when the whole zone is ready.
- A copy that reaches a region broker over a soft link during the move was sent on the old
  tree and goes to the snapshot. A region broker sends no drain marker before the whole zone
  is quiet, so nothing old reaches it, or passes through its snapshot, after its drains.
- A region broker that ends takes the new tree's view at once and tells the zone
  (``dmove_over``); a zone broker that has heard from every region broker takes the new
  tree's view (its other near moves are over: the ready rule), drops soft and candidate
  links out of reach, made primary or beyond ``fanout``, and forwards with soft links again.
- Anchors follow the tree: with moves, a subscription carries its subscriber's broker (header
  ``home``) and each broker derives the anchor from it on the tree it knows (the broker
  ``delta`` hops along the path, the anchor the rewriting rule gives), and a broker knows the
  direction of every broker, not only of those in its view (a broker still on the old view
  may get a copy from one the new tree brought near).
Publications are exact throughout (the interleaving races in tests/test_deltamoves.py hold
back old copies and the news that a move is over as long as links allow).

Deliberate differences from the paper:
- No duplicate suppression by publication id: the stamp keeps each publication on one tree.
- A move starts at A's first tick at or after its ``at`` (ticks: the sampling interval).
- Under S1/S2/SH the zone forwards on the primary tree while a move lasts (fewer skips, more
  hops for a few hundred milliseconds), and moves whose zones share a broker run one after
  the other; covering (anchored covering scopes) is not combined with those moves.
- Brokers learn the tree after a move from the scenario's move list, which all of them know
  (as they know the initial tree: protocols/softlinks.py), not from topology messages.
- Not combined with client moves or faults (validation refuses them).
- The region brokers' snapshots double their routing state's memory while a move lasts.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field

from .broker import Route, _SentSubscriptions
from .index import PROCESS_VOCABULARY
from .messages import Message


@dataclass(frozen=True)
class MoveSpec:
    """One move of the scenario: ``broker`` (A) moves its link to ``old`` (B) to ``new`` (C)
    along ``path`` (B, ..., C, on the tree the earlier moves leave)."""

    index: int
    at_us: int
    broker: str
    old: str
    new: str
    path: tuple[str, ...]
    zone: tuple[str, ...]  # the brokers within delta hops of the region (in name order)

    @property
    def region(self) -> tuple[str, ...]:
        return (self.broker, *self.path)


def plan_moves(overlay: dict[str, list[str]], moves, delta: int) -> list[MoveSpec]:
    """The moves, in order, each on the tree the earlier ones leave; ValueError names the move."""
    links = {broker: set(neighbours) for broker, neighbours in overlay.items()}
    specs = []
    for index, move in enumerate(moves):
        where, a, b, c = f"moves[{index}]", move["broker"], move["from"], move["to"]
        for key, name in (("broker", a), ("from", b), ("to", c)):
            if name not in links:
                raise ValueError(f"{where}.{key}: no broker {name!r} in the topology")
        if b not in links[a]:
            raise ValueError(f"{where}.from: {b} is not a primary neighbour of {a} when the move comes")
        path = _path_avoiding(links, a, b, c)
        if path is None or len(path) < 2:
            raise ValueError(f"{where}.to: {c} is not beyond {b} on {b}'s side of {a}")
        if len(path) > delta:
            raise ValueError(f"{where}.to: {c} is {len(path)} hops from {a}, beyond delta={delta}")
        zone = _within(links, [a, *path], delta)
        _apply(links, a, b, c)
        specs.append(MoveSpec(index, move["at_us"], a, b, c, tuple(path), zone))
    return specs


def _apply(links: dict[str, set[str]], a: str, b: str, c: str) -> None:
    links[a].discard(b), links[b].discard(a), links[a].add(c), links[c].add(a)


def _within(links: dict[str, set[str]], region: list[str], delta: int) -> tuple[str, ...]:
    """The brokers at most ``delta`` hops from one of ``region`` (the same before and after a
    move of that region: the tree attaches to the region's brokers as before)."""
    reached, frontier = set(region), list(region)
    for _ in range(delta):
        frontier = [n for node in frontier for n in links[node] if n not in reached]
        reached.update(frontier)
    return tuple(sorted(reached))


def tree_after(overlay: dict[str, list[str]], specs: list[MoveSpec], index: int) -> dict[str, list[str]]:
    """The primary tree once moves 0..``index`` are made (each broker's neighbours, sorted)."""
    links = {broker: set(neighbours) for broker, neighbours in overlay.items()}
    for spec in specs[: index + 1]:
        _apply(links, spec.broker, spec.old, spec.new)
    return {broker: sorted(neighbours) for broker, neighbours in links.items()}


def _path_avoiding(links: dict[str, set[str]], a: str, b: str, c: str) -> list[str] | None:
    """The tree path from ``b`` to ``c`` that does not pass ``a``, or None."""
    parent, frontier = {b: None}, [b]
    while frontier:
        reached = []
        for node in frontier:
            for neighbour in sorted(links[node]):
                if neighbour != a and neighbour not in parent:
                    parent[neighbour] = node
                    reached.append(neighbour)
        frontier = reached
    if c not in parent:
        return None
    path = [c]
    while path[-1] != b:
        path.append(parent[path[-1]])
    return path[::-1]


@dataclass
class _Move:
    """A move as one region broker takes part in it."""

    spec: MoveSpec
    left: str | None  # old path: the neighbour toward A
    right: str | None  # old path: the neighbour toward C
    outward: str | None  # new path: the neighbour away from A (sweep one's next step)
    inward: str | None  # new path: the neighbour toward A (sweep two's next step)
    snapshot: object = None  # the broker as it was, routing the old tree's publications
    switched: bool = False
    drained_from: set = field(default_factory=set)
    drains_sent: set = field(default_factory=set)
    ended_from: set = field(default_factory=set)
    end_sent: bool = False
    held_back: list = field(default_factory=list)  # (message, sender) until the move ends here
    partner_holds: frozenset = frozenset()  # A and C: the subscriptions the other end holds

    @property
    def neighbours(self) -> set[str]:
        return {self.left, self.right, self.outward, self.inward} - {None}

    @property
    def old_links(self) -> set[str]:
        return {self.left, self.right} - {None}


def _taking_part(spec: MoveSpec, name: str) -> _Move:
    old_path = [spec.broker, *spec.path]
    new_path = [spec.broker, *reversed(spec.path)]

    def around(path, i):
        return (path[i - 1] if i > 0 else None), (path[i + 1] if i + 1 < len(path) else None)

    left, right = around(old_path, old_path.index(name))
    inward, outward = around(new_path, new_path.index(name))
    return _Move(spec, left, right, outward, inward)


class _NamedOnly(_SentSubscriptions):
    """Records the subscriptions sent to ``hop`` but does not send those it holds already."""

    def __init__(self, ctx, hop: str, held: set) -> None:
        super().__init__(ctx, hop)
        self.held = held

    def send(self, destination: str, message: Message) -> None:
        if destination == self.hop and message.kind == "sub" and message.key in self.held:
            self.sent[message.key] = None
        else:
            super().send(destination, message)


class DeltaMoves:
    """Delta-moves of ``soft_links.moves`` (outermost mixin: it decides which routing state
    a message meets)."""

    def __init__(self, name, neighbors, settings=None, overlay=None) -> None:
        super().__init__(name, neighbors, settings, overlay)
        self.overlay = overlay
        self.move_specs = plan_moves(overlay, self.soft.moves, self.soft.delta)
        self.moves_pending = deque(spec for spec in self.move_specs if spec.broker == name)
        self.moves_done: set[int] = set()
        self.move: _Move | None = None
        # S1, S2, SH: the moves whose zone this broker is in, as it takes part in them
        self.zone_moves = [spec for spec in self.move_specs if name in spec.zone]
        self.fallback: set[int] = set()  # moves it forwards on the primary tree for
        self.ready_due: list[int] = []  # moves whose coordinator waits for its ready
        self.ready_from: dict[int, set[str]] = {}  # at A: the zone brokers ready for its move
        self.quiet_from: dict[int, set[str]] = {}  # at a region broker
        self.over_from: dict[int, set[str]] = {}
        self.finished: set[int] = set()  # moves over in the whole region
        if self.anchored:
            self._tree_paths(overlay)

    @property
    def anchored(self) -> bool:
        """Strategies S1, S2, SH: subscriptions carry anchors, copies skip brokers."""
        return self.soft.strategy != "S0"

    # ------------------------------------------------------------------ dispatch

    def handle(self, msg: Message, sender, ctx) -> None:
        move = self.move
        if move is None or msg.kind.startswith("dmove_"):
            super().handle(msg, sender, ctx)
        elif msg.kind == "pub":
            self._publication(msg, sender, move, ctx)
        elif sender not in move.neighbours:
            move.held_back.append((msg, sender))
        else:
            super().handle(msg, sender, ctx)

    def _publication(self, msg: Message, sender, move: _Move, ctx) -> None:
        from_region = sender in move.neighbours
        over_soft_link = sender is not None and not from_region and sender not in self.hop_index
        on_new_tree = (msg.header("tree") == move.spec.index or sender in move.ended_from
                       or (move.switched and not from_region and not over_soft_link))
        if on_new_tree:
            super().handle(msg.with_headers(tree=move.spec.index), sender, ctx)
        elif move.snapshot is not None:
            move.snapshot.handle(msg, sender, ctx)
        else:  # not relabelled yet: the live state is the old tree
            super().handle(msg, sender, ctx)

    def tick(self, ctx) -> None:
        super().tick(ctx)
        if self.moves_pending and ctx.now >= self.moves_pending[0].at_us:
            spec = self.moves_pending[0]
            if (not self.anchored or self._zone_ready(spec, ctx)) and self._may_lock(spec):
                self._lock(spec, ctx)

    def awaits_tick(self) -> bool:
        return bool(self.moves_pending) or super().awaits_tick()

    @staticmethod
    def _message(kind: str, spec: MoveSpec, **headers) -> Message:
        return Message(kind, f"move{spec.index}", spec.index, headers=tuple(sorted(headers.items())))

    # ------------------------------------------------------------------ init

    def _lock(self, spec: MoveSpec, ctx) -> None:
        self.move = _taking_part(spec, self.name)
        ctx.event("delta_move_started", move=spec.index, old=spec.old, new=spec.new, path=list(spec.path))
        ctx.send(self.move.right, self._message("dmove_lock", spec))

    def _may_lock(self, spec: MoveSpec) -> bool:
        earlier = (s.index for s in self.move_specs[: spec.index] if self.name in s.region)
        return self.move is None and all(index in self.moves_done for index in earlier)

    def on_dmove_lock(self, msg: Message, sender, ctx) -> None:
        spec = self.move_specs[msg.gen]
        if not self._may_lock(spec):
            ctx.send(sender, self._message("dmove_refused", spec))
            return
        self.move = _taking_part(spec, self.name)
        if self.move.right is None:
            ctx.send(self.move.left, self._message("dmove_locked", spec))
        else:
            ctx.send(self.move.right, msg)

    def on_dmove_refused(self, msg: Message, sender, ctx) -> None:
        move, self.move = self.move, None
        if move.left is None:
            ctx.event("delta_move_waiting", move=move.spec.index)
        else:
            ctx.send(move.left, msg)
        self._handle_held_back(move, ctx)

    def on_dmove_locked(self, msg: Message, sender, ctx) -> None:
        """Back along the old path behind everything its brokers sent toward A while the lock
        went out (once locked they hold back what comes from elsewhere, so nothing follows it).
        At A the region is quiet: turn round, and have the old path do the same."""
        if self.move.left is not None:
            ctx.send(self.move.left, msg)
            return
        old = self.move.spec.old
        advs = tuple(key for key, route in self.advs.items() if route.last_hop != old)
        subs = tuple(key for key, route in self.subs.items() if route.last_hop != old)
        from_old = tuple(key for key, route in self.subs.items() if route.last_hop == old)
        self._relabel(None, None)
        ctx.send(self.move.right, self._message("dmove_relabel", self.move.spec, advs=advs, subs=subs, held=from_old))

    # ------------------------------------------------------------------ update

    def on_dmove_relabel(self, msg: Message, sender, ctx) -> None:
        self._relabel(set(msg.header("advs")), set(msg.header("subs")))
        move = self.move
        if move.right is None:  # C: A holds its own side's and those B sent it
            move.partner_holds = frozenset(msg.header("held")) | frozenset(msg.header("subs"))
            held = tuple(self.subs)
            ctx.send(move.spec.broker, self._message("dmove_relabelled", move.spec, held=held))
        else:
            ctx.send(move.right, msg)

    def on_dmove_relabelled(self, msg: Message, sender, ctx) -> None:
        self.move.partner_holds = frozenset(msg.header("held"))
        self._sweep(self.move.outward, 1, ctx)

    def _relabel(self, s_advs: set | None, s_subs: set | None) -> None:
        """Keep a snapshot for the old tree, then turn S's entries (at A: all of B's) round
        from the old direction toward A's side to the new one, and rewire."""
        move, spec = self.move, self.move.spec
        move.snapshot = self._snapshot()
        before, after = (spec.old, spec.new) if move.left is None else (move.left, move.inward)
        if after not in self.hop_index:
            self.rewire([*self.neighbors, after])
        self._turn(before, after, s_advs, s_subs)
        dropped = {spec.broker: spec.old, spec.old: spec.broker}.get(self.name)
        if dropped is not None:
            self.rewire([n for n in self.neighbors if n != dropped])

    def _snapshot(self):
        move, self.move = self.move, None
        # work is charged to this broker; the rest is replaced, never changed in place; the
        # tables' vocabulary only grows, and a table re-encodes what its changes touch
        shared = [self.work, self.overlay, self.move_specs, self.zone_moves, self.view, PROCESS_VOCABULARY]
        if self.anchored:
            shared += [self._first_hop, self._anchor_of]
        try:
            return copy.deepcopy(self, {id(item): item for item in shared})
        finally:
            self.move = move

    def _turn(self, before: str, after: str, adv_keys: set | None, sub_keys: set | None) -> None:
        """Entries from ``before`` (those of ``adv_keys``/``sub_keys``; None: all) come from
        ``after`` now; the counts toward both follow their advertisements."""
        was, now = self.hop_index[before], self.hop_index[after]
        for key, route in self.advs.items():
            if route.last_hop == before and (adv_keys is None or key in adv_keys):
                self.srt.set_last_hop(route.slot, now)
                route.last_hop = after
                self.prt.unadvertised(route.msg.filter, was)
                self.prt.advertised(route.msg.filter, now)
        for key, route in self.subs.items():
            if route.last_hop == before and (sub_keys is None or key in sub_keys):
                self.prt.set_last_hop(route.slot, now)
                route.last_hop = after
                if self.prt.routed[route.slot, now]:
                    self.forget_routed(route, after)

    def _sweep(self, hop: str, phase: int, ctx) -> None:
        """Send ``hop`` every subscription routed there now that it does not hold already,
        and the sync naming them all."""
        index, prt = self.hop_index[hop], self.prt
        for route in self.subs.values():
            prt.routed[route.slot, index] = prt.toward[route.slot, index] > 0 and route.last_hop != hop
        sent = _NamedOnly(ctx, hop, self._held_by(hop))
        self.resend_subscriptions(hop, sent)
        ctx.send(hop, self._message("dmove_sync", self.move.spec, phase=phase, subs=tuple(sent.keys)))

    def _held_by(self, hop: str) -> set:
        """The subscriptions ``hop`` holds as the move began: those it passed here, and
        those sent there (relabelling keeps entries; what a neighbour withdraws since, it
        unsubscribes here first, and links are FIFO)."""
        snapshot = self.move.snapshot
        if hop not in snapshot.hop_index:  # the new link: what the other end said it holds
            return set(self.move.partner_holds)
        passed = {key for key, route in snapshot.subs.items() if route.last_hop == hop}
        return passed | snapshot.sent_toward(hop)

    def on_dmove_sync(self, msg: Message, sender, ctx) -> None:
        named = set(msg.header("subs"))
        stale = [route for key, route in self.subs.items() if route.last_hop == sender and key not in named]
        for route in stale:
            self.on_unsub(route.msg.unsubscription(), sender, ctx)
        move = self.move
        if msg.header("phase") == 1:
            self._sweep(move.outward, 1, ctx) if move.outward else self._sweep(move.inward, 2, ctx)
        elif move.inward:
            self._sweep(move.inward, 2, ctx)
        else:  # A: both sweeps done, the new tree is complete
            self._switch(ctx)

    # ------------------------------------------------------------------ wrap-up

    def on_dmove_switch(self, msg: Message, sender, ctx) -> None:
        self._switch(ctx)

    def _switch(self, ctx) -> None:
        move = self.move
        move.switched = True
        if move.outward is not None:
            ctx.send(move.outward, self._message("dmove_switch", move.spec))
        self._drain(ctx)

    def on_dmove_drain(self, msg: Message, sender, ctx) -> None:
        self.move.drained_from.add(sender)
        self._drain(ctx)

    def _drain(self, ctx) -> None:
        """Mark an old link drained once nothing more routed on the old tree can follow."""
        move = self.move
        if not move.switched or not self._zone_quiet(move.spec):
            return
        for side, other in ((move.left, move.right), (move.right, move.left)):
            if side is not None and side not in move.drains_sent and (other is None or other in move.drained_from):
                move.drains_sent.add(side)
                ctx.send(side, self._message("dmove_drain", move.spec))
        if not move.end_sent and move.drained_from >= move.old_links:
            move.end_sent = True
            for neighbour in sorted(move.neighbours):
                ctx.send(neighbour, self._message("dmove_end", move.spec))
            self._end(ctx)

    def on_dmove_end(self, msg: Message, sender, ctx) -> None:
        self.move.ended_from.add(sender)
        self._end(ctx)

    def _end(self, ctx) -> None:
        move = self.move
        if not (move.end_sent and move.ended_from >= move.neighbours):
            return
        self.move = None
        self.moves_done.add(move.spec.index)
        if move.left is None:
            self.moves_pending.popleft()
            ctx.event("delta_move_done", move=move.spec.index, old=move.spec.old, new=move.spec.new)
        if self.anchored:
            self._region_over(move.spec, ctx)
        self._handle_held_back(move, ctx)

    def _handle_held_back(self, move: _Move, ctx) -> None:
        for msg, sender in move.held_back:
            self.handle(msg, sender, ctx)

    # ------------------------------------------------------------------ the zone (S1, S2, SH)

    def _zone_ready(self, spec: MoveSpec, ctx) -> bool:
        """Whether every broker of the move's zone forwards on the primary tree, and is done
        with the earlier moves whose zone it is in; the first call asks them."""
        if spec.index not in self.ready_from:
            self.ready_from[spec.index] = set()
            for broker in spec.zone:
                if broker != self.name:
                    ctx.send(broker, self._message("dmove_zone", spec))
            self._enter_zone(spec, ctx)
        return self.ready_from[spec.index] >= set(spec.zone)

    def on_dmove_zone(self, msg: Message, sender, ctx) -> None:
        self._enter_zone(self.move_specs[msg.gen], ctx)

    def _enter_zone(self, spec: MoveSpec, ctx) -> None:
        """Forward on the primary tree from now until the move is over, and tell the region's
        brokers that no copy skipping to them from here follows (``dmove_quiet``)."""
        self.fallback.add(spec.index)
        for broker in spec.region:
            if broker != self.name:
                ctx.send(broker, self._message("dmove_quiet", spec))
        self.ready_due.append(spec.index)
        self._send_readies(ctx)

    def _send_readies(self, ctx) -> None:
        """Say ready for each move asked about once every earlier move whose zone this broker
        is in is over: the moves near a broker change its tree in the scenario's order."""
        for index in list(self.ready_due):
            if all(spec.index in self.finished for spec in self.zone_moves if spec.index < index):
                self.ready_due.remove(index)
                spec = self.move_specs[index]
                if spec.broker == self.name:
                    self._ready(spec, self.name, ctx)
                else:
                    ctx.send(spec.broker, self._message("dmove_ready", spec))

    def on_dmove_ready(self, msg: Message, sender, ctx) -> None:
        self._ready(self.move_specs[msg.gen], sender, ctx)

    def _ready(self, spec: MoveSpec, broker: str, ctx) -> None:
        self.ready_from[spec.index].add(broker)
        if self.ready_from[spec.index] >= set(spec.zone) and self._may_lock(spec):
            self._lock(spec, ctx)

    def on_dmove_quiet(self, msg: Message, sender, ctx) -> None:
        self.quiet_from.setdefault(msg.gen, set()).add(sender)
        if self.move is not None and self.move.spec.index == msg.gen:
            self._drain(ctx)

    def _zone_quiet(self, spec: MoveSpec) -> bool:
        """No copy the zone sent on the old tree over a soft link can still come (the snapshot
        would pass it on: drain markers wait for this)."""
        return not self.anchored or self.quiet_from.get(spec.index, set()) >= set(spec.zone) - {self.name}

    def _region_over(self, spec: MoveSpec, ctx) -> None:
        """This region broker is on the new tree: its view follows now (brokers done with the
        move may send it copies on the new tree), and the zone hears (``dmove_over``)."""
        self._adopt(spec, ctx)
        for broker in spec.zone:
            if broker != self.name:
                ctx.send(broker, self._message("dmove_over", spec))
        self._over(spec, self.name, ctx)

    def on_dmove_over(self, msg: Message, sender, ctx) -> None:
        self._over(self.move_specs[msg.gen], sender, ctx)

    def _over(self, spec: MoveSpec, broker: str, ctx) -> None:
        """Once every region broker is on the new tree, copies may skip on it again."""
        over = self.over_from.setdefault(spec.index, set())
        over.add(broker)
        if over >= set(spec.region):
            del self.over_from[spec.index]
            self.quiet_from.pop(spec.index, None)
            self.finished.add(spec.index)
            self.fallback.discard(spec.index)
            if self.name not in spec.region:
                self._adopt(spec, ctx)
            self._send_readies(ctx)

    def _adopt(self, spec: MoveSpec, ctx) -> None:
        """The tree once ``spec`` is made: the earlier moves near this broker are over (the
        ready rule), and those farther off change nothing within ``delta`` of it."""
        tree = tree_after(self.overlay, self.move_specs, spec.index)
        self._tree_paths(tree)
        self.adopt_tree(tree, ctx)

    def _tree_paths(self, tree: dict[str, list[str]]) -> None:
        """Per broker, the neighbour toward it and the anchor of a subscription from there
        (the broker ``delta`` hops along the path to it, or itself if nearer)."""
        delta, depth = self.soft.delta, {self.name: 0}
        first_hop, anchor_of, frontier = {}, {self.name: self.name}, [self.name]
        while frontier:
            reached = []
            for node in frontier:
                for neighbour in tree[node]:
                    if neighbour not in depth:
                        depth[neighbour] = depth[node] + 1
                        first_hop[neighbour] = neighbour if node == self.name else first_hop[node]
                        anchor_of[neighbour] = neighbour if depth[neighbour] <= delta else anchor_of[node]
                        reached.append(neighbour)
            frontier = reached
        self._first_hop, self._anchor_of = first_hop, anchor_of

    # hooks of the soft-link stack, on the tree as this broker knows it

    def primary_only(self) -> bool:
        return super().primary_only() or bool(self.fallback)

    def sender_direction(self, sender) -> int:
        if not self.anchored or sender is None or sender in self.hop_index:
            return super().sender_direction(sender)
        return self.hop_index[self._first_hop[sender]]

    def anchor(self, route: Route) -> str:
        """Derived from the subscriber's broker (header ``home``) on this broker's tree: the
        anchors the rewriting rule gives, and they follow the tree when it moves."""
        if not self.anchored:
            return super().anchor(route)
        return self._anchor_of[self._home(route)]

    def _home(self, route: Route) -> str:
        return self.name if route.last_hop is None else route.msg.header("home")

    def send_subscription(self, route: Route, hop: str, ctx, **kwargs) -> None:
        if self.anchored:
            route = Route(route.msg.with_headers(home=self._home(route)), route.last_hop, route.slot)
        super().send_subscription(route, hop, ctx, **kwargs)
