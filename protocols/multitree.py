"""Content-aware multi-tree routing: subscription clusters with one dissemination tree each.

Implements "Scalable Content-Based Routing in Pub/Sub Systems" (subscription clusters, a cost
model from published samples, low-stretch spanning trees): Algorithm 1 (COMPUTETREE),
Algorithm 2 (MULT2), Algorithm 3 (MULT) and the coordinator of its section VI, with the
baselines SINGLE, SPT and OPT. The trees are protocols/trees.py, the planning and the
coordinator's role protocols/planning.py; this module is the
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
  subscription, keeps the last ``window`` of them, and plans at its first tick with a sample
  (so that publications soon stop flooding), then every ``recompute``: it plans a
  configuration with ``algorithm``: clusters of subscription groups (a group is the
  subscriptions with one filter), one tree each, and cluster 0 on T0 for the groups no sample
  matched (and any group that appears later). It installs the plan when its cost on the
  window's samples improves on the current one's by more than ``improvement`` (relative); the
  first plan always. SPT and OPT install once.
- An install (epoch e) carries the trees and every registered subscription with its home
  broker and cluster. Each broker keeps, per group (not per subscription: memory grows with
  the distinct filters, not with brokers times subscriptions), how many of its subscriptions
  lie beyond each neighbour on its cluster's tree, derived with one vectorised query per
  tree. A subscription the plan misses
  (registered after the coordinator planned) is flooded by its home on its cluster's tree,
  with an echo; a broker reports ``mt_ready`` once its floods are acknowledged, and the
  coordinator activates the epoch when every broker is ready. A publication is routed in the
  epoch active at its publisher's broker, and carries it: every broker on its way holds that
  epoch (brokers keep the previous epoch for copies in flight), so none is lost or
  duplicated while trees are swapped.
- A publication goes on the tree of every cluster with a matching subscription and, on each
  tree, only toward neighbours with matching subscriptions of that cluster; each copy
  delivers to the local subscribers of its own cluster. New subscriptions flood the tree of
  their cluster (that of their group, else 0) in every epoch the broker holds, counted on the
  way; unsubscriptions flood likewise and uncount (links are FIFO, so an unsubscription never
  overtakes its subscription; a home withdraws, in the new epoch, what a plan registers but
  it no longer holds).
- ``plan: offline`` is the paper's evaluation: the run's sample of ``sample`` of the
  workload's documents is drawn before it starts (experiments/scenario.py), publishers' brokers
  ship no samples, and the coordinator plans once, at its first tick from the first
  publication's time on, from those documents matched against the subscriptions registered
  by then. ``span`` picks what COMPUTETREE's low-stretch tree spans (trees.compute_tree): the
  union of the sampled documents' Steiner trees (the paper's Algorithm 1) or the whole overlay.
- ``unsampled`` places the registered groups no sampled document matched: on T0 (``base``, as
  the coordinator of the paper's section VI keeps them) or, a variant of ours, on the tree of
  the cluster with the most sampled documents (``largest``), so that a document the sample
  never saw travels fewer trees. Groups subscribed after the plan ride T0 under both.
- SemCast (Papaemmanouil and Cetintemel, "SemCast: semantic multicast for content-based data
  dissemination", ICDE 2005) as the paper compares it: channels of groups, merged by document
  overlap like MULT but built and costed as channels (a Steiner tree over the brokers of all
  the channel's subscriptions, a matching document sent to all of them: no filtering inside).
  SemCast-filtered routes on the same channels with content-based filtering per tree.
- OPT routes each publication on its own approximate Steiner tree, computed at the
  publisher's broker over the brokers of its matching subscriptions and carried by the copy.

Deliberate differences: trees are computed in the hop metric (the cost is copies, one per
edge); approximate Steiner trees are Mehlhorn's 2-approximation (the paper cites a
1.55-approximation and proves its bound with 2); a cluster is a set of groups, never a split of one filter's subscribers; MULT2 only
considers merging clusters that share a sampled document, and MULT merges all clusters at
once when no two share one (see trees.py); groups without samples ride T0 (filtered, also
under SemCast), not a SINGLE tree, unless ``unsampled: largest`` says otherwise.
Advertisements stay at their broker (they only serve the conformance check): routing needs
none.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import networkx as nx
import numpy as np

from . import planning, trees
from .broker import Route, configured
from .errors import unknown_key
from .language import Filter
from .messages import Message
from .planning import Coordinator, Plan
from .plugins import OFF, Needs, Protocol
from .routing import LOCAL, RoutingTable

ALGORITHMS = ("MULT", "MULT2", "SINGLE", "SPT", "OPT", "SemCast", "SemCast-filtered")
CONTROL_KINDS = ("mt_register", "mt_unregister", "mt_sample", "mt_install", "mt_delta", "mt_delta_ack",
                 "mt_ready", "mt_activate", "mt_sub", "mt_unsub")
UNKNOWN = -2  # the neighbour index of a broker that is not a neighbour
PLANS = ("online", "offline")
OFFLINE_SAMPLE = "multitree_offline_sample"  # the run's protocol mapping: (time, [(publisher, publication)])


@dataclass(frozen=True)
class MultitreeSettings:
    algorithm: str = "MULT"
    sample: float = 0.03
    window_us: int = 600_000_000
    recompute_us: int = 60_000_000
    improvement: float = 0.05
    coordinator: str | None = None
    plan: str = "online"
    span: str = "union"
    unsampled: str = "base"

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "MultitreeSettings":
        """Settings from a scenario's ``protocol.multitree`` mapping; ValueError names the key."""
        known = ("algorithm", "sample", "window", "recompute", "improvement", "coordinator", "plan", "span",
                 "unsampled")
        values = dict(given)
        for key in values:
            if key not in known:
                raise ValueError(unknown_key(key, known))
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
        if values.get("plan", cls.plan) not in PLANS:
            raise ValueError(f"plan: expected one of {', '.join(PLANS)}, got {values['plan']!r}")
        if values.get("span", cls.span) not in trees.SPANS:
            raise ValueError(f"span: expected one of {', '.join(trees.SPANS)}, got {values['span']!r}")
        if values.get("unsampled", cls.unsampled) not in planning.UNSAMPLED:
            raise ValueError(f"unsampled: expected one of {', '.join(planning.UNSAMPLED)}, got {values['unsampled']!r}")
        coordinator = values.get("coordinator")
        if coordinator is not None and not isinstance(coordinator, str):
            raise ValueError(f"coordinator: expected a broker name, got {coordinator!r}")
        if values.get("recompute_us", 1) <= 0 or values.get("window_us", 1) <= 0:
            raise ValueError("window and recompute must be positive durations")
        return cls(**values)

    def check_brokers(self, brokers) -> None:
        if self.coordinator is not None and self.coordinator not in brokers:
            raise ValueError(f"coordinator: {self.coordinator!r} is not a broker of the overlay")


class Overlay:
    """The overlay as every broker of a host sees it: names, graph and the coordinator's T0."""

    def __init__(self, neighbours: dict[str, list[str]], coordinator: str) -> None:
        self.names = sorted(neighbours)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.names)
        self.graph.add_edges_from((a, b) for a, others in neighbours.items() for b in others)
        self.coordinator = coordinator
        self.base = trees.Tree(trees.bfs_tree(self.graph, coordinator), self.names)


_OVERLAYS: dict[tuple[int, str], tuple[dict, Overlay]] = {}


def _shared_overlay(neighbours: dict, coordinator: str) -> Overlay:
    """One Overlay per neighbour mapping and coordinator in this process."""
    found = _OVERLAYS.get((id(neighbours), coordinator))
    if found is None or found[0] is not neighbours:
        found = _OVERLAYS[(id(neighbours), coordinator)] = (neighbours, Overlay(neighbours, coordinator))
    return found[1]


class _Epoch:
    """A broker's routing state in one installed plan. The plan's groups are matched in the
    index the plan shares with every broker of its host; per group this broker counts the
    subscriptions beyond each neighbour on the group's cluster tree (``counts``; local ones
    are not counted). Groups the plan does not know (subscribed since) are counted in a small
    routing table of this broker's (``extra``, in its ``toward``)."""

    def __init__(self, plan: Plan, counts: np.ndarray, neighbors: list[str], work) -> None:
        self.plan = plan
        self.counts = counts
        self.extra = RoutingTable(neighbors, work)
        self.work = work
        self.tree_hops: dict[int, list[str]] = {}  # cluster -> this broker's tree neighbours
        self.channels: dict[int, list[int]] = {}  # SemCast: cluster -> neighbours toward any of its subscriptions
        self.home_changes: dict[str, Counter] = {}  # OPT: group -> home -> subscriptions since the plan

    def count(self, f: Filter, home: int, direction: int, delta: int) -> None:
        """A subscription of ``f`` at ``home``, beyond neighbour ``direction`` (LOCAL: here),
        came (delta 1) or went (-1)."""
        text = str(f)
        if direction != LOCAL:
            g = self.plan.group_index.get(text)
            if g is not None:
                self.counts[g, direction] += delta
            else:
                key = (text, 0)
                if key not in self.extra:
                    self.extra.add_route(key, f, LOCAL)
                self.extra.toward[self.extra.slot(key), direction] += delta
            self.channels.clear()
        if self.plan.opt:
            self.home_changes.setdefault(text, Counter())[home] += delta

    def cluster_of(self, text: str) -> int:
        return self.plan.cluster_of_group.get(text, 0)

    def matching(self, publication) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The groups a publication matches: their texts, clusters and counts rows."""
        plan = self.plan
        plan.index.work = self.work  # the broker in hand pays for the query
        groups = np.array(plan.index.keys_of(plan.index.match(publication).slots), np.int64)
        texts = [plan.groups[g][0] for g in groups.tolist()]
        clusters, rows = plan.group_cluster[groups], self.counts[groups]
        if len(self.extra):
            extra = self.extra.publication(publication, LOCAL).slots
            if len(extra):
                more = [key[0] for key in self.extra.keys_of(extra)]
                texts += more
                clusters = np.concatenate([clusters, [self.cluster_of(text) for text in more]])
                rows = np.concatenate([rows, self.extra.toward[extra]])
        return texts, clusters, rows

    def channel(self, cluster: int) -> list[int]:
        """SemCast: the neighbours beyond which the cluster has any subscription."""
        found = self.channels.get(cluster)
        if found is None:
            rows = self.counts[self.plan.group_cluster == cluster]
            extra = [self.extra.toward[self.extra.slot(key)] for key in self.extra.keys()
                     if self.cluster_of(key[0]) == cluster]
            found = self.channels[cluster] = np.flatnonzero(np.vstack([rows, *extra]).any(axis=0)).tolist()
        return found

    def homes(self, text: str) -> set[int]:
        """OPT: the brokers holding subscriptions of a group."""
        found = self.plan.homes(text)
        found.update(self.home_changes.get(text, Counter()))
        return {home for home, count in found.items() if count > 0}


class Multitree:
    def __init__(self, name, neighbors, settings=None, overlay=None) -> None:
        super().__init__(name, neighbors, settings, overlay)
        self.multitree = configured(self.settings, "multitree", MultitreeSettings)
        overlay = overlay or {name: list(neighbors)}
        self.overlay = _shared_overlay(overlay, self.multitree.coordinator or min(overlay))
        self.me = self.overlay.index[name]
        self.neighbour_of = np.full(len(self.overlay.names), UNKNOWN, np.int64)  # broker index -> neighbour index
        for i, hop in enumerate(self.neighbors):
            self.neighbour_of[self.overlay.index[hop]] = i
        self.neighbour_of[self.me] = LOCAL
        self.base_neighbours = self._tree_neighbours(self.overlay.base)
        self.epochs: dict[int, _Epoch] = {}
        self.active = 0
        self.groups: dict[tuple[str, int], str] = {}  # local subscription -> its group
        self.waiting: dict[int, list] = {}  # epoch -> (message, sender)s that came before its install
        self.floods: dict[str, list] = {}  # flood id -> [upstream (None: started here), acks awaited, epoch]
        self.unready: dict[int, int] = {}  # epoch -> floods started here, not yet acknowledged
        self.sampler = random.Random(f"{self.settings.get('seed', 0)}/multitree/{name}")
        self.coordinator = (Coordinator(self.overlay, self.multitree, self.settings.get("seed", 0),
                                        self.settings.get(OFFLINE_SAMPLE))
                            if name == self.overlay.coordinator else None)

    @property
    def prt_size(self) -> int:
        """Local subscriptions, and the groups the active epoch routes."""
        epoch = self.epochs.get(self.active)
        return len(self.prt) + (len(epoch.plan.groups) + len(epoch.extra) if epoch else 0)

    # ------------------------------------------------------------------ overlay helpers

    def _base_hops(self, sender: str | None) -> list[str]:
        """T0 neighbours but the sender (the base tree's flood)."""
        return [hop for hop in self.base_neighbours if hop != sender]

    def _tree_neighbours(self, tree: trees.Tree) -> list[str]:
        names = self.overlay.names
        hops = [names[i] for i in np.flatnonzero(tree.parent == self.me)]
        if tree.parent[self.me] >= 0:
            hops.append(names[tree.parent[self.me]])
        return sorted(hops)

    def _cluster_hops(self, epoch: _Epoch, cluster: int, sender: str | None) -> list[str]:
        hops = epoch.tree_hops.get(cluster)
        if hops is None:
            hops = epoch.tree_hops[cluster] = self._tree_neighbours(epoch.plan.trees[cluster])
        return [hop for hop in hops if hop != sender]

    def _up(self, msg: Message, ctx) -> None:
        """Toward the coordinator on T0 (handled here at the coordinator)."""
        if self.coordinator is not None:
            self._at_coordinator(msg, ctx)
        else:
            ctx.send(self.overlay.names[self.overlay.base.parent[self.me]], msg)

    def _relay(self, msg: Message, sender: str | None, ctx) -> None:
        self._up(msg, ctx)

    on_mt_register = on_mt_unregister = on_mt_sample = on_mt_ready = _relay

    def _held(self, msg: Message, sender: str) -> _Epoch | None:
        """The epoch a message names; None when it is to wait for its install, or is stale."""
        number = msg.header("epoch")
        epoch = self.epochs.get(number)
        if epoch is None and number > max(self.epochs, default=0):
            self.waiting.setdefault(number, []).append((msg, sender))
        return epoch

    # ------------------------------------------------------------------ subscriptions

    def on_adv(self, msg: Message, sender: str | None, ctx) -> None:
        if msg.key not in self.advs:
            self.advs[msg.key] = Route(msg, None, self.srt.add_route(msg.key, msg.filter, LOCAL, msg.client))

    def on_unadv(self, msg: Message, sender: str | None, ctx) -> None:
        if self.advs.pop(msg.key, None) is not None:
            self.srt.remove(msg.key)

    def on_sub(self, msg: Message, sender: str | None, ctx) -> None:
        if msg.key in self.subs:
            return
        self.subs[msg.key] = Route(msg, None, self.prt.add_route(msg.key, msg.filter, LOCAL, msg.client))
        text = self.groups[msg.key] = str(msg.filter)
        self._up(Message("mt_register", msg.id, msg.gen, filter=msg.filter, headers=(("home", self.me),)), ctx)
        for number, epoch in sorted(self.epochs.items()):
            epoch.count(msg.filter, self.me, LOCAL, 1)
            self._flood_count(Message("mt_sub", msg.id, msg.gen, filter=msg.filter, headers=(
                ("epoch", number), ("home", self.me), ("tree", epoch.cluster_of(text)))), None, ctx)

    def on_unsub(self, msg: Message, sender: str | None, ctx) -> None:
        route = self.subs.pop(msg.key, None)
        if route is None:
            return
        self.prt.remove(msg.key)
        text = self.groups.pop(msg.key)
        self._up(Message("mt_unregister", msg.id, msg.gen), ctx)
        for number, epoch in sorted(self.epochs.items()):
            epoch.count(route.msg.filter, self.me, LOCAL, -1)
            self._flood_count(Message("mt_unsub", msg.id, msg.gen, filter=route.msg.filter, headers=(
                ("epoch", number), ("home", self.me), ("tree", epoch.cluster_of(text)))), None, ctx)

    def on_mt_sub(self, msg: Message, sender: str | None, ctx) -> None:
        if self._held(msg, sender) is not None:
            self._flood_count(msg, sender, ctx)

    on_mt_unsub = on_mt_sub

    def _flood_count(self, msg: Message, sender: str | None, ctx) -> None:
        """Count a subscription's coming (mt_sub) or going (mt_unsub) in the message's epoch,
        and pass it on along its cluster's tree."""
        epoch = self.epochs[msg.header("epoch")]
        if sender is not None:
            epoch.count(msg.filter, msg.header("home"), self.hop_index[sender], 1 if msg.kind == "mt_sub" else -1)
        for hop in self._cluster_hops(epoch, msg.header("tree"), sender):
            ctx.send(hop, msg)

    # ------------------------------------------------------------------ publications

    def on_pub(self, msg: Message, sender: str | None, ctx) -> None:
        if sender is None:
            if self.check_conformance and not self._conforms(msg):
                ctx.event("nonconforming_publication", pub_id=msg.id, client=msg.client)
                return
            if self.multitree.plan == "online" and self.sampler.random() < self.multitree.sample:
                self._up(Message("mt_sample", msg.id, publication=msg.publication,
                                 headers=(("publisher", self.me),)), ctx)
            msg = msg.with_headers(epoch=self.active)
        number = msg.header("epoch")
        local = self.prt.publication(msg.publication, LOCAL).local
        if number == 0:  # before the first plan: flood T0
            self._deliver(msg, local, ctx)
            self._forward(msg, self._base_hops(sender), ctx)
            return
        epoch = self.epochs.get(number)
        if epoch is None:
            ctx.event("multitree_stale_epoch", pub_id=msg.id, epoch=number)
            return
        if epoch.plan.opt:
            self._opt_route(msg, epoch, local, sender, ctx)
            return
        _, clusters, rows = epoch.matching(msg.publication)
        tree = msg.header("tree")
        local_clusters = np.array([epoch.cluster_of(self.groups[key]) for key in self.prt.keys_of(local)], np.int64)
        # at the publisher's broker, every cluster with a matching subscription: those beyond
        # a neighbour (the counts) and those only here (a group that is new since the plan)
        for cluster in (np.union1d(clusters, local_clusters).tolist() if tree is None else [tree]):
            if epoch.plan.flooded and cluster > 0:
                directions = epoch.channel(cluster)
            else:
                directions = np.flatnonzero(rows[clusters == cluster].any(axis=0)).tolist()
            self._deliver(msg, local[local_clusters == cluster], ctx)
            names = self.neighbors
            self._forward(msg.with_headers(tree=cluster), [names[d] for d in directions if names[d] != sender], ctx)

    def _forward(self, msg: Message, hops: list[str], ctx) -> None:
        if hops:
            copy = msg.forwarded()
            for hop in hops:
                ctx.send(hop, copy)

    def _opt_route(self, msg: Message, epoch: _Epoch, local: np.ndarray, sender: str | None, ctx) -> None:
        """OPT: the publisher's broker joins the matching subscriptions' brokers by a Steiner
        tree that the copy carries; every broker on it delivers locally and passes it on."""
        self._deliver(msg, local, ctx)
        names, index = self.overlay.names, self.overlay.index
        route = msg.header("route")
        if route is None:
            texts, _, _ = epoch.matching(msg.publication)
            homes = {names[h] for text in texts for h in epoch.homes(text)} | {self.name}
            edges = trees.steiner(self.overlay.graph, homes).edges
            route = tuple(sorted(tuple(sorted((index[a], index[b]))) for a, b in edges))
            msg = msg.with_headers(route=route)
        on_route = sorted(names[b if a == self.me else a] for a, b in route if self.me in (a, b))
        self._forward(msg, [hop for hop in on_route if hop != sender], ctx)

    # ------------------------------------------------------------------ installs

    def on_mt_install(self, msg: Message, sender: str | None, ctx) -> None:
        plan: Plan = msg.header("plan")
        for hop in self._base_hops(sender):
            ctx.send(hop, msg)
        epoch = self.epochs[plan.epoch] = self._built(plan)
        registered = plan.by_home.get(self.me, {})
        deltas: dict[int, list[Message]] = {}
        for key, route in self.subs.items():  # subscribed here after the coordinator planned
            if key not in registered:
                epoch.count(route.msg.filter, self.me, LOCAL, 1)
                deltas.setdefault(epoch.cluster_of(self.groups[key]), []).append(route.msg)
        for key in sorted(registered.keys() - self.subs.keys()):  # withdrawn since
            text, f = plan.groups[registered[key]]
            self._flood_count(Message("mt_unsub", key[0], key[1], filter=f, headers=(
                ("epoch", plan.epoch), ("home", self.me), ("tree", epoch.cluster_of(text)))), None, ctx)
        self.unready[plan.epoch] = 0
        for cluster, items in sorted(deltas.items()):
            self._start_delta(epoch, cluster, items, ctx)
        self._ready_if_done(plan.epoch, ctx)
        for waiting, sender in self.waiting.pop(plan.epoch, []):
            self.handle(waiting, sender, ctx)

    def _built(self, plan: Plan) -> _Epoch:
        """This broker's view of a plan: per group, its subscriptions beyond each neighbour on
        its cluster's tree (one vectorised query per tree)."""
        counts = np.zeros((len(plan.groups), len(self.neighbors) + 1), np.int32)  # last column: local
        for cluster in np.unique(plan.sub_cluster).tolist():
            mine = np.flatnonzero(plan.sub_cluster == cluster)
            toward = self.neighbour_of[plan.trees[cluster].next_hops(self.me, plan.sub_home[mine])]
            np.add.at(counts, (plan.sub_group[mine], toward), 1)  # LOCAL (-1) lands in the last column
        return _Epoch(plan, np.ascontiguousarray(counts[:, :-1]), self.neighbors, self.work)

    def _start_delta(self, epoch: _Epoch, cluster: int, items: list[Message], ctx) -> None:
        hops = self._cluster_hops(epoch, cluster, None)
        if not hops:
            return
        number = epoch.plan.epoch
        flood = f"{number}/{self.name}/{cluster}"
        self.floods[flood] = [None, len(hops), number]
        self.unready[number] += 1
        delta = Message("mt_delta", flood, items=tuple(items),
                        headers=(("epoch", number), ("home", self.me), ("tree", cluster)))
        for hop in hops:
            ctx.send(hop, delta)

    def on_mt_delta(self, msg: Message, sender: str | None, ctx) -> None:
        epoch = self._held(msg, sender)
        if epoch is None:
            return
        for item in msg.items:
            epoch.count(item.filter, msg.header("home"), self.hop_index[sender], 1)
        hops = self._cluster_hops(epoch, msg.header("tree"), sender)
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
        for number in [n for n in self.epochs if n < self.active - 1]:  # the previous one serves copies in flight
            del self.epochs[number]
        if self.coordinator is not None:
            ctx.event("multitree_activated", epoch=self.active)

    # ------------------------------------------------------------------ the coordinator

    def _at_coordinator(self, msg: Message, ctx) -> None:
        coordinator = self.coordinator
        if msg.kind == "mt_register":
            coordinator.register(msg.key, msg.filter, msg.header("home"))
        elif msg.kind == "mt_unregister":
            coordinator.unregister(msg.key)
        elif msg.kind == "mt_sample":
            coordinator.sample(ctx.now, msg.publication, msg.header("publisher"))
        elif msg.kind == "mt_ready" and coordinator.ready(msg.header("epoch"), msg.header("broker")):
            self.on_mt_activate(Message("mt_activate", msg.id, headers=(("epoch", msg.header("epoch")),)), None, ctx)

    def tick(self, ctx) -> None:
        super().tick(ctx)
        if self.coordinator is None:
            return
        planned = self.coordinator.plan_due(ctx.now)
        if planned is None:
            return
        recomputed, plan = planned
        ctx.event("multitree_recomputed", **recomputed)
        if plan is not None:
            self.on_mt_install(Message("mt_install", f"E{plan.epoch}", headers=(("plan", plan),)), None, ctx)


def offline_sample(injections, fraction: float, seed: int) -> tuple[int, tuple]:
    """Multi-tree routing's offline plan (``plan: offline``): a seeded random ``fraction`` of
    the workload's publications (at least one), as (publisher's broker, publication) in trace
    order, and the time of the first publication, when the coordinator plans."""
    publications = [i for i in injections if i.message.kind == "pub"]
    if not publications:
        return 0, ()
    chosen = offline_indices(len(publications), fraction, seed)
    return publications[0].t_us, tuple((publications[i].broker, publications[i].message.publication) for i in chosen)


def offline_indices(count: int, fraction: float, seed: int) -> list[int]:
    """Which of ``count`` documents an offline plan samples: a seeded random ``fraction`` of
    them (at least one), in order (bench/bench_trees.py draws the same)."""
    return sorted(random.Random(f"{seed}/multitree/offline").sample(range(count), max(1, round(fraction * count))))


def _prepare(settings: dict, injections: list, seed: int) -> dict:
    """An offline plan's sample of the workload's documents, drawn before the run."""
    if settings["plan"] != "offline":
        return {}
    return {OFFLINE_SAMPLE: offline_sample(injections, settings["sample"], seed)}


PROTOCOL = Protocol(
    key="multitree",
    paper="Scalable Content-Based Routing in Pub/Sub Systems",
    summary="content-aware multi-tree routing: MULT, MULT2, SINGLE, SPT, OPT, SemCast; subscription clusters with "
            "one dissemination tree each, planned online or offline",
    settings=MultitreeSettings,
    mixins=lambda settings: (Multitree,),
    classes=(Multitree,),
    order=10,
    needs=(Needs("covering", ("none",), "it routes on its own trees"),
           Needs("pruning", (OFF,), "it routes on its own trees"),
           Needs("soft_links", (OFF,), "it routes on its own trees"),
           Needs("relocation", (OFF,), "it routes on its own trees"),
           Needs("faults", (OFF,), "its trees are not resynchronised after a fault")),
    check_overlay=lambda settings, overlay: MultitreeSettings(**settings).check_brokers(overlay),
    prepare=_prepare,
)
