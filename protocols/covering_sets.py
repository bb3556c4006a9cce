"""The covering sets of the soft-link paper's working subscription tables, measured on a
finished run: Fig. 12 of "Opportunistic Multi-Path Forwarding in Content-Based
Publish/Subscribe Overlays" (Kazemzadeh and Jacobsen, Middleware 2012).

The paper's broker "compute[s] covering sets for subscriptions with identical anchors", the
anchors of its working subscription table (WST), and forwards a publication over a link when
it matches one subscription of the link's covering set. More links give more distinct WST
anchors, so the subscriptions split into more groups, fewer of them are covered inside their
group, and matching evaluates more predicates (the paper's fragmentation). The emulator's
brokers match with their whole index (protocols/index.py), so this is a measurement made after
the run from what it recorded (``protocol.soft_links.covering_sets``: how often), not a second
matcher inside the run. At each sample time ``t`` and broker ``b``:

- ``b``'s table holds the subscriptions whose ``sub`` message ``b`` began to handle by ``t``,
  less those whose ``unsub`` it did (the ``messages`` table);
- a subscription's master (MST) anchor at ``b`` is the broker on the primary path from ``b``
  toward the subscriber's broker ``delta`` hops away, or the subscriber's broker if nearer
  (S0: the neighbour toward it, the paper's "Delta = 1");
- its WST anchor is the held broker nearest the MST anchor on that path (Step 1 of the WOM,
  edge contraction: a broker ``b`` holds no link to is replaced by the next one toward ``b``);
  the links held are ``b``'s primary neighbours and the soft links it opened and holds at ``t``
  (the static ``links`` and the events ``soft_link_opened`` / ``soft_link_closed``: a soft link
  carries copies from the broker that opened it only, and candidate links carry none); ``b``'s
  own subscriptions form a group of their own;
- the covering set of a group is its subscriptions that no other one of the group covers (of
  equal filters, the first subscribed stands for the rest): ``covering_set_size`` sums them over
  the groups, ``wst_anchors`` counts the groups;
- ``predicate_evaluations``: over the sampled publications ``b`` begins to handle from ``t`` to
  the next sample (``publications`` of them), the predicates a matcher evaluates over those
  covering sets, each subscription's predicates in their order up to its first false one (all
  of them when it matches; a disjunction's disjuncts in turn until one matches), for every
  subscription of the sets (a matcher that stopped at a set's first match would count fewer;
  the paper does not say). Publications are
  sampled evenly over the workload, at most ``PUBLICATION_SAMPLE`` of them;
- ``evaluations_per_publication``: the same count, averaged over every sampled publication as
  if ``b`` matched them all: the covering sets' cost alone, without the change in which
  brokers a publication reaches that links make.
"""
from __future__ import annotations

import json
from typing import Callable, NamedTuple

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .index import FilterIndex
from .language import Filter, satisfies

PUBLICATION_SAMPLE = 400
COLUMNS = ("t_us", "broker", "entries", "wst_anchors", "covering_set_size", "publications", "predicate_evaluations",
           "evaluations_per_publication")
_NONE = np.zeros(0, np.int64)


def measure(graph: nx.Graph, injections: list, strategy: str, delta: int, static_links: dict, every_us: int,
            read: Callable[[str, list[str]], pa.Table]) -> dict[str, list]:
    """The columns of a run's ``covering_sets`` table (see the module's text), a row per broker
    every ``every_us`` up to the run's last sample; ``read(table, columns)`` reads the run's
    tables."""
    brokers = sorted(graph)
    index = {name: i for i, name in enumerate(brokers)}
    filters, origin, sub_row, publications = _workload(injections, index)
    pairs = _covering_pairs(filters)
    sampled, evaluations = _evaluations(filters, publications)
    mean_evaluations = evaluations.mean(axis=0) if len(sampled) else np.zeros(len(filters))
    handled = _handled(read, sub_row, {pub_id: i for i, pub_id in enumerate(sampled)})
    links = _held_links(read, static_links)
    end_us = max(read("samples", ["t_us"])["t_us"].to_pylist(), default=0)
    rows = {name: [] for name in COLUMNS}
    for b, broker in enumerate(brokers):
        paths = _paths_from_anchors(graph, broker, index, 1 if strategy == "S0" else delta)
        neighbours = {index[n] for n in graph[broker]}
        for t in range(every_us, end_us + 1, every_us):
            present = handled.table(broker, t, len(filters))
            held = neighbours | {index[n] for n in links.at(broker, t)}
            groups = _wst_anchors(paths, held, b)[origin]
            in_set = _covering_set(present, groups, pairs)
            which = handled.publications(broker, t, t + every_us)
            for column, value in zip(COLUMNS, (
                    t, broker, int(present.sum()), len(np.unique(groups[present])), int(in_set.sum()), len(which),
                    int(evaluations[which][:, in_set].sum()), float(mean_evaluations[in_set].sum()))):
                rows[column].append(value)
    return rows


def _workload(injections: list, broker_index: dict[str, int]) -> tuple[list[Filter], np.ndarray, dict, list]:
    """The subscriptions' filters and brokers (by index), each subscription id's index, and the
    publications (id, publication) in workload order."""
    filters, origin, sub_row, publications = [], [], {}, []
    for injection in injections:
        message = injection.message
        if message.kind == "sub":
            sub_row[message.id] = len(filters)
            filters.append(message.filter)
            origin.append(broker_index[injection.broker])
        elif message.kind == "pub":
            publications.append((message.id, message.publication))
    return filters, np.array(origin, np.int64), sub_row, publications


def _covering_pairs(filters: list[Filter]) -> tuple[np.ndarray, np.ndarray]:
    """(covered, coverer) index pairs: the coverer covers the covered one and is not the same
    filter subscribed later."""
    index = FilterIndex()
    for i, f in enumerate(filters):
        index.add(i, f)
    found = [(i, c) for i, f in enumerate(filters) for c in index.covering(f) if c != i]
    mutual = set(found)
    kept = [(i, c) for i, c in found if not (c > i and (c, i) in mutual)]
    return np.array([i for i, _ in kept], np.int64), np.array([c for _, c in kept], np.int64)


def _covering_set(present: np.ndarray, groups: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    covered, coverers = pairs
    inside = present[covered] & present[coverers] & (groups[covered] == groups[coverers])
    is_covered = np.zeros(len(present), bool)
    is_covered[covered[inside]] = True
    return present & ~is_covered


def _evaluations(filters: list[Filter], publications: list) -> tuple[list[str], np.ndarray]:
    """The sampled publications' ids, and per sampled publication and subscription the
    predicates a matcher evaluates."""
    step = max(1, -(-len(publications) // PUBLICATION_SAMPLE))
    sampled = publications[::step]
    counts = np.zeros((len(sampled), len(filters)), np.int64)
    for p, (_, publication) in enumerate(sampled):
        values = publication.as_dict()
        counts[p] = [_evaluated(f, values) for f in filters]
    return [pub_id for pub_id, _ in sampled], counts


def _evaluated(f: Filter, values: dict) -> int:
    """Predicates evaluated in order until the first false one, per disjunct until one matches."""
    evaluated = 0
    for disjunct in f.disjuncts:
        for p in disjunct.predicates:
            evaluated += 1
            if p.attr not in values or not satisfies(values[p.attr], p.op, p.value):
                break
        else:
            return evaluated
    return evaluated


class _Timeline(NamedTuple):
    times: np.ndarray  # sorted
    rows: np.ndarray  # a subscription's or sampled publication's index, per time

    def until(self, t_us: int) -> np.ndarray:
        return self.rows[:np.searchsorted(self.times, t_us, "right")]

    def between(self, from_us: int, until_us: int) -> np.ndarray:
        """Rows at times in [from_us, until_us)."""
        return self.rows[np.searchsorted(self.times, from_us):np.searchsorted(self.times, until_us)]


class _Handled:
    """Per broker, when it began to handle each subscription, unsubscription and sampled
    publication."""

    def __init__(self, timelines: dict[tuple[str, str], _Timeline]) -> None:
        self.timelines = timelines  # (broker, kind) -> timeline

    def _of(self, broker: str, kind: str) -> _Timeline:
        return self.timelines.get((broker, kind), _Timeline(_NONE, _NONE))

    def table(self, broker: str, t_us: int, subscriptions: int) -> np.ndarray:
        """Which subscriptions ``broker``'s table holds at ``t_us``."""
        present = np.zeros(subscriptions, bool)
        present[self._of(broker, "sub").until(t_us)] = True
        present[self._of(broker, "unsub").until(t_us)] = False
        return present

    def publications(self, broker: str, from_us: int, until_us: int) -> np.ndarray:
        return self._of(broker, "pub").between(from_us, until_us)


def _handled(read, sub_row: dict[str, int], pub_row: dict[str, int]) -> _Handled:
    table = _sampled_messages(read("messages", ["broker", "kind", "msg_id", "t_start_us"]), pub_row)
    row_of = {"sub": sub_row, "unsub": sub_row, "pub": pub_row}
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for broker, kind, msg_id, start in zip(*(table[c].to_pylist() for c in ("broker", "kind", "msg_id", "t_start_us"))):
        row = row_of.get(kind, {}).get(msg_id)
        if row is not None:
            found.setdefault((broker, kind), []).append((start, row))
    timelines = {}
    for key, handled in found.items():
        handled.sort()
        timelines[key] = _Timeline(np.array([t for t, _ in handled], np.int64), np.array([r for _, r in handled], np.int64))
    return _Handled(timelines)


def _sampled_messages(table: pa.Table, pub_row: dict[str, int]) -> pa.Table:
    """The rows of the ``messages`` table the measurement reads, kept before they become Python
    lists (a full-size run holds millions of rows): every subscription and unsubscription, and
    the sampled publications, once their handling began."""
    kind = table["kind"]
    subscriptions = pc.is_in(kind, pa.array(["sub", "unsub"]))
    sampled = pc.and_(pc.equal(kind, "pub"), pc.is_in(table["msg_id"], pa.array(list(pub_row), pa.string())))
    return table.filter(pc.and_(pc.or_(subscriptions, sampled), pc.is_valid(table["t_start_us"])))


class _HeldLinks:
    """Each broker's soft links over time."""

    def __init__(self, static: dict[str, set[str]], changes: dict[str, list[tuple[int, str, str]]]) -> None:
        self.static, self.changes = static, changes

    def at(self, broker: str, t_us: int) -> set[str]:
        held = set(self.static.get(broker, ()))
        for when, kind, peer in self.changes.get(broker, ()):
            if when > t_us:
                break
            if kind == "soft_link_opened":
                held.add(peer)
            else:
                held.discard(peer)
        return held


def _held_links(read, static_links: dict) -> _HeldLinks:
    events = read("events", ["t_us", "broker", "kind", "detail"])
    changes: dict[str, list[tuple[int, str, str]]] = {}
    for t, broker, kind, detail in zip(*(events[c].to_pylist() for c in ("t_us", "broker", "kind", "detail"))):
        if kind in ("soft_link_opened", "soft_link_closed"):
            changes.setdefault(broker, []).append((t, kind, json.loads(detail)["peer"]))
    for rows in changes.values():
        rows.sort(key=lambda row: row[0])  # stable: a broker's changes at one time keep their order
    return _HeldLinks({b: set(links["soft"]) for b, links in static_links.items()}, changes)


def _paths_from_anchors(graph: nx.Graph, broker: str, index: dict[str, int], delta: int) -> list[list[int]]:
    """Seen from ``broker``: per broker (by ``index``, in name order), the primary path from the
    MST anchor of its subscriptions back toward ``broker``, the anchor first and ``broker``'s
    neighbour last (empty for ``broker`` itself)."""
    parent, depth = {broker: None}, {broker: 0}
    for a, b in nx.bfs_edges(graph, broker, sort_neighbors=sorted):
        parent[b], depth[b] = a, depth[a] + 1
    paths = []
    for name in index:
        node = name
        while depth[node] > delta:
            node = parent[node]
        path = []
        while node != broker:
            path.append(index[node])
            node = parent[node]
        paths.append(path)
    return paths


def _wst_anchors(paths: list[list[int]], held: set[int], itself: int) -> np.ndarray:
    """Per broker, the WST anchor of subscriptions from there: the first held broker on the
    path back from their MST anchor (the neighbours are held); ``itself`` for its own."""
    return np.array([next((n for n in path if n in held), itself) for path in paths], np.int64)
