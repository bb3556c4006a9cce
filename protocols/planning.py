"""Multi-tree planning: the coordinator's role in content-aware multi-tree routing
(protocols/multitree.py) and the clusterings it plans with.

``Planner`` computes configurations, clusters of subscription groups with one dissemination
tree each, from a window of sampled documents: MULT2 (Algorithm 2), MULT (Algorithm 3),
SemCast's channels and the baselines SINGLE, SPT and OPT (``configure``). ``Coordinator`` is
what the coordinator broker holds: the registered subscriptions, the sampled documents, and
when and what to plan; the broker mixin carries its messages.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import networkx as nx
import numpy as np

from .index import FilterIndex
from .language import Filter
from .trees import Doc, Tree, cluster_cost, compute_tree, hops_of, opt_cost, spanning_tree, spt, steiner


@dataclass
class Cluster:
    """A cluster of groups with its tree (as arrays: a planner keeps thousands of candidates)."""

    groups: frozenset[str]
    docs: tuple[int, ...]  # indices of the documents matching one of its groups
    tree: Tree
    cost: int


@dataclass(frozen=True)
class Step:
    """A configuration a clustering passed through: its trees (clusters), its cost on the
    sampled documents, and their duplicates there: copies of a document that reach a broker
    already reached on another of its trees (the paper's Fig. 7; its publisher's broker
    not counted)."""
    trees: int
    cost: int
    duplicates: int


class _Steps:
    """The steps of one merge sequence, each cluster's reach per document kept so that a
    merge recounts only the documents of the clusters it joins. ``channels``: the clusters
    are SemCast channels (a matching document reaches every broker of the channel)."""

    def __init__(self, planner: Planner, clusters, channels: bool = False) -> None:
        self.planner = planner
        self.channels = channels
        self.reach: dict[frozenset, dict[int, set[int]]] = {}  # cluster -> document -> brokers it reaches
        self.clusters_of: dict[int, list[frozenset]] = {}  # document -> the clusters it is sent on
        self.duplicates: dict[int, int] = {}
        for cluster in clusters:
            self._add(cluster)
        for doc in self.clusters_of:
            self._recount(doc)
        self.cost = planner.cost(list(clusters))
        self.taken = [self._step()]

    def merged(self, parts, merged: Cluster) -> None:
        for part in parts:
            for doc in self.reach.pop(part.groups):
                self.clusters_of[doc].remove(part.groups)
        self._add(merged)
        for doc in merged.docs:
            self._recount(doc)
        self.cost += merged.cost - sum(part.cost for part in parts)
        self.taken.append(self._step())

    def _add(self, cluster: Cluster) -> None:
        planner, reach = self.planner, {}
        channel = planner.channel_brokers(cluster.groups) if self.channels else None
        for doc in cluster.docs:
            brokers = planner.docs[doc].brokers(cluster.groups) if channel is None else channel | {planner.docs[doc].publisher}
            nodes = cluster.tree.joining_nodes(planner.index[b] for b in brokers)
            reach[doc] = nodes - {planner.index[planner.docs[doc].publisher]}
            self.clusters_of.setdefault(doc, []).append(cluster.groups)
        self.reach[cluster.groups] = reach

    def _recount(self, doc: int) -> None:
        reached = [self.reach[groups][doc] for groups in self.clusters_of[doc]]
        self.duplicates[doc] = sum(map(len, reached)) - len(set().union(*reached))

    def _step(self) -> Step:
        return Step(len(self.reach), self.cost, sum(self.duplicates.values()))


class Planner:
    """Computes configurations (clusters with one tree each) for one overlay and one window
    of sampled documents; caches each cluster's tree, so a clustering pays COMPUTETREE once
    per cluster it considers. ``trees_computed`` counts those calls (the work measure).
    ``steps``: after MULT, MULT2 or SemCast, each configuration of its merge sequence in order
    (``Step``: the paper's Figs. 6 and 7), from one cluster per group on."""

    def __init__(self, graph: nx.Graph, docs: list[Doc], seed: int = 0,
                 members: dict[str, tuple[str, ...]] | None = None, span: str = "union") -> None:
        """``members``: per group, the brokers of all its subscriptions (SemCast's channels);
        ``span``: what COMPUTETREE's low-stretch tree spans (``compute_tree``)."""
        self.graph = graph
        self.span = span
        self.members = members or {}
        self.names = sorted(graph)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.docs = docs
        self.seed = seed
        self.trees_computed = 0
        self.steps: list[Step] = []
        self._clusters: dict[frozenset, Cluster] = {}
        self._channels: dict[frozenset, Cluster] = {}
        self._steiner: dict[frozenset, list] = {}  # terminal set -> Steiner tree edges
        self.docs_of: dict[str, set[int]] = {}
        for i, doc in enumerate(docs):
            for group, _ in doc.groups:
                self.docs_of.setdefault(group, set()).add(i)

    def cluster(self, groups) -> Cluster:
        groups = frozenset(groups)
        found = self._clusters.get(groups)
        if found is None:
            indices = self._doc_indices(groups)
            docs = [self.docs[i] for i in indices]
            arrays = compute_tree(self.graph, docs, groups, self.seed, self._steiner, self.span)
            self.trees_computed += 1
            found = Cluster(groups, indices, arrays, cluster_cost(arrays, self.index, docs, groups))
            self._clusters[groups] = found
        return found

    def channel(self, groups) -> Cluster:
        """A SemCast channel of ``groups``: a Steiner tree over the brokers of all their
        subscriptions (grown to span the overlay by shortest paths, so that every publisher
        reaches it), every matching document sent to all of them."""
        groups = frozenset(groups)
        found = self._channels.get(groups)
        if found is None:
            brokers = self.channel_brokers(groups)
            arrays = spanning_tree(hops_of(self.graph), steiner(self.graph, brokers))
            self.trees_computed += 1
            found = Cluster(groups, self._doc_indices(groups), arrays, self.cost_on(arrays, groups, flooded=True))
            self._channels[groups] = found
        return found

    def channel_brokers(self, groups) -> set[str]:
        return set().union(*(self.members.get(g, ()) for g in groups))

    def cost(self, clusters: list[Cluster]) -> int:
        return sum(c.cost for c in clusters)

    def cost_on(self, tree: Tree, groups, flooded: bool = False) -> int:
        """The cost of a cluster of ``groups`` on a given tree (SPT, the current trees);
        ``flooded``: as a SemCast channel."""
        groups = frozenset(groups)
        docs = [self.docs[i] for i in self._doc_indices(groups)]
        return cluster_cost(tree, self.index, docs, groups, self.channel_brokers(groups) if flooded else None)

    def flooded_cost(self, tree: Tree) -> int:
        """The documents' cost without content filtering: each crosses every edge of ``tree``."""
        return len(self.docs) * tree.joining_edges(range(len(self.names)))

    def configuration_cost(self, trees: list[Tree], cluster_of_group: dict[str, int], flooded: bool = False) -> int:
        """A configuration's cost: every sampled group on the tree of its cluster (cluster 0
        for a group the configuration does not name); ``flooded``: the clusters but 0 as
        SemCast channels, which reach the brokers of all their groups, sampled or not."""
        members: dict[int, set[str]] = {}
        for group in self.sampled_groups():
            members.setdefault(cluster_of_group.get(group, 0), set()).add(group)
        for group, cluster in cluster_of_group.items():
            if cluster in members:
                members[cluster].add(group)
        return sum(self.cost_on(trees[c], groups, flooded=flooded and c > 0) for c, groups in sorted(members.items()))

    def _doc_indices(self, groups) -> tuple[int, ...]:
        return tuple(sorted(set().union(*(self.docs_of.get(g, set()) for g in groups))))

    def sampled_groups(self) -> list[str]:
        return sorted(self.docs_of)

    def single(self) -> list[Cluster]:
        """SINGLE: one COMPUTETREE tree for every group."""
        return [self.cluster(self.sampled_groups())]

    def mult2(self) -> list[Cluster]:
        """MULT2 (Algorithm 2): from one cluster per group, merge the pair with the largest
        cost reduction until no merge reduces cost. Only pairs sharing a document are
        considered: the cost of documents matching one side only cannot fall by merging."""
        clusters = {min(c.groups): c for c in (self.cluster([g]) for g in self.sampled_groups())}
        steps = _Steps(self, clusters.values())
        while True:
            best, best_gain = None, 0
            for a, b in self._overlapping_pairs(clusters):
                merged = self.cluster(clusters[a].groups | clusters[b].groups)
                gain = clusters[a].cost + clusters[b].cost - merged.cost
                if gain > best_gain:
                    best, best_gain = (a, b), gain
            if best is None:
                self.steps = steps.taken
                return [clusters[k] for k in sorted(clusters)]
            a, b = best
            parts = clusters.pop(a), clusters.pop(b)
            merged = self.cluster(parts[0].groups | parts[1].groups)
            clusters[min(merged.groups)] = merged
            steps.merged(parts, merged)

    def mult(self) -> list[Cluster]:
        """MULT (Algorithm 3): from one cluster per group, merge the pair whose documents
        overlap most (Jaccard similarity) until one cluster is left, and keep the cheapest
        configuration seen. Once no two clusters share a document, the last step merges all
        of them at once (the similarity of every pair is 0: the order would be arbitrary)."""
        return self._merge_by_similarity(self.cluster)

    def semcast(self) -> list[Cluster]:
        """SemCast's channels: MULT's merging by document overlap, each candidate built and
        costed as a SemCast channel (``channel``), keeping the cheapest configuration."""
        return self._merge_by_similarity(self.channel)

    def _merge_by_similarity(self, build) -> list[Cluster]:
        clusters = {min(c.groups): c for c in (build([g]) for g in self.sampled_groups())}
        steps = _Steps(self, clusters.values(), channels=build == self.channel)
        best = list(clusters.values())
        best_cost = self.cost(best)
        while len(clusters) > 1:
            pairs = self._overlapping_pairs(clusters)
            if pairs:
                a, b = max(pairs, key=lambda p: self._similarity(clusters[p[0]], clusters[p[1]]))
                parts = clusters.pop(a), clusters.pop(b)
            else:
                parts, clusters = tuple(clusters.values()), {}
            merged = build(frozenset().union(*(c.groups for c in parts)))
            clusters[min(merged.groups)] = merged
            steps.merged(parts, merged)
            cost = self.cost(list(clusters.values()))
            if cost < best_cost:
                best, best_cost = [clusters[k] for k in sorted(clusters)], cost
        self.steps = steps.taken
        return sorted(best, key=lambda c: min(c.groups))

    @staticmethod
    def _similarity(a: Cluster, b: Cluster) -> float:
        shared = len(set(a.docs) & set(b.docs))
        return shared / len(set(a.docs) | set(b.docs))

    def _overlapping_pairs(self, clusters: dict[str, Cluster]) -> list[tuple[str, str]]:
        """Pairs of cluster keys (in key order) that share at least one document."""
        holders: dict[int, list[str]] = {}
        for key in sorted(clusters):
            for doc in clusters[key].docs:
                holders.setdefault(doc, []).append(key)
        pairs = set()
        for keys in holders.values():
            pairs.update(combinations(keys, 2))
        return sorted(pairs)


# ---------------------------------------------------------------------- configurations


UNSAMPLED = ("base", "largest")  # where groups no sampled document matched ride (``configure``)


def configure(planner: Planner, algorithm: str, base: Tree, single_for_all: bool = False,
              unsampled: str = "base") -> tuple[list[Tree], dict[str, int], int]:
    """The configuration ``algorithm`` plans from the planner's documents: its trees (cluster 0
    is ``base``, for the groups no cluster names; SPT's is its one tree), the cluster of each
    group, and its cost on those documents. ``single_for_all``: SINGLE's tree serves every
    group of ``planner.members``, sampled or not (the paper's SINGLE: one tree for all);
    otherwise groups without samples stay on ``base``, as the coordinator keeps them, or with
    ``unsampled="largest"`` (ours, a variant) on the tree of the cluster with the most sampled
    documents, so that a document never sampled travels fewer trees."""
    if unsampled not in UNSAMPLED:
        raise ValueError(f"unsampled: expected one of {', '.join(UNSAMPLED)}, got {unsampled!r}")
    if algorithm == "SPT":
        tree = Tree(spt(planner.graph, planner.seed), planner.names)
        return [tree], {}, planner.cost_on(tree, planner.sampled_groups())
    if algorithm == "OPT":
        return [base], {}, opt_cost(planner.graph, planner.docs)
    plans = {"SINGLE": planner.single, "MULT": planner.mult, "MULT2": planner.mult2,
             "SemCast": planner.semcast, "SemCast-filtered": planner.semcast}
    clusters = plans[algorithm]()
    groups = {g: i for i, c in enumerate(clusters, start=1) for g in sorted(c.groups)}
    if single_for_all and algorithm == "SINGLE":
        groups |= {g: 1 for g in sorted(planner.members) if g not in groups}
    elif unsampled == "largest":
        largest = 1 + max(range(len(clusters)), key=lambda i: (len(clusters[i].docs), -i))
        groups |= {g: largest for g in sorted(planner.members) if g not in groups}
    cost = (planner.cost(clusters) if algorithm != "SemCast-filtered"
            else sum(planner.cost_on(c.tree, c.groups) for c in clusters))
    return [base] + [c.tree for c in clusters], groups, cost


@dataclass(frozen=True, eq=False)
class Plan:
    """What an install carries: one object shared by every broker, never changed. Per
    registered subscription (arrays, in registration order) its group, home broker index and
    cluster; per group (index g) its text and filter."""

    epoch: int
    trees: tuple[Tree, ...]
    cluster_of_group: dict[str, int]
    groups: tuple[tuple[str, Filter], ...]
    sub_group: np.ndarray
    sub_home: np.ndarray
    by_home: dict[int, dict]  # home broker index -> its registered subscriptions' keys -> group index
    opt: bool = False
    flooded: bool = False  # SemCast: a copy goes to every broker of the channel

    @cached_property
    def group_index(self) -> dict[str, int]:
        return {text: g for g, (text, _) in enumerate(self.groups)}

    @cached_property
    def group_cluster(self) -> np.ndarray:
        return np.array([self.cluster_of_group.get(text, 0) for text, _ in self.groups], np.int64)

    @cached_property
    def sub_cluster(self) -> np.ndarray:
        return self.group_cluster[self.sub_group]

    @cached_property
    def index(self) -> FilterIndex:
        """The groups' filters (keys: group indices), built once per process and shared by
        every broker there (each points ``work`` at its own counters before a query)."""
        index = FilterIndex()
        for g, (_, f) in enumerate(self.groups):
            index.add(g, f)
        return index

    def __getstate__(self) -> dict:
        """Without what each process derives (the index above all)."""
        derived = ("group_index", "group_cluster", "sub_cluster", "index")
        return {k: v for k, v in self.__dict__.items() if k not in derived}

    def homes(self, text: str) -> Counter:
        """The home brokers of a group's registered subscriptions (with multiplicity)."""
        g = self.group_index.get(text)
        return Counter() if g is None else Counter(self.sub_home[self.sub_group == g].tolist())


class Coordinator:
    """The coordinator broker's planning role: the registered subscriptions (key -> filter
    and home broker index), the window of sampled documents, and the plans: the first at its
    first tick with a sample, then every ``recompute``, installed when it improves on the
    current one by more than ``improvement`` (SPT and OPT once); with an offline plan, one
    plan from the sample drawn before the run. ``settings``: the protocol's
    ``MultitreeSettings``; ``offline``: that sample, (time, [(publisher, publication)])."""

    def __init__(self, overlay, settings, seed: int, offline=None) -> None:
        self.overlay = overlay
        self.settings = settings
        self.seed = seed
        self.offline = offline
        self.registry: dict[tuple[str, int], tuple[Filter, int]] = {}
        self.registry_index = FilterIndex()
        self.window: deque = deque()  # (t, Doc)
        self.next_recompute = 0  # the first plan as soon as there is a sample
        self.current: Plan | None = None
        self.installing: tuple[int, set] | None = None  # (epoch, brokers ready)
        self.epoch_count = 0

    def register(self, key, f: Filter, home: int) -> None:
        self.registry[key] = (f, home)
        self.registry_index.add(key, f)

    def unregister(self, key) -> None:
        if self.registry.pop(key, None) is not None:
            self.registry_index.remove(key)

    def sample(self, now: int, publication, publisher: int) -> None:
        self.window.append((now, self.document(publication, publisher)))

    def ready(self, epoch: int, broker: str) -> bool:
        """A broker has installed ``epoch``; True once every broker has (activate it)."""
        if not self.installing or epoch != self.installing[0]:
            return False
        ready = self.installing[1]
        ready.add(broker)
        if len(ready) < len(self.overlay.names):
            return False
        self.installing = None
        return True

    def document(self, publication, publisher: int) -> Doc:
        names = self.overlay.names
        groups: dict[str, set[str]] = {}
        for key in self.registry_index.keys_of(self.registry_index.match(publication).slots):
            f, home = self.registry[key]
            groups.setdefault(str(f), set()).add(names[home])
        return Doc(names[publisher], tuple(sorted((g, tuple(sorted(b))) for g, b in groups.items())))

    def plan_due(self, now: int) -> tuple[dict, Plan | None] | None:
        """At a tick: None, or a plan computed (what the ``multitree_recomputed`` event says of
        it, and the plan to install or None)."""
        if now < self.next_recompute:
            return None
        if self.settings.plan == "offline":
            return self._plan_offline(now)
        while self.window and self.window[0][0] < now - self.settings.window_us:
            self.window.popleft()
        if self.installing is not None or not self.window:
            return None  # again at the next tick
        if self.current is not None and self.settings.algorithm in ("SPT", "OPT"):
            return None
        self.next_recompute = now + self.settings.recompute_us
        return self._recompute()

    def _plan_offline(self, now: int):
        """The paper's evaluation: one plan, at the first tick from the workload's first
        publication on, from the sample of its documents drawn before the run (matched against
        the subscriptions registered by then)."""
        at_us, sample = self.offline
        if self.current is not None or now < at_us or not sample:
            return None
        index = self.overlay.index
        self.window = deque((now, self.document(publication, index[publisher])) for publisher, publication in sample)
        return self._recompute()

    def members(self) -> dict[str, tuple[str, ...]]:
        """Per group, the brokers of its registered subscriptions."""
        names, members = self.overlay.names, {}
        for f, home in self.registry.values():
            members.setdefault(str(f), set()).add(names[home])
        return {g: tuple(sorted(b)) for g, b in members.items()}

    def _recompute(self) -> tuple[dict, Plan | None]:
        docs = [doc for _, doc in self.window]
        settings, graph = self.settings, self.overlay.graph
        planner = Planner(graph, docs, self.seed, self.members(), settings.span)
        before = self.plan_cost(planner)
        offline = settings.plan == "offline"  # the paper's evaluation: its SINGLE serves every group
        tree_list, groups, cost = configure(planner, settings.algorithm, self.overlay.base, single_for_all=offline,
                                            unsampled=settings.unsampled)
        install = before is None or (before - cost) > settings.improvement * before
        steps = {"steps": [[s.trees, s.cost, s.duplicates] for s in planner.steps]} if planner.steps else {}
        recomputed = dict(algorithm=settings.algorithm, docs=len(docs), clusters=len(tree_list), cost_before=before,
                          cost_after=cost, trees_computed=planner.trees_computed, installed=install, **steps)
        if not install:
            return recomputed, None
        self.epoch_count += 1
        plan = self._plan(self.epoch_count, tree_list, groups)
        self.current, self.installing = plan, (plan.epoch, set())
        return recomputed, plan

    def _plan(self, epoch: int, tree_list: list[Tree], cluster_of_group: dict[str, int]) -> Plan:
        algorithm = self.settings.algorithm
        texts: dict[str, int] = {}
        groups, sub_group, sub_home, by_home = [], [], [], {}
        for key, (f, home) in self.registry.items():
            text = str(f)
            if text not in texts:
                texts[text] = len(groups)
                groups.append((text, f))
            sub_group.append(texts[text])
            sub_home.append(home)
            by_home.setdefault(home, {})[key] = texts[text]
        return Plan(epoch, tuple(tree_list), cluster_of_group, tuple(groups), np.array(sub_group, np.int64),
                    np.array(sub_home, np.int64), by_home, opt=algorithm == "OPT", flooded=algorithm == "SemCast")

    def plan_cost(self, planner: Planner) -> int | None:
        """The current configuration's cost on the window (None while publications flood)."""
        plan = self.current
        if plan is None:
            return None
        if plan.opt:
            return opt_cost(planner.graph, planner.docs)
        return planner.configuration_cost(plan.trees, plan.cluster_of_group, plan.flooded)
