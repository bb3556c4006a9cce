"""Dissemination trees for content-aware multi-tree routing (protocols/multitree.py): the cost
model and COMPUTETREE (Algorithm 1) with a low-stretch spanning tree, approximate Steiner
trees and the overlay's hop distances. The clusterings that use them (MULT2, MULT, the
baselines) are protocols/planning.py.

Everything is in the hop metric: the communication cost the paper minimises is publication
copies, one per tree edge a copy crosses. The unit clustered is a subscription *group*: the
subscriptions with one filter (text), wherever they are. Approximate Steiner trees are
Mehlhorn's 2-approximation, computed from the overlay's table of hop distances (``Hops``), and
trees are index arrays (``Tree``): a planner computes thousands of them. Pure functions over
networkx graphs; every tie is broken by name or index order, so results depend only on their
inputs.
"""
from __future__ import annotations

import math
import random
import weakref
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
from networkx.utils import UnionFind
from numba import njit


@dataclass(frozen=True)
class Doc:
    """A sampled publication: its publisher's broker and, per subscription group it matches,
    the brokers of that group's matching subscriptions."""

    publisher: str
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (group, brokers), sorted

    def brokers(self, groups) -> set[str]:
        """The publisher and the brokers of the matching subscriptions of ``groups``."""
        found = {self.publisher}
        for group, brokers in self.groups:
            if group in groups:
                found.update(brokers)
        return found


def meet(parent, depth, a: int, b: int) -> int:
    """The deepest common ancestor of ``a`` and ``b`` in a rooted tree (``parent`` and ``depth``
    indexed by node)."""
    while depth[a] > depth[b]:
        a = parent[a]
    while depth[b] > depth[a]:
        b = parent[b]
    while a != b:
        a, b = parent[a], parent[b]
    return a


@njit(cache=True, nogil=True)
def _depth_first(start, neighbours, parent, depth, tin, tout):
    """Depth first from node 0 over adjacency arrays (the neighbours of node i, in order:
    ``neighbours[start[i]:start[i + 1]]``), filling each reached node's parent, depth and
    entry and exit times; returns how many nodes it reached."""
    n = parent.shape[0]
    seen = np.zeros(n, np.bool_)
    cursor = start[:-1].copy()
    stack = np.empty(n, np.int64)
    seen[0], stack[0], top, clock, reached = True, 0, 1, 1, 1
    while top > 0:
        node = stack[top - 1]
        while cursor[node] < start[node + 1] and seen[neighbours[cursor[node]]]:
            cursor[node] += 1
        if cursor[node] == start[node + 1]:
            tout[node] = clock
            top -= 1
            continue
        child = neighbours[cursor[node]]
        seen[child] = True
        parent[child], depth[child], tin[child] = node, depth[node] + 1, clock
        clock += 1
        reached += 1
        stack[top] = child
        top += 1
    return reached


class Tree:
    """A spanning tree over the brokers (indexed in name order), rooted at index 0, as arrays:
    ``parent`` (-1 at the root), ``depth``, and pre-order entry/exit times ``tin``/``tout``
    (``b`` is in the subtree of ``a`` when ``tin[a] <= tin[b] < tout[a]``)."""

    def __init__(self, graph: nx.Graph, names: list[str]) -> None:
        index = {name: i for i, name in enumerate(names)}
        self._root_at_zero(np.array([(index[a], index[b]) for a, b in graph.edges], np.int64).reshape(-1, 2),
                           len(names))

    @classmethod
    def from_edges(cls, edges, n: int) -> "Tree":
        """The tree of ``edges`` (pairs of broker indices) over ``n`` brokers."""
        tree = cls.__new__(cls)
        tree._root_at_zero(np.array(edges, np.int64).reshape(-1, 2), n)
        return tree

    def edges(self) -> list[tuple[int, int]]:
        """The tree's edges as (parent, child) broker indices."""
        return [(int(parent), child) for child, parent in enumerate(self.parent) if parent >= 0]

    def _root_at_zero(self, edges: np.ndarray, n: int) -> None:
        """Depth first from broker 0 over ``edges`` (each broker's neighbours in index order)."""
        ends = np.concatenate([edges, edges[:, ::-1]])
        ends = ends[np.lexsort((ends[:, 1], ends[:, 0]))]
        start = np.concatenate([[0], np.cumsum(np.bincount(ends[:, 0], minlength=n))]).astype(np.int64)
        self.parent = np.full(n, -1, np.int32)
        self.depth = np.zeros(n, np.int32)
        self.tin = np.zeros(n, np.int32)
        self.tout = np.zeros(n, np.int32)
        if _depth_first(start, ends[:, 1].copy(), self.parent, self.depth, self.tin, self.tout) < n:
            raise ValueError("the tree does not span every broker")

    def joining_edges(self, nodes) -> int:
        """Edges of the smallest subtree joining ``nodes`` (broker indices)."""
        return max(len(self.joining_nodes(nodes)) - 1, 0)

    def joining_nodes(self, nodes) -> set[int]:
        """The brokers of the smallest subtree joining ``nodes`` (broker indices)."""
        nodes = sorted(set(nodes))
        if len(nodes) < 2:
            return set(nodes)
        parent = self.parent
        top = nodes[0]
        for node in nodes[1:]:
            top = meet(parent, self.depth, top, node)
        marked = {top}
        for node in nodes:
            while node not in marked:
                marked.add(node)
                node = parent[node]
        return marked

    def next_hops(self, node: int, targets: np.ndarray) -> np.ndarray:
        """Per target broker index, the neighbour of ``node`` on the tree path toward it (the
        node itself for a target equal to it)."""
        children = np.flatnonzero(self.parent == node)
        children = children[np.argsort(self.tin[children])]
        hops = np.full(len(targets), self.parent[node], np.int64)
        below = (self.tin[targets] > self.tin[node]) & (self.tin[targets] < self.tout[node])
        if below.any():
            position = np.searchsorted(self.tin[children], self.tin[targets[below]], side="right") - 1
            hops[below] = children[position]
        hops[targets == node] = node
        return hops


def bfs_tree(graph: nx.Graph, root: str) -> nx.Graph:
    """The breadth-first (hop shortest-path) tree from ``root``, neighbours in name order."""
    hops = hops_of(graph)
    tree = nx.Graph()
    tree.add_node(root)
    tree.add_edges_from((hops.names[a], hops.names[b]) for a, b in _grown(hops, [], [hops.index[root]]))
    return tree


def spt(graph: nx.Graph, seed: int) -> nx.Graph:
    """SPT: the shortest-path tree from a root drawn from the seeded generator."""
    names = sorted(graph)
    return bfs_tree(graph, names[random.Random(f"{seed}/spt").randrange(len(names))])


# ---------------------------------------------------------------------- low-stretch trees


def low_stretch_tree(graph: nx.Graph, length: str = "length", seed: int = 0) -> nx.Graph:
    """A low-stretch spanning tree of a connected graph (Alon, Karp, Peleg and West, "A
    graph-theoretic game and its application to the k-server problem", 1995): edges fall into
    length classes of ratio ``y``; round j contracts the current clusters, grows balls over
    the edges of classes up to j (breadth first, from cluster representatives in a seeded
    order, stopping at the first layer whose outgoing edges are at most 1/x of the edges
    inside), keeps each ball's breadth-first edges and merges the ball into one cluster."""
    names = sorted(graph)
    if len(names) < 2:
        return graph.subgraph(names).copy()
    lengths = {_edge(a, b): float(d.get(length, 1.0)) for a, b, d in graph.edges(data=True)}
    shortest = min(lengths.values())
    n = len(names)
    x = max(2.0, math.exp(math.sqrt(math.log(n) * math.log(max(math.log(n), 2.0)))))
    y = 4 * x
    klass = {e: int(math.log(value / shortest, y)) for e, value in lengths.items()}
    rng = random.Random(f"{seed}/low_stretch_tree")
    cluster = {name: name for name in names}
    members = {name: [name] for name in names}
    tree = nx.Graph()
    tree.add_nodes_from(names)
    level = 0
    while tree.number_of_edges() < n - 1:
        contracted = _contracted(cluster, klass, level)
        if not contracted:
            level += 1
            continue
        for ball in _balls(contracted, rng, x):
            for a, b in ball.edges:
                tree.add_edge(*ball.edges[a, b]["original"])
            root = min(ball)
            for member in sorted(ball):
                if member != root:
                    moved = members.pop(member)
                    for name in moved:
                        cluster[name] = root
                    members[root].extend(moved)
        level += 1
    return tree


def _edge(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _contracted(cluster: dict[str, str], klass: dict, level: int) -> dict[str, dict[str, list]]:
    """Clusters linked by edges of classes up to ``level``: cluster -> neighbour -> [count,
    the first such original edge in name order]."""
    contracted: dict[str, dict[str, list]] = {}
    for (a, b), k in sorted(klass.items()):
        ca, cb = cluster[a], cluster[b]
        if k > level or ca == cb:
            continue
        for here, there in ((ca, cb), (cb, ca)):
            entry = contracted.setdefault(here, {}).setdefault(there, [0, (a, b)])
            entry[0] += 1
    return contracted


def _balls(contracted: dict[str, dict[str, list]], rng: random.Random, x: float):
    """Partition the contracted clusters into breadth-first balls (each an nx tree whose edges
    carry the ``original`` edge)."""
    order = sorted(contracted)
    rng.shuffle(order)
    taken: set[str] = set()
    for start in order:
        if start in taken:
            continue
        ball = nx.Graph()
        ball.add_node(start)
        taken.add(start)
        layer, inside = [start], 0
        while True:
            reached: dict[str, tuple[str, str]] = {}
            outgoing = 0
            for node in layer:
                for other, (count, original) in sorted(contracted[node].items()):
                    if other in taken:
                        continue
                    outgoing += count
                    reached.setdefault(other, (node, original))
            if not reached or outgoing <= inside / x:
                break
            for other, (node, original) in reached.items():
                ball.add_edge(node, other, original=original)
                taken.add(other)
            inside = sum(count for node in ball for other, (count, _) in contracted[node].items() if other in ball) // 2
            layer = list(reached)
        yield ball


def average_stretch(graph: nx.Graph, tree: nx.Graph) -> float:
    """Mean over the graph's edges of the tree distance between their ends (hops)."""
    total = 0
    for a, b in graph.edges:
        total += nx.shortest_path_length(tree, a, b)
    return total / graph.number_of_edges()


# ---------------------------------------------------------------------- COMPUTETREE


@njit(cache=True, nogil=True)
def _all_pairs_hops(start, neighbours, dist):
    """Fills ``dist`` (n x n, -1 everywhere) with the hop distances between every two nodes of
    a graph given as adjacency arrays (the neighbours of node i are
    ``neighbours[start[i]:start[i + 1]]``): a breadth-first search from each node; -1 stays
    where a node cannot be reached."""
    n = dist.shape[0]
    queue = np.empty(n, np.int64)
    for source in range(n):
        row = dist[source]
        row[source] = 0
        queue[0], head, tail = source, 0, 1
        while head < tail:
            node = queue[head]
            head += 1
            for k in range(start[node], start[node + 1]):
                other = neighbours[k]
                if row[other] < 0:
                    row[other] = row[node] + 1
                    queue[tail] = other
                    tail += 1


class Hops:
    """A graph in arrays: its brokers in name order, each one's neighbours (in that order), its
    edges as two arrays and, computed on first use, the hop distance between every two brokers
    as a table (a Steiner tree is then a few look-ups, ``steiner``)."""

    def __init__(self, graph: nx.Graph) -> None:
        self.names = sorted(graph)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.neighbours = [sorted(self.index[m] for m in graph.neighbors(name)) for name in self.names]
        pairs = np.array([(i, m) for i, a in enumerate(self.neighbours) for m in a if i < m], np.int64).reshape(-1, 2)
        self.edge_a, self.edge_b = pairs[:, 0], pairs[:, 1]

    @cached_property
    def dist(self) -> np.ndarray:
        n = len(self.names)
        start = np.cumsum([0] + [len(a) for a in self.neighbours]).astype(np.int64)
        flat = np.array([m for a in self.neighbours for m in a], np.int64)
        dist = np.full((n, n), -1, np.int16 if n < 2 ** 15 else np.int32)  # 50 MB at 5,000 brokers
        _all_pairs_hops(start, flat, dist)
        if (dist < 0).any():
            raise ValueError("the graph is not connected: no tree joins every broker")
        return dist

    def path(self, a: int, b: int) -> list[int]:
        """A shortest path from ``a`` to ``b``, each step to the lowest-numbered neighbour nearer ``b``."""
        toward, path = self.dist[b], [a]
        while a != b:
            a = next(m for m in self.neighbours[a] if toward[m] == toward[a] - 1)
            path.append(a)
        return path


_HOPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> its Hops


def hops_of(graph: nx.Graph) -> Hops:
    """The graph's ``Hops``, computed once per graph: a graph must not change once trees are
    computed on it (overlays never do)."""
    found = _HOPS.get(graph)
    if found is None:
        found = _HOPS[graph] = Hops(graph)
    return found


def steiner(graph: nx.Graph, terminals) -> nx.Graph:
    """An approximate Steiner tree joining ``terminals`` in the hop metric: Mehlhorn's
    2-approximation (as networkx's ``steiner_tree(method="mehlhorn")``, on the graph's distance
    table). Each broker belongs to its nearest terminal (ties: the first in name order); two
    terminals are as far apart as the shortest path through an edge between their regions;
    a minimum spanning tree of the terminals under that distance, each of its edges expanded
    into a shortest path, spanned by a tree, leaves that are no terminal removed."""
    terminals = sorted(terminals)
    tree = nx.Graph()
    if len(terminals) < 2:
        tree.add_nodes_from(terminals)
        return tree
    hops = hops_of(graph)
    ends = np.array([hops.index[t] for t in terminals])
    rows = hops.dist[ends]
    region = rows.argmin(axis=0)
    near = rows.min(axis=0).astype(np.int64)
    a, b = hops.edge_a, hops.edge_b
    cross = region[a] != region[b]
    ra, rb = region[a][cross], region[b][cross]
    low, high = np.minimum(ra, rb), np.maximum(ra, rb)
    length = near[a][cross] + 1 + near[b][cross]
    joined, joins = UnionFind(), 0
    union = set()
    for k in np.lexsort((high, low, length)):
        if _join(joined, int(low[k]), int(high[k])):
            path = hops.path(ends[low[k]], ends[high[k]])
            union.update(_edge(x, y) for x, y in zip(path, path[1:]))
            joins += 1
            if joins == len(ends) - 1:
                break
    spanned = UnionFind()
    tree.add_edges_from((hops.names[x], hops.names[y]) for x, y in sorted(union) if _join(spanned, x, y))
    _prune_leaves(tree, set(terminals))
    return tree


def _join(parts: UnionFind, a: int, b: int) -> bool:
    """Joins the parts of ``a`` and ``b``; False when they were one already."""
    if parts[a] == parts[b]:
        return False
    parts.union(a, b)
    return True


def _prune_leaves(tree: nx.Graph, terminals: set) -> None:
    """Removes leaves that are not terminals until none is left."""
    leaves = [node for node in tree if tree.degree(node) == 1 and node not in terminals]
    while leaves:
        leaf = leaves.pop()
        parent = next(iter(tree[leaf]), None)
        tree.remove_node(leaf)
        if parent is not None and tree.degree(parent) == 1 and parent not in terminals:
            leaves.append(parent)


SPANS = ("union", "overlay")


def compute_tree(graph: nx.Graph, docs: list[Doc], groups, seed: int = 0, known: dict | None = None,
                 span: str = "union") -> Tree:
    """COMPUTETREE (Algorithm 1): per document a Steiner tree joining its publisher and the
    brokers of its matching subscriptions in ``groups``; their union, edges weighted by how
    many documents use them (length 1 / multiplicity); a low-stretch spanning tree of the
    union's largest part; then shortest paths to every broker the tree lacks. ``known`` keeps
    Steiner trees by terminal set across calls.

    ``span="overlay"`` (ours, not the paper's): the low-stretch tree spans the whole overlay,
    every edge with multiplicity one plus the documents using it, so that brokers the samples
    never joined keep a bounded stretch too (documents outside the sample travel between
    them)."""
    if span not in SPANS:
        raise ValueError(f"span: expected one of {', '.join(SPANS)}, got {span!r}")
    known = {} if known is None else known
    used: Counter = Counter()
    for doc in docs:
        terminals = frozenset(doc.brokers(groups))
        if len(terminals) > 1:
            edges = known.get(terminals)
            if edges is None:
                edges = known[terminals] = [_edge(a, b) for a, b in steiner(graph, terminals).edges]
            used.update(edges)
    hops = hops_of(graph)
    if span == "overlay":
        whole = nx.Graph()
        whole.add_nodes_from(graph)
        for a, b in sorted(_edge(a, b) for a, b in graph.edges):
            whole.add_edge(a, b, length=1.0 / (1 + used[(a, b)]))
        return spanning_tree(hops, low_stretch_tree(whole, seed=seed))
    union = nx.Graph()
    for (a, b), count in sorted(used.items()):
        union.add_edge(a, b, length=1.0 / count)
    if union.number_of_nodes() == 0:
        return spanning_tree(hops, union)
    largest = min(nx.connected_components(union), key=lambda part: (-len(part), min(part)))
    return spanning_tree(hops, low_stretch_tree(union.subgraph(largest).copy(), seed=seed))


def spanning_tree(hops: Hops, tree: nx.Graph) -> Tree:
    """``tree`` (a tree over some of the graph's brokers) grown to span the graph, as ``_grown``
    (an empty one: breadth first from the first broker)."""
    index = hops.index
    edges = [(index[a], index[b]) for a, b in tree.edges]
    nodes = [index[node] for node in tree] or [0]
    return Tree.from_edges(_grown(hops, edges, nodes), len(hops.names))


def _grown(hops: Hops, edges: list[tuple[int, int]], nodes: list[int]) -> list[tuple[int, int]]:
    """``edges``, a tree over ``nodes`` (broker indices), grown to span the graph: every missing
    broker joins by a shortest path, breadth first from the tree, brokers in name order."""
    inside = np.zeros(len(hops.names), bool)
    inside[nodes] = True
    grown = list(edges)
    frontier = sorted(nodes)
    while frontier:
        following = []
        for node in frontier:
            for other in hops.neighbours[node]:
                if not inside[other]:
                    inside[other] = True
                    grown.append((node, other))
                    following.append(other)
        frontier = following
    return grown


# ---------------------------------------------------------------------- cost model


def cluster_cost(tree: Tree, index: dict[str, int], docs: list[Doc], groups, channel: set[str] | None = None) -> int:
    """cost(S_i, T_i): over the documents, the edges of the smallest subtree of the tree joining
    the publisher and the brokers of its matching subscriptions in the cluster's groups. With
    ``channel`` (SemCast: the brokers of every subscription of the cluster), a document matching
    the cluster travels to all of them instead."""
    total = 0
    for doc in docs:
        if channel is None:
            brokers = doc.brokers(groups)
        elif any(group in groups for group, _ in doc.groups):
            brokers = channel | {doc.publisher}
        else:
            continue
        if len(brokers) > 1:
            total += tree.joining_edges(index[b] for b in brokers)
    return total


def opt_cost(graph: nx.Graph, docs: list[Doc]) -> int:
    """OPT: a Steiner tree per document over every broker it matches."""
    every = {group for doc in docs for group, _ in doc.groups}
    return sum(steiner(graph, doc.brokers(every)).number_of_edges() for doc in docs)
