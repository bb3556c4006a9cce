"""Content-aware multi-tree routing: subscription clusters with one dissemination tree each.

Implements the seed paper on content-aware multi-tree routing (subscription clusters, a cost
model from published samples, low-stretch spanning trees): Algorithm 1 (COMPUTETREE),
Algorithm 2 (MULT2), Algorithm 3 (MULT) and the coordinator of its section VI, with the
baselines SINGLE, SPT and OPT. The algorithms live in protocols/trees.py; this module is the
broker that routes on their trees, on any connected overlay (cycles allowed).

- Every broker knows the overlay and the coordinator's breadth-first tree T0 (neighbours in
  name order). Control messages travel on T0: up to the coordinator (``mt_register``,
  ``mt_unregister``, ``mt_sample``, ``mt_ready``) and down from it (``mt_install``,
  ``mt_activate``).
- Until the first configuration is active (epoch 0), a publication floods T0 and every broker
  delivers to its local matching subscribers: exact, and as costly as routing gets.
- A subscriber's broker registers each subscription with the coordinator, and a publisher's
  broker samples each publication with probability ``sample`` (a seeded generator per
  broker) and ships it up. The coordinator matches samples against every registered
  subscription, keeps the last ``window`` of them, and every ``recompute`` plans a
  configuration with ``algorithm``: clusters of subscription groups (a group is the
  subscriptions with one filter), one tree each, and cluster 0 on T0 for the groups no sample
  matched (and any group that appears later). It installs the plan when its cost on the
  window's samples improves on the current one's by more than ``improvement`` (relative); the
  first plan always. SPT and OPT install once.
- An install (epoch e) carries the trees and every registered subscription with its home
  broker and cluster. Each broker derives, per subscription, the tree neighbour toward its
  home on its cluster's tree (one vectorised query per tree). A subscription the plan misses
  (registered after the coordinator planned) is flooded by its home on its cluster's tree,
  with an echo; a broker reports ``mt_ready`` once its floods are acknowledged, and the
  coordinator activates the epoch when every broker is ready. A publication is routed in the
  epoch active at its publisher's broker, and carries it: every broker on its way holds that
  epoch (brokers keep the previous epoch for copies in flight), so none is lost or
  duplicated while trees are swapped.
- A publication goes on the tree of every cluster with a matching subscription and, on each
  tree, only toward neighbours with matching subscriptions of that cluster; each copy
  delivers to the local subscribers of its own cluster. New subscriptions flood the tree of
  their cluster (that of their group, else 0) in every epoch the broker holds;
  unsubscriptions flood likewise and remove the subscription everywhere.
- OPT routes each publication on its own approximate Steiner tree, computed at the
  publisher's broker over the brokers of its matching subscriptions and carried by the copy.

Deliberate differences: trees are computed in the hop metric (the cost is copies, one per
edge); a cluster is a set of groups, never a split of one filter's subscribers; MULT2 only
considers merging clusters that share a sampled document, and MULT merges all clusters at
once when no two share one (see trees.py); groups without samples ride T0, not a SINGLE tree.
SemCast is not implemented yet. Advertisements stay at their broker (they only serve the
conformance check): routing needs none.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

import networkx as nx
import numpy as np

from . import trees
from .broker import Route
from .index import FilterIndex
from .language import Filter
from .messages import Message
from .routing import LOCAL

ALGORITHMS = ("MULT", "MULT2", "SINGLE", "SPT", "OPT")
CONTROL_KINDS = ("mt_register", "mt_unregister", "mt_sample", "mt_install", "mt_delta", "mt_delta_ack",
                 "mt_ready", "mt_activate", "mt_sub", "mt_unsub")
UNKNOWN = -2  # per-epoch hop of a subscription the epoch does not route


@dataclass(frozen=True)
class MultitreeSettings:
    algorithm: str = "MULT"
    sample: float = 0.03
    window_us: int = 600_000_000
    recompute_us: int = 60_000_000
    improvement: float = 0.05
    coordinator: str | None = None

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "MultitreeSettings":
        """Settings from a scenario's ``protocol.multitree`` mapping; ValueError names the key."""
        known = ("algorithm", "sample", "window", "recompute", "improvement", "coordinator")
        values = dict(given)
        for key in values:
            if key not in known:
                raise ValueError(f"{key}: unknown key (known: {', '.join(sorted(known))})")
        for key in ("window", "recompute"):
            if key in values:
                values[key + "_us"] = parse_duration(values.pop(key), key)
        if values.setdefault("algorithm", cls.algorithm) not in ALGORITHMS:
            raise ValueError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {values['algorithm']!r}")
        sample = values.get("sample", cls.sample)
        if isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0 < sample <= 1:
            raise ValueError(f"sample: expected a probability in (0, 1], got {sample!r}")
        improvement = values.get("improvement", cls.improvement)
        if isinstance(improvement, bool) or not isinstance(improvement, (int, float)) or not 0 <= improvement < 1:
            raise ValueError(f"improvement: expected a relative improvement in [0, 1), got {improvement!r}")
        coordinator = values.get("coordinator")
        if coordinator is not None and not isinstance(coordinator, str):
            raise ValueError(f"coordinator: expected a broker name, got {coordinator!r}")
        if values.get("recompute_us", 1) <= 0 or values.get("window_us", 1) <= 0:
            raise ValueError("window and recompute must be positive durations")
        return cls(**values)

    def check_brokers(self, brokers) -> None:
        if self.coordinator is not None and self.coordinator not in brokers:
            raise ValueError(f"coordinator: {self.coordinator!r} is not a broker of the overlay")


@dataclass(frozen=True)
class Plan:
    """What an install carries (one object shared by every broker; never changed)."""

    epoch: int
    trees: tuple[trees.Tree, ...]
    subs: tuple[tuple[tuple[str, int], Filter, int, int], ...]  # (key, filter, home index, cluster)
    cluster_of_group: dict[str, int]
    opt: bool = False


class Overlay:
    """The overlay as every broker of a host sees it: names, graph and the coordinator's T0."""

    def __init__(self, neighbours: dict[str, list[str]], coordinator: str) -> None:
        self.names = sorted(neighbours)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.names)
        self.graph.add_edges_from((a, b) for a, others in neighbours.items() for b in others)
        self.coordinator = coordinator
        self.base_tree = trees.bfs_tree(self.graph, coordinator)
        self.base = trees.Tree(self.base_tree, self.names)


_OVERLAYS: dict[tuple[int, str], tuple[dict, Overlay]] = {}


def _shared_overlay(neighbours: dict, coordinator: str) -> Overlay:
    """One Overlay per neighbour mapping and coordinator in this process."""
    found = _OVERLAYS.get((id(neighbours), coordinator))
    if found is None or found[0] is not neighbours:
        found = _OVERLAYS[(id(neighbours), coordinator)] = (neighbours, Overlay(neighbours, coordinator))
    return found[1]


class _Epoch:
    """A broker's view of one installed plan: per table slot, the cluster (-1: not routed in
    this epoch) and the neighbour index toward the subscription's home (LOCAL: here)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.tree_hops: dict[int, list[str]] = {}  # cluster -> this broker's tree neighbours


class Multitree:
    # a broker only ever sends to its overlay neighbours
    opens_links = False

    def __init__(self, name, neighbors, settings=None, overlay=None) -> None:
        super().__init__(name, neighbors, settings, overlay)
        given = self.settings["multitree"]
        self.multitree = given if isinstance(given, MultitreeSettings) else MultitreeSettings(**given)
        overlay = overlay or {name: list(neighbors)}
        self.overlay = _shared_overlay(overlay, self.multitree.coordinator or min(overlay))
        self.me = self.overlay.index[name]
        self.neighbour_of = np.full(len(self.overlay.names), UNKNOWN, np.int32)  # broker index -> neighbour index
        for i, hop in enumerate(self.neighbors):
            self.neighbour_of[self.overlay.index[hop]] = i
        self.neighbour_of[self.me] = LOCAL
        self.prt.add_column("home")
        self.epochs: dict[int, _Epoch] = {}
        self.active = 0
        self.gone: set = set()  # keys of withdrawn subscriptions (late floods must not revive them)
        self.waiting: dict[int, list] = {}  # epoch -> (message, sender)s that came before its install
        self.floods: dict[str, list] = {}  # flood id -> [upstream (None: started here), acks awaited, epoch]
        self.unready: dict[int, int] = {}  # epoch -> floods started here, not yet acknowledged
        self.sampler = random.Random(f"{self.settings.get('seed', 0)}/multitree/{name}")
        self.coordinating = name == self.overlay.coordinator
        if self.coordinating:
            self.registry: dict[tuple[str, int], tuple[Filter, int]] = {}
            self.registry_index = FilterIndex()
            self.window: deque = deque()  # (t, Doc)
            self.next_recompute = self.multitree.recompute_us
            self.current: Plan | None = None
            self.installing: tuple[int, set] | None = None  # (epoch, brokers ready)
            self.epoch_count = 0

    # ------------------------------------------------------------------ overlay helpers

    def _base_hops(self, sender: str | None) -> list[str]:
        """T0 neighbours but the sender (the base tree's flood)."""
        return self._tree_neighbours(self.overlay.base, sender)

    def _tree_neighbours(self, tree: trees.Tree, sender: str | None) -> list[str]:
        names = self.overlay.names
        hops = [names[i] for i in np.flatnonzero(tree.parent == self.me)]
        if tree.parent[self.me] >= 0:
            hops.append(names[tree.parent[self.me]])
        return sorted(hop for hop in hops if hop != sender)

    def _up(self, msg: Message, ctx) -> None:
        """Toward the coordinator on T0 (handled here at the coordinator)."""
        if self.coordinating:
            self._at_coordinator(msg, ctx)
        else:
            ctx.send(self.overlay.names[self.overlay.base.parent[self.me]], msg)

    def _relay(self, msg: Message, sender: str | None, ctx) -> None:
        self._up(msg, ctx)

    on_mt_register = on_mt_unregister = on_mt_sample = on_mt_ready = _relay

    # ------------------------------------------------------------------ subscriptions

    def on_adv(self, msg: Message, sender: str | None, ctx) -> None:
        if msg.key not in self.advs:
            self.advs[msg.key] = Route(msg, None, self.srt.add_route(msg.key, msg.filter, LOCAL))

    def on_unadv(self, msg: Message, sender: str | None, ctx) -> None:
        if self.advs.pop(msg.key, None) is not None:
            self.srt.remove(msg.key)

    def on_sub(self, msg: Message, sender: str | None, ctx) -> None:
        if msg.key in self.subs:
            return
        self._known(msg, self.me)
        self._up(Message("mt_register", msg.id, msg.gen, filter=msg.filter, headers=(("home", self.me),)), ctx)
        for number, epoch in sorted(self.epochs.items()):
            cluster = epoch.plan.cluster_of_group.get(str(msg.filter), 0)
            self._flood_sub(Message("mt_sub", msg.id, msg.gen, filter=msg.filter, client=msg.client,
                                    headers=(("epoch", number), ("home", self.me), ("tree", cluster))), None, ctx)

    def on_unsub(self, msg: Message, sender: str | None, ctx) -> None:
        route = self.subs.get(msg.key)
        if route is None:
            return
        clusters = {number: int(self.prt.columns[f"cluster{number}"][route.slot]) for number in self.epochs}
        self._forget(msg.key)
        self._up(Message("mt_unregister", msg.id, msg.gen), ctx)
        for number, cluster in sorted(clusters.items()):
            if cluster >= 0:
                self._flood_unsub(Message("mt_unsub", msg.id, msg.gen,
                                          headers=(("epoch", number), ("tree", cluster))), None, ctx)

    def _known(self, msg: Message, home: int) -> int:
        """The table slot of a subscription, added (with its home) if new."""
        route = self.subs.get(msg.key)
        if route is None:
            slot = self.prt.add_route(msg.key, msg.filter, LOCAL if home == self.me else 0)
            self.prt.columns["home"][slot] = home
            for number in self.epochs:
                self.prt.columns[f"cluster{number}"][slot] = -1
                self.prt.columns[f"hop{number}"][slot] = UNKNOWN
            route = self.subs[msg.key] = Route(msg, None if home == self.me else self.overlay.names[home], slot)
        return route.slot

    def _forget(self, key) -> None:
        self.gone.add(key)
        if self.subs.pop(key, None) is not None:
            self.prt.remove(key)

    def _held(self, msg: Message, sender: str) -> _Epoch | None:
        """The epoch a message names; None when it is to wait for its install, or is stale."""
        number = msg.header("epoch")
        epoch = self.epochs.get(number)
        if epoch is None and number > max(self.epochs, default=0):
            self.waiting.setdefault(number, []).append((msg, sender))
        return epoch

    def on_mt_sub(self, msg: Message, sender: str | None, ctx) -> None:
        if self._held(msg, sender) is not None:
            self._flood_sub(msg, sender, ctx)

    def _flood_sub(self, msg: Message, sender: str | None, ctx) -> None:
        number, cluster = msg.header("epoch"), msg.header("tree")
        if msg.key not in self.gone:
            self._route_in(number, self._known(msg, msg.header("home")), cluster, sender)
        epoch = self.epochs[number]
        for hop in self._cluster_hops(epoch, cluster, sender):
            ctx.send(hop, msg)

    def _route_in(self, number: int, slot: int, cluster: int, sender: str | None) -> None:
        self.prt.columns[f"cluster{number}"][slot] = cluster
        self.prt.columns[f"hop{number}"][slot] = LOCAL if sender is None else self.hop_index[sender]

    def on_mt_unsub(self, msg: Message, sender: str | None, ctx) -> None:
        if self._held(msg, sender) is not None:
            self._flood_unsub(msg, sender, ctx)

    def _flood_unsub(self, msg: Message, sender: str | None, ctx) -> None:
        self._forget(msg.key)
        epoch = self.epochs[msg.header("epoch")]
        for hop in self._cluster_hops(epoch, msg.header("tree"), sender):
            ctx.send(hop, msg)

    def _cluster_hops(self, epoch: _Epoch, cluster: int, sender: str | None) -> list[str]:
        hops = epoch.tree_hops.get(cluster)
        if hops is None:
            hops = epoch.tree_hops[cluster] = self._tree_neighbours(epoch.plan.trees[cluster], None)
        return [hop for hop in hops if hop != sender]

    # ------------------------------------------------------------------ publications

    def on_pub(self, msg: Message, sender: str | None, ctx) -> None:
        if sender is None:
            if self.check_conformance and not self._conforms(msg):
                ctx.event("nonconforming_publication", pub_id=msg.id, client=msg.client)
                return
            if self.sampler.random() < self.multitree.sample:
                self._up(Message("mt_sample", msg.id, publication=msg.publication,
                                 headers=(("publisher", self.me),)), ctx)
            msg = msg.with_headers(epoch=self.active)
        number = msg.header("epoch")
        match = self.prt.publication(msg.publication, LOCAL)
        if number == 0:
            self._deliver(msg, match.local, ctx)
            self._forward(msg, self._base_hops(sender), ctx)
            return
        epoch = self.epochs.get(number)
        if epoch is None:
            ctx.event("multitree_stale_epoch", pub_id=msg.id, epoch=number)
            return
        clusters = self.prt.columns[f"cluster{number}"][match.slots]
        hops = self.prt.columns[f"hop{number}"][match.slots]
        if epoch.plan.opt:
            self._opt_route(msg, match.slots[clusters >= 0], hops[clusters >= 0], sender, ctx)
            return
        tree = msg.header("tree")
        for cluster in (np.unique(clusters[clusters >= 0]).tolist() if tree is None else [tree]):
            mine = hops[clusters == cluster]
            self._deliver(msg, match.slots[clusters == cluster][mine == LOCAL].tolist(), ctx)
            names = self.neighbors
            next_hops = [names[h] for h in np.unique(mine[mine >= 0]).tolist() if names[h] != sender]
            self._forward(msg.with_headers(tree=cluster), next_hops, ctx)

    def _deliver(self, msg: Message, slots, ctx) -> None:
        subs = self.subs
        for key in self.prt.keys_of(slots):
            self.deliver_locally(msg, subs[key], ctx)

    def _forward(self, msg: Message, hops: list[str], ctx) -> None:
        if hops:
            copy = msg.forwarded()
            for hop in hops:
                ctx.send(hop, copy)

    def _opt_route(self, msg: Message, slots: np.ndarray, hops: np.ndarray, sender: str | None, ctx) -> None:
        """OPT: the publisher's broker joins the matching homes by a Steiner tree that the copy
        carries; every broker on it delivers locally and passes it on along the tree."""
        self._deliver(msg, slots[hops == LOCAL].tolist(), ctx)
        route = msg.header("route")
        if route is None:
            names = self.overlay.names
            homes = {names[h] for h in self.prt.columns["home"][slots].tolist()} | {self.name}
            edges = trees.steiner(self.overlay.graph, homes).edges
            route = tuple(sorted(tuple(sorted((self.overlay.index[a], self.overlay.index[b]))) for a, b in edges))
            msg = msg.with_headers(route=route)
        names = self.overlay.names
        on_route = sorted(names[b if a == self.me else a] for a, b in route if self.me in (a, b))
        self._forward(msg, [hop for hop in on_route if hop != sender], ctx)

    # ------------------------------------------------------------------ installs

    def on_mt_install(self, msg: Message, sender: str | None, ctx) -> None:
        plan: Plan = msg.header("plan")
        for hop in self._base_hops(sender):
            ctx.send(hop, msg)
        self._build(plan)
        deltas: dict[int, list[Message]] = {}
        column = self.prt.columns[f"cluster{plan.epoch}"]
        for key, route in self.subs.items():
            if route.last_hop is None and column[route.slot] < 0:
                cluster = plan.cluster_of_group.get(str(route.msg.filter), 0)
                self._route_in(plan.epoch, route.slot, cluster, None)
                deltas.setdefault(cluster, []).append(route.msg)
        self.unready[plan.epoch] = 0
        for cluster, items in sorted(deltas.items()):
            hops = self._cluster_hops(self.epochs[plan.epoch], cluster, None)
            if hops:
                flood = f"{plan.epoch}/{self.name}/{cluster}"
                self.floods[flood] = [None, len(hops), plan.epoch]
                self.unready[plan.epoch] += 1
                delta = Message("mt_delta", flood, items=tuple(items),
                                headers=(("epoch", plan.epoch), ("home", self.me), ("tree", cluster)))
                for hop in hops:
                    ctx.send(hop, delta)
        self._ready_if_done(plan.epoch, ctx)
        for waiting, sender in self.waiting.pop(plan.epoch, []):
            self.handle(waiting, sender, ctx)

    def _build(self, plan: Plan) -> None:
        """The plan's cluster and tree neighbour per subscription, one query per tree."""
        number = plan.epoch
        self.epochs[number] = _Epoch(plan)
        for name, unset in ((f"cluster{number}", -1), (f"hop{number}", UNKNOWN)):
            self.prt.add_column(name)
            self.prt.columns[name][:] = unset
        by_cluster: dict[int, tuple[list, list]] = {}
        for key, f, home, cluster in plan.subs:
            if key in self.gone:
                continue
            slot = self._known(Message("sub", key[0], key[1], filter=f), home)
            slots, homes = by_cluster.setdefault(cluster, ([], []))
            slots.append(slot)
            homes.append(home)
        clusters, hops = self.prt.columns[f"cluster{number}"], self.prt.columns[f"hop{number}"]
        for cluster, (slots, homes) in by_cluster.items():
            toward = plan.trees[cluster].next_hops(self.me, np.array(homes, np.int64))
            clusters[slots] = cluster
            hops[slots] = self.neighbour_of[toward]

    def on_mt_delta(self, msg: Message, sender: str | None, ctx) -> None:
        epoch = self._held(msg, sender)
        if epoch is None:
            return
        cluster = msg.header("tree")
        for item in msg.items:
            if item.key not in self.gone:
                self._route_in(msg.header("epoch"), self._known(item, msg.header("home")), cluster, sender)
        hops = self._cluster_hops(epoch, cluster, sender)
        if hops:
            self.floods[msg.id] = [sender, len(hops), msg.header("epoch")]
            for hop in hops:
                ctx.send(hop, msg)
        else:
            ctx.send(sender, Message("mt_delta_ack", msg.id))

    def on_mt_delta_ack(self, msg: Message, sender: str | None, ctx) -> None:
        flood = self.floods[msg.id]
        flood[1] -= 1
        if flood[1]:
            return
        del self.floods[msg.id]
        if flood[0] is not None:
            ctx.send(flood[0], msg)
        else:
            self.unready[flood[2]] -= 1
            self._ready_if_done(flood[2], ctx)

    def _ready_if_done(self, number: int, ctx) -> None:
        if self.unready.get(number) == 0:
            del self.unready[number]
            self._up(Message("mt_ready", f"E{number}", headers=(("epoch", number), ("broker", self.name))), ctx)

    def on_mt_activate(self, msg: Message, sender: str | None, ctx) -> None:
        for hop in self._base_hops(sender):
            ctx.send(hop, msg)
        self.active = msg.header("epoch")
        for number in [n for n in self.epochs if n < self.active - 1]:
            del self.epochs[number]
            del self.prt.columns[f"cluster{number}"], self.prt.columns[f"hop{number}"]
        if self.coordinating:
            ctx.event("multitree_activated", epoch=self.active)

    # ------------------------------------------------------------------ the coordinator

    def _at_coordinator(self, msg: Message, ctx) -> None:
        if msg.kind == "mt_register":
            self.registry[msg.key] = (msg.filter, msg.header("home"))
            self.registry_index.add(msg.key, msg.filter)
        elif msg.kind == "mt_unregister":
            if self.registry.pop(msg.key, None) is not None:
                self.registry_index.remove(msg.key)
        elif msg.kind == "mt_sample":
            self.window.append((ctx.now, self._document(msg)))
        elif msg.kind == "mt_ready" and self.installing and msg.header("epoch") == self.installing[0]:
            ready = self.installing[1]
            ready.add(msg.header("broker"))
            if len(ready) == len(self.overlay.names):
                self.installing = None
                self.on_mt_activate(Message("mt_activate", msg.id, headers=(("epoch", msg.header("epoch")),)), None, ctx)

    def _document(self, msg: Message) -> trees.Doc:
        names = self.overlay.names
        groups: dict[str, set[str]] = {}
        for key in self.registry_index.keys_of(self.registry_index.match(msg.publication, LOCAL).slots):
            f, home = self.registry[key]
            groups.setdefault(str(f), set()).add(names[home])
        return trees.Doc(names[msg.header("publisher")],
                         tuple(sorted((g, tuple(sorted(b))) for g, b in groups.items())))

    def tick(self, ctx) -> None:
        super().tick(ctx)
        if not self.coordinating or ctx.now < self.next_recompute:
            return
        self.next_recompute = ctx.now + self.multitree.recompute_us
        while self.window and self.window[0][0] < ctx.now - self.multitree.window_us:
            self.window.popleft()
        if self.installing is not None or not self.window:
            return
        if self.current is not None and self.multitree.algorithm in ("SPT", "OPT"):
            return
        self._recompute(ctx)

    def _recompute(self, ctx) -> None:
        docs = [doc for _, doc in self.window]
        planner = trees.Planner(self.overlay.graph, docs, self.settings.get("seed", 0))
        before = self._plan_cost(planner)
        algorithm = self.multitree.algorithm
        if algorithm == "SPT":
            tree_graphs, groups = [trees.spt(self.overlay.graph, self.settings.get("seed", 0))], {}
            cost = planner.cost_on(trees.Tree(tree_graphs[0], self.overlay.names), planner.sampled_groups())
        elif algorithm == "OPT":
            tree_graphs, groups, cost = [self.overlay.base_tree], {}, trees.opt_cost(self.overlay.graph, docs)
        else:
            clusters = {"SINGLE": planner.single, "MULT": planner.mult, "MULT2": planner.mult2}[algorithm]()
            tree_graphs = [self.overlay.base_tree] + [c.tree for c in clusters]
            groups = {g: i for i, c in enumerate(clusters, start=1) for g in sorted(c.groups)}
            cost = planner.cost(clusters)
        install = before is None or (before - cost) > self.multitree.improvement * before
        ctx.event("multitree_recomputed", algorithm=algorithm, docs=len(docs), clusters=len(tree_graphs),
                  cost_before=before, cost_after=cost, trees_computed=planner.trees_computed, installed=install)
        if not install:
            return
        self.epoch_count += 1
        names = self.overlay.names
        plan = Plan(self.epoch_count, tuple(trees.Tree(t, names) for t in tree_graphs),
                    tuple((key, f, home, groups.get(str(f), 0)) for key, (f, home) in self.registry.items()),
                    groups, opt=algorithm == "OPT")
        self.current, self.installing = plan, (plan.epoch, set())
        self.on_mt_install(Message("mt_install", f"E{plan.epoch}", headers=(("plan", plan),)), None, ctx)

    def _plan_cost(self, planner: trees.Planner) -> int | None:
        """The current configuration's cost on the window (None while publications flood)."""
        plan = self.current
        if plan is None:
            return None
        if plan.opt:
            return trees.opt_cost(planner.graph, planner.docs)
        sampled = planner.sampled_groups()
        members: dict[int, list[str]] = {}
        for group in sampled:
            members.setdefault(plan.cluster_of_group.get(group, 0), []).append(group)
        return sum(planner.cost_on(plan.trees[c], groups) for c, groups in sorted(members.items()))
