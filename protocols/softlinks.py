"""Soft links: direct links inside a broker's Delta-neighbourhood over which publications skip
brokers that would only forward them.

Implements "Opportunistic Multi-Path Forwarding in Content-Based Publish/Subscribe Overlays"
(Kazemzadeh and Jacobsen, Middleware 2012), the multipath forwarding of the Publiy broker.

- The overlay is the primary tree. A broker knows it within ``delta`` hops of itself (its
  ``DeltaView``) and holds, besides its primary links, soft links to brokers in that view:
  at most ``fanout`` links in all. Candidate links are being profiled and carry nothing.
- Subscriptions travel on primary links (the base broker's routing) and carry an anchor
  (header ``anchor``): the subscriber's broker, rewritten on the way so that it stays within
  ``delta`` hops of the broker that receives it (the broker on the path toward the old anchor
  at distance ``delta`` from the recipient). Each PRT entry records its anchor (column
  ``anchor``: the anchor's id in the broker's view).
- A publication goes, per primary branch with matching anchors (never the branch it came
  from), over held links only: S1 sends one copy to the farthest held broker on the common
  prefix of the primary paths to those anchors; S2 sends a copy to the nearest held broker
  toward each anchor (its nearest held ancestor, seen from this broker), dropping a target
  that lies beyond another target; SH is S2 while this broker's uplink utilisation is below
  ``high_utilisation`` and S1 from there on; S0 is the base broker. A broker that receives a
  copy over a soft link treats it as arriving from the primary branch leading to the sender.
- Adaptive links: every ``round`` a broker ranks its soft and candidate links by gain, the
  publications it sent toward the link's far end over the last ``profile_window`` times the
  primary hops the link skips (distance - 1); it holds the best up to ``fanout`` links in all,
  keeps as candidates the ``candidates`` unheld brokers of highest gain (they lie along its
  busiest paths), and does not take back a dropped link for ``block``. Link changes are messages of their own
  kinds (``soft_open``, ``soft_close``) and events (``soft_link_opened``/``_closed``).

Deliberate differences:
- Publiy keeps Delta + 1 hops for its Delta; a view here holds exactly ``delta`` hops, as in
  the paper.
- Publiy's hybrid strategy switches the other way round; SH here follows the paper (S2 while
  the uplink is not busy, S1 when it is).
- A view is computed from the overlay when the broker starts, not learnt from messages.
- Publiy scales a gain by a load factor that is always 1; the paper's factor is common to a
  broker's links, so it cannot change their ranking: gains here are not scaled.
- A publication is "sent toward" a broker when that broker lies on the primary path to one
  of the publication's matching anchors; that is how candidate links, which carry nothing,
  are profiled. Candidates are chosen by that gain, not drawn from the far side of the
  busiest links as such.
- Uplink capacity is in messages per second (no message sizes).
- Delta-moves (moving a primary link) are protocols/deltamoves.py; under S0 subscriptions
  carry no anchors, and with moves under S1/S2/SH anchors are derived from the subscriber's
  broker on the tree the broker knows (the same anchors on a fixed tree).
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from . import covering_sets
from .broker import Route, configured
from .deltamoves import DeltaMoves, plan_moves
from .errors import unknown_key
from .messages import Message
from .plugins import OFF, Needs, Protocol, View
from .routing import LOCAL
from .trees import meet

STRATEGIES = ("S0", "S1", "S2", "SH")


@dataclass(frozen=True)
class SoftLinkSettings:
    strategy: str = "S1"
    delta: int = 4
    fanout: int = 12
    candidates: int = 4
    adaptive: bool = True
    links: dict = field(default_factory=dict)  # broker -> {"soft": [...], "candidate": [...]}
    round_us: int = 30_000_000
    profile_window_us: int = 20_000_000
    block_us: int = 120_000_000
    high_utilisation: float = 0.8
    moves: tuple = ()  # Delta-moves: {at_us, broker, from, to} each (protocols/deltamoves.py)
    covering_sets_us: int = 0  # how often the run's covering sets are measured (protocols/covering_sets.py); 0: never

    DURATIONS = {"round": "round_us", "profile_window": "profile_window_us", "block": "block_us",
                 "covering_sets": "covering_sets_us"}

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "SoftLinkSettings":
        """Settings from a scenario's ``protocol.soft_links`` mapping; ValueError names the key."""
        known = sorted(k for k in cls.__dataclass_fields__ if not k.endswith("_us")) + sorted(cls.DURATIONS)
        values = dict(given)
        for key in values:
            if key not in known:
                raise ValueError(unknown_key(key, known))
        for key, field_name in cls.DURATIONS.items():
            if key in values:
                values[field_name] = parse_duration(values.pop(key), key)
        if values.setdefault("strategy", cls.strategy) not in STRATEGIES:
            raise ValueError(f"strategy: expected one of {', '.join(STRATEGIES)}, got {values['strategy']!r}")
        for key, least in (("delta", 1), ("fanout", 1), ("candidates", 0)):
            value = values.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{key}: expected an integer of at least {least}, got {value!r}")
        if not isinstance(values.get("adaptive", True), bool):
            raise ValueError(f"adaptive: expected true or false, got {values['adaptive']!r}")
        share = values.get("high_utilisation", cls.high_utilisation)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ValueError(f"high_utilisation: expected a fraction in (0, 1], got {share!r}")
        values["links"] = _parse_links(values.get("links") or {})
        values["moves"] = _parse_moves(values.get("moves") or [], parse_duration)
        return cls(**values)

    def check_links(self, overlay: dict[str, list[str]]) -> None:
        """The static links against the overlay; ValueError names the key."""
        for broker, held in self.links.items():
            where = f"links.{broker}"
            if broker not in overlay:
                raise ValueError(f"{where}: no broker {broker!r} in the topology")
            view = DeltaView(broker, overlay, self.delta)
            for role in ("soft", "candidate"):
                for peer in held[role]:
                    if peer == broker or peer in overlay[broker]:
                        raise ValueError(f"{where}.{role}: {peer} is {broker} itself or a primary neighbour")
                    if peer not in view.id:
                        raise ValueError(f"{where}.{role}: {peer} is not within delta={self.delta} hops of {broker}")
            if len(overlay[broker]) + len(held["soft"]) > self.fanout:
                raise ValueError(f"{where}.soft: {broker} has {len(overlay[broker])} primary links, so at most "
                                 f"{max(self.fanout - len(overlay[broker]), 0)} soft links fit in fanout={self.fanout}")
            if len(held["candidate"]) > self.candidates:
                raise ValueError(f"{where}.candidate: at most candidates={self.candidates} candidate links")
        plan_moves(overlay, self.moves, self.delta)


def _parse_moves(given, parse_duration) -> tuple[dict, ...]:
    if not isinstance(given, list):
        raise ValueError(f"moves: expected a list of {{at, broker, from, to}} mappings, got {given!r}")
    moves = []
    for i, move in enumerate(given):
        where = f"moves[{i}]"
        if not isinstance(move, dict) or set(move) != {"at", "broker", "from", "to"}:
            raise ValueError(f"{where}: expected a mapping with exactly the keys at, broker, from and to, got {move!r}")
        for key in ("broker", "from", "to"):
            if not isinstance(move[key], str):
                raise ValueError(f"{where}.{key}: expected a broker name, got {move[key]!r}")
        moves.append({"at_us": parse_duration(move["at"], f"{where}.at"),
                      **{key: move[key] for key in ("broker", "from", "to")}})
    return tuple(moves)


def _parse_links(given) -> dict[str, dict[str, list[str]]]:
    if not isinstance(given, dict):
        raise ValueError(f"links: expected a mapping of broker -> {{soft: [...], candidate: [...]}}, got {given!r}")
    links = {}
    for broker, held in sorted(given.items()):
        held = held or {}
        if not isinstance(held, dict) or set(held) - {"soft", "candidate"}:
            raise ValueError(f"links.{broker}: expected a mapping with 'soft' and 'candidate' lists")
        parsed = {}
        for role in ("soft", "candidate"):
            peers = held.get(role) or []
            if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
                raise ValueError(f"links.{broker}.{role}: expected a list of broker names, got {peers!r}")
            parsed[role] = sorted(set(peers))
        if set(parsed["soft"]) & set(parsed["candidate"]):
            raise ValueError(f"links.{broker}: a broker is both a soft and a candidate link")
        links[str(broker)] = parsed
    return links


class DeltaView:
    """The primary tree within ``delta`` hops of ``root``, seen from there: per broker (by id,
    ids in name order) its parent toward the root, its depth and the primary branch (the
    root's neighbour) it lies in."""

    def __init__(self, root: str, overlay: dict[str, list[str]], delta: int) -> None:
        parent_name, depth, frontier = {root: None}, {root: 0}, [root]
        for level in range(1, delta + 1):
            reached = []
            for node in frontier:
                for neighbour in overlay[node]:
                    if neighbour not in depth:
                        parent_name[neighbour], depth[neighbour] = node, level
                        reached.append(neighbour)
            frontier = reached
        self.nodes = sorted(depth)
        self.id = {name: i for i, name in enumerate(self.nodes)}
        self.root = self.id[root]
        self.parent = [-1 if parent_name[n] is None else self.id[parent_name[n]] for n in self.nodes]
        self.depth = [depth[n] for n in self.nodes]
        self.branch = [self._branch(i) for i in range(len(self.nodes))]  # an id (the root for itself)

    def _branch(self, node: int) -> int:
        while self.depth[node] > 1:
            node = self.parent[node]
        return node

    def ancestors(self, node: int):
        """The brokers strictly between the root and ``node``, nearest ``node`` first."""
        node = self.parent[node]
        while node != self.root and node != -1:
            yield node
            node = self.parent[node]

    def meet(self, a: int, b: int) -> int:
        """The farthest broker from the root on both primary paths (root -> a, root -> b)."""
        return meet(self.parent, self.depth, a, b)


class SoftLinks:
    # soft links are opened between brokers that are not overlay neighbours
    opens_links = True
    # brokers of the view two or more hops away that the last round found publications sent
    # toward: the links this broker could gain by (None before a round, and under S0 or fixed
    # links; a class default, so that a broker restored from an older checkpoint has it)
    gainful_peers: int | None = None

    def __init__(self, name, neighbors, settings=None, overlay=None) -> None:
        super().__init__(name, neighbors, settings, overlay)
        self.soft = configured(self.settings, "soft_links", SoftLinkSettings)
        if overlay is None:
            raise ValueError(f"broker {name}: soft links need the overlay (make_broker's overlay)")
        self.view = DeltaView(name, overlay, self.soft.delta)
        static = self.soft.links.get(name, {"soft": [], "candidate": []})
        self.soft_links: list[str] = list(static["soft"])
        self.candidate_links: list[str] = list(static["candidate"])
        self.blocked_until: dict[str, int] = {}
        self.uplink_utilisation = 0.0  # the runtime's figure at the last tick
        self.prt.add_column("anchor")
        # publications sent toward each view id, per tenth of the profile window (oldest first)
        self._bucket_us = max(self.soft.profile_window_us // 10, 1)
        self._sent_toward: deque[tuple[int, np.ndarray]] = deque()
        self._next_round = self.soft.round_us
        self._now = 0
        self._update_held()

    # ------------------------------------------------------------------ links held

    def _update_held(self) -> None:
        """Per view id, its nearest held broker on the path from here (itself if held; the
        primary neighbours are held, so every broker but this one has one)."""
        view = self.view
        held = {view.id[n] for n in self.neighbors} | {view.id[n] for n in self.soft_links}

        def nearest_held(node: int) -> int:
            if node in held or node == view.root:
                return node
            return next(a for a in view.ancestors(node) if a in held)

        self._held_toward = [nearest_held(node) for node in range(len(view.nodes))]

    def protocol_samples(self) -> dict:
        return {**super().protocol_samples(), "soft_links": len(self.soft_links), "gainful_peers": self.gainful_peers}

    # ------------------------------------------------------------------ subscriptions and anchors

    def on_sub(self, msg: Message, sender, ctx) -> None:
        super().on_sub(msg, sender, ctx)
        route = self.subs.get(msg.key)
        if route is not None and route.msg is msg and self.soft.strategy != "S0":
            self._record_anchor(route)

    def _record_anchor(self, route: Route) -> None:
        self.prt.columns["anchor"][route.slot] = self.view.id[self.anchor(route)]

    def anchor(self, route: Route) -> str:
        """The anchor this broker records for a subscription (the one it arrived with)."""
        if route.last_hop is None:
            return self.name
        return route.msg.header("anchor", route.last_hop)

    def anchor_sent(self, route: Route) -> str:
        """The anchor a neighbour receives with the subscription: unchanged while it is within
        ``delta`` hops of that neighbour, else the broker ``delta`` hops from the neighbour on
        the way to it (one hop nearer here). Anchors lie on the subscription's side, so the
        anchor sent is the same toward every neighbour."""
        view = self.view
        anchor = view.id[self.anchor(route)]
        if view.depth[anchor] + 1 > self.soft.delta:
            anchor = view.parent[anchor]
        return view.nodes[anchor]

    def send_subscription(self, route: Route, hop: str, ctx, **kwargs) -> None:
        if self.soft.strategy == "S0":  # the primary tree: no anchors
            super().send_subscription(route, hop, ctx, **kwargs)
            return
        anchored = route.msg.with_headers(anchor=self.anchor_sent(route))
        super().send_subscription(Route(anchored, route.last_hop, route.slot), hop, ctx, **kwargs)

    def covering_scope(self, route: Route, hop: str):
        """Covering (lazy, active) compares subscriptions with one anchor only: a publication
        routed toward a coverer's anchor may skip the broker where a covered subscription
        with another anchor branches off. S0 never skips a broker: the neighbour's scope."""
        if self.soft.strategy == "S0":
            return super().covering_scope(route, hop)
        return hop, self.anchor_sent(route)

    def covering_scopes_toward(self, hop: str) -> list:
        anchored = [s for s in self.covering_sent if isinstance(s, tuple) and s[0] == hop]
        return super().covering_scopes_toward(hop) + anchored

    # ------------------------------------------------------------------ publications

    def sender_direction(self, sender: str | None) -> int:
        if sender is None or sender in self.hop_index:
            return super().sender_direction(sender)
        view = self.view
        return self.hop_index[view.nodes[view.branch[view.id[sender]]]]

    def on_pub(self, msg: Message, sender, ctx) -> None:
        self._now = ctx.now
        super().on_pub(msg, sender, ctx)

    def publication_next_hops(self, msg: Message, match, sender) -> list[str]:
        if self.primary_only() or not match.groups:
            return super().publication_next_hops(msg, match, sender)
        slots = match.slots
        last_hops = self.prt.last_hops(slots)
        toward = (last_hops != LOCAL) & (last_hops != self.sender_direction(sender))
        anchors = sorted(set(self.prt.columns["anchor"][slots[toward]].tolist()))
        if self.soft.adaptive:
            self._record_sent_toward(anchors)
        targets = self._s1_targets(anchors) if self.strategy_now() == "S1" else self._s2_targets(anchors)
        nodes = self.view.nodes
        return [nodes[t] for t in sorted(targets)]

    def primary_only(self) -> bool:
        """Forward publications on the primary tree only (strategy S0), and change no links."""
        return self.soft.strategy == "S0"

    def strategy_now(self) -> str:
        strategy = self.soft.strategy
        if strategy == "SH":
            return "S1" if self.uplink_utilisation >= self.soft.high_utilisation else "S2"
        return strategy

    def _s1_targets(self, anchors: list[int]) -> list[int]:
        """Per branch, the farthest held broker on the common prefix of the paths to its anchors."""
        view, meets = self.view, {}
        for anchor in anchors:
            branch = view.branch[anchor]
            meets[branch] = anchor if branch not in meets else view.meet(meets[branch], anchor)
        return [self._held_toward[meet] for meet in meets.values()]

    def _s2_targets(self, anchors: list[int]) -> list[int]:
        """The nearest held broker toward each anchor, but those beyond another target."""
        chosen = {self._held_toward[anchor] for anchor in anchors}
        view = self.view
        return [t for t in chosen if not any(a in chosen for a in view.ancestors(t))]

    # ------------------------------------------------------------------ adaptive links

    def _record_sent_toward(self, anchors: list[int]) -> None:
        view = self.view
        toward = set(anchors)
        for anchor in anchors:
            toward.update(view.ancestors(anchor))
        bucket = self._now // self._bucket_us
        if not self._sent_toward or self._sent_toward[-1][0] != bucket:
            self._sent_toward.append((bucket, np.zeros(len(view.nodes), np.int64)))
        self._sent_toward[-1][1][list(toward)] += 1

    def tick(self, ctx) -> None:
        super().tick(ctx)
        self.uplink_utilisation = getattr(ctx, "uplink_utilisation", 0.0)
        if self.soft.adaptive and not self.primary_only() and ctx.now >= self._next_round:
            self._next_round = ctx.now + self.soft.round_us
            self._adapt(ctx)

    def link_gains(self, now: int) -> dict[int, int]:
        """Per view id at two or more hops, publications sent toward it in the profile window
        (to a tenth of the window) times the primary hops a direct link would skip."""
        first = self._first_bucket(now)
        counts = np.zeros(len(self.view.nodes), np.int64)
        for bucket, sent in self._sent_toward:
            if bucket >= first:
                counts += sent
        depth = self.view.depth
        return {node: int(counts[node]) * (depth[node] - 1) for node in np.flatnonzero(counts).tolist()
                if depth[node] >= 2}

    def _first_bucket(self, now: int) -> int:
        return (now - self.soft.profile_window_us) // self._bucket_us

    def _adapt(self, ctx) -> None:
        """One round: hold the best-gaining soft and candidate links, choose new candidates."""
        now, view = ctx.now, self.view
        sent, first = self._sent_toward, self._first_bucket(now)
        while sent and sent[0][0] < first:
            sent.popleft()
        gains = self.link_gains(now)
        self.gainful_peers = len(gains)
        names = view.nodes
        room = max(self.soft.fanout - len(self.neighbors), 0)
        ranked = sorted(set(self.soft_links) | set(self.candidate_links),
                        key=lambda n: (-gains.get(view.id[n], 0), n))
        keep = [n for n in ranked if gains.get(view.id[n], 0) > 0 or n in self.soft_links][:room]
        for peer in sorted(set(self.soft_links) - set(keep)):
            self.blocked_until[peer] = now + self.soft.block_us
            self._link_changed("close", peer, gains.get(view.id[peer], 0), ctx)
        for peer in sorted(set(keep) - set(self.soft_links)):
            self._link_changed("open", peer, gains.get(view.id[peer], 0), ctx)
        self.soft_links = sorted(keep)
        self.blocked_until = {n: t for n, t in self.blocked_until.items() if t > now}
        held = set(self.soft_links) | set(self.neighbors) | {self.name}
        eligible = [n for n in names if n not in held and n not in self.blocked_until and view.depth[view.id[n]] >= 2]
        self.candidate_links = sorted(heapq.nsmallest(
            self.soft.candidates, [n for n in eligible if gains.get(view.id[n], 0) > 0],
            key=lambda n: (-gains[view.id[n]], n)))
        self._update_held()

    def adopt_tree(self, overlay: dict[str, list[str]], ctx) -> None:
        """The primary tree changed near this broker (a Delta-move): its view follows, links
        that left the view or became primary close, and anchors are recorded again."""
        old, view = self.view, DeltaView(self.name, overlay, self.soft.delta)
        self.view = view
        self._sent_toward = deque((bucket, _reindexed(sent, old, view)) for bucket, sent in self._sent_toward)
        gains = self.link_gains(self._now)
        if self.gainful_peers is not None:  # rounds have counted them: count them in the new view
            self.gainful_peers = len(gains)

        def holdable(peer: str) -> bool:
            return peer in view.id and view.depth[view.id[peer]] >= 2

        room = max(self.soft.fanout - len(self.neighbors), 0)
        ranked = sorted(filter(holdable, self.soft_links), key=lambda n: (-gains.get(view.id[n], 0), n))
        for peer in sorted(set(self.soft_links) - set(ranked[:room])):
            self._link_changed("close", peer, gains.get(view.id.get(peer, -1), 0), ctx, reason="tree moved")
        self.soft_links = sorted(ranked[:room])
        self.candidate_links = [peer for peer in self.candidate_links if holdable(peer)]
        for route in self.subs.values():
            self._record_anchor(route)
        self._update_held()

    def _link_changed(self, change: str, peer: str, gain: int, ctx, **detail) -> None:
        """Tell ``peer`` that a soft link to it opens or closes (``change``), and record it."""
        ctx.send(peer, Message(f"soft_{change}", f"{self.name}>{peer}"))
        event = {"open": "soft_link_opened", "close": "soft_link_closed"}[change]
        ctx.event(event, peer=peer, gain=gain, **detail)

    def on_soft_open(self, msg: Message, sender, ctx) -> None:
        """A broker opened a soft link to this one: nothing to set up, copies may come."""

    on_soft_close = on_soft_open


def _reindexed(counts: np.ndarray, old: DeltaView, new: DeltaView) -> np.ndarray:
    """Per-view-id counts moved from ``old``'s ids to ``new``'s (brokers that left are dropped)."""
    moved = np.zeros(len(new.nodes), counts.dtype)
    for node in np.flatnonzero(counts).tolist():
        name = old.nodes[node]
        if name in new.id:
            moved[new.id[name]] = counts[node]
    return moved


def _refused(view: View, settings: dict) -> str | None:
    return _moves_refused(view, settings) or _covering_sets_refused(view, settings)


def _covering_sets_refused(view: View, settings: dict) -> str | None:
    """Covering sets are measured from where subscriptions were issued, on a fixed tree."""
    if not settings.get("covering_sets_us"):
        return None
    if settings.get("moves") or view.moving_clients:
        return ("its covering_sets are not measured with Delta-moves or clients that move (a subscription's anchors "
                "are taken from where it was issued, on a fixed tree)")
    return None


def _measure(settings: dict, spec, read) -> dict[str, dict]:
    """The run's covering sets (protocols/covering_sets.py), when asked for."""
    soft = SoftLinkSettings(**settings)
    if not soft.covering_sets_us:
        return {}
    table = covering_sets.measure(spec.graph, spec.injections, soft.strategy, soft.delta, soft.links,
                                  soft.covering_sets_us, read)
    return {"covering_sets": table}


def _moves_refused(view: View, settings: dict) -> str | None:
    """Delta-moves need the links around them fixed: no faults, no clients that move, and
    covering only where anchors stay put (strategy S0)."""
    if not settings.get("moves"):  # (settings that failed to parse are reported on their own)
        return None
    if view.faults:
        return ("its moves are not combined with faults (a link that fails during a move would leave its region "
                "half turned; set faults to null)")
    if view.moving_clients:
        return ("its moves are not combined with a workload whose clients move (their handoff markers count on "
                "fixed links)")
    if settings.get("strategy", SoftLinkSettings.strategy) != "S0" and view.protocol["covering"] != "none":
        return (f"its moves under strategy {settings['strategy']} are not combined with protocol.covering "
                f"{view.protocol['covering']!r} (covering compares subscriptions per anchor, and a move changes "
                "anchors; use covering none or strategy S0)")
    return None


PROTOCOL = Protocol(
    key="soft_links",
    paper="Opportunistic Multi-Path Forwarding in Content-Based Publish/Subscribe Overlays",
    summary="soft links within a Delta-neighbourhood over which publications skip pure forwarders (strategies "
            "S0, S1, S2, SH, links ranked by gain), and Delta-moves of primary links",
    settings=SoftLinkSettings,
    mixins=lambda settings: (DeltaMoves, SoftLinks) if settings["moves"] else (SoftLinks,),
    classes=(DeltaMoves, SoftLinks),
    order=40,
    needs=(Needs("covering", ("none", "lazy", "active"),
                 "packing's batched bursts are not built for covering compared per anchor"),
           Needs("pruning", (OFF,), "pruning's statistics count the primary tree's hops, which soft-link copies "
                                    "skip")),
    refusal=_refused,
    conditions="with moves: no faults, no clients that move, and covering none unless the strategy is S0; "
               "covering_sets: no moves and no clients that move",
    check_overlay=lambda settings, overlay: SoftLinkSettings(**settings).check_links(overlay),
    measure=_measure,
)
