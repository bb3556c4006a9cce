"""A columnar index of filters answering routing-table questions for a whole table at once.

Each (attribute, type) pair is a column holding, for every entry that constrains it, the
entry's interval bounds as float64 (numbers as themselves, strings as order-preserving
codes from ``Vocabulary``). A query compares one column at a time with numpy, counts per
entry how many of its attributes passed, and keeps entries whose count reaches the target.
Conditions that are not intervals (excluded values, postfixes, substrings) and unsatisfiable
filters are residual: candidates carrying them are re-checked with the scalar oracle of
protocols/language.py, so every answer equals the oracle's exactly. The index counts the
work it does in a ``Work`` record; the runtime's cost model turns that into virtual time.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, fields
from typing import Callable, Hashable

import numpy as np

from .language import (
    NUMERIC,
    STRING,
    Constraint,
    Filter,
    Publication,
    covers,
    intersects,
    matches,
    unsatisfiable,
)

Key = Hashable
_GAP = 1024.0


@dataclass(slots=True)
class Work:
    """Work counters: entries considered and column cells compared, per query family."""

    match_queries: int = 0
    match_entries: int = 0
    match_predicates: int = 0
    cover_queries: int = 0
    cover_entries: int = 0
    cover_predicates: int = 0
    residual_checks: int = 0

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Vocabulary:
    """Order-preserving float codes for strings, with gaps so inserts rarely renumber.

    Codes of known strings are distinct and ordered like the strings; an unknown string gets
    a code strictly between its neighbours', so comparisons against known codes stay exact.
    ``version`` changes whenever existing codes change (the index then re-encodes).
    """

    def __init__(self) -> None:
        self.words: list[str] = []
        self.codes: list[float] = []
        self.code_of: dict[str, float] = {}
        self.version = 0

    def _between(self, i: int) -> float:
        if not self.words:
            return 0.0
        if i == 0:
            return self.codes[0] - _GAP
        if i == len(self.words):
            return self.codes[-1] + _GAP
        return (self.codes[i - 1] + self.codes[i]) / 2

    def _fits(self, code: float, i: int) -> bool:
        return (i == 0 or code > self.codes[i - 1]) and (i == len(self.codes) or code < self.codes[i])

    def add(self, word: str) -> None:
        if word in self.code_of:
            return
        i = bisect.bisect_left(self.words, word)
        code = self._between(i)
        fits = self._fits(code, i)
        self.words.insert(i, word)
        self.codes.insert(i, code)
        self.code_of[word] = code
        if not fits:
            self._renumber()

    def _renumber(self) -> None:
        self.codes = [k * _GAP for k in range(len(self.words))]
        self.code_of = dict(zip(self.words, self.codes))
        self.version += 1

    def code(self, word: str) -> float:
        """The code of ``word``; unknown words get a code between their neighbours'."""
        known = self.code_of.get(word)
        if known is not None:
            return known
        i = bisect.bisect_left(self.words, word)
        code = self._between(i)
        if not self._fits(code, i):  # no float left between the neighbours
            self.add(word)
            return self.code_of[word]
        return code


class _Column:
    """Bounds of every entry constraining one (attribute, type)."""

    __slots__ = ("slots", "lo", "hi", "lo_open", "hi_open", "residual", "size", "position", "raw")
    _ARRAYS = ("slots", "lo", "hi", "lo_open", "hi_open", "residual")

    def __init__(self) -> None:
        self.slots = np.zeros(8, np.int64)
        self.lo = np.zeros(8)
        self.hi = np.zeros(8)
        self.lo_open = np.zeros(8, bool)
        self.hi_open = np.zeros(8, bool)
        self.residual = np.zeros(8, bool)
        self.size = 0
        self.position: dict[int, int] = {}
        self.raw: list[tuple] = []  # string columns: (lo, hi) strings per position, for re-encoding

    def append(self, slot: int, lo: float, lo_open: bool, hi: float, hi_open: bool, residual: bool) -> None:
        if self.size == len(self.slots):
            for name in self._ARRAYS:
                old = getattr(self, name)
                grown = np.zeros(2 * len(old), old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        i = self.size
        self.slots[i], self.lo[i], self.hi[i] = slot, lo, hi
        self.lo_open[i], self.hi_open[i], self.residual[i] = lo_open, hi_open, residual
        self.position[slot] = i
        self.size += 1

    def remove(self, slot: int) -> None:
        i = self.position.pop(slot)
        last = self.size - 1
        if i != last:
            for name in self._ARRAYS:
                array = getattr(self, name)
                array[i] = array[last]
            self.position[int(self.slots[i])] = i
            if self.raw:
                self.raw[i] = self.raw[last]
        if self.raw:
            self.raw.pop()
        self.size = last

    def view(self):
        n = self.size
        return self.slots[:n], self.lo[:n], self.lo_open[:n], self.hi[:n], self.hi_open[:n]


# Column tests: each takes column views (lo, lo_open, hi, hi_open) and the query's bounds.


def _admits_lower(lo, lo_open, q, q_open):
    """Entry lower bound lets the query's lower bound through (entry starts at or before it)."""
    return (lo < q) | ((lo == q) & (~lo_open | q_open))


def _admits_upper(hi, hi_open, q, q_open):
    return (hi > q) | ((hi == q) & (~hi_open | q_open))


def _test_contains_point(lo, lo_open, hi, hi_open, b):
    v = b[0]
    return ((lo < v) | ((lo == v) & ~lo_open)) & ((hi > v) | ((hi == v) & ~hi_open))


def _test_entry_covers(lo, lo_open, hi, hi_open, b):
    return _admits_lower(lo, lo_open, b[0], b[1]) & _admits_upper(hi, hi_open, b[2], b[3])


def _test_entry_within(lo, lo_open, hi, hi_open, b):
    qlo, qlo_open, qhi, qhi_open = b
    return ((qlo < lo) | ((qlo == lo) & (~np.bool_(qlo_open) | lo_open))) & (
        (qhi > hi) | ((qhi == hi) & (~np.bool_(qhi_open) | hi_open))
    )


def _test_overlap(lo, lo_open, hi, hi_open, b):
    qlo, qlo_open, qhi, qhi_open = b
    below = (hi < qlo) | ((hi == qlo) & (hi_open | qlo_open))
    above = (qhi < lo) | ((qhi == lo) & (qhi_open | lo_open))
    return ~below & ~above


class FilterIndex:
    """A routing table of filters keyed by hashable keys (subscription or advertisement keys).

    Queries return keys in slot order, which depends only on the table's history, so results
    are deterministic. Attributes ``work`` (a shared ``Work``) accumulate the counters.
    """

    def __init__(self, work: Work | None = None) -> None:
        self.work = work if work is not None else Work()
        self.vocabulary = Vocabulary()
        self._encoded_version = 0
        self._columns: dict[tuple[str, str], _Column] = {}
        self._keys: list[Key | None] = []
        self._filters: list[Filter | None] = []
        self._slot_of: dict[Key, int] = {}
        self._free: list[int] = []
        self._n_attrs = np.zeros(8, np.int64)
        self._residual = np.zeros(8, bool)  # excluded values, postfixes or substrings
        self._unsat = np.zeros(8, bool)
        self._live = np.zeros(8, bool)

    # ------------------------------------------------------------------ table upkeep

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, key: Key) -> bool:
        return key in self._slot_of

    def keys(self) -> list[Key]:
        return [self._keys[s] for s in sorted(self._slot_of.values())]

    def filter(self, key: Key) -> Filter:
        return self._filters[self._slot_of[key]]

    def add(self, key: Key, f: Filter) -> None:
        if key in self._slot_of:
            raise KeyError(f"{key!r} is already in the index")
        slot = self._free.pop() if self._free else self._grow()
        self._keys[slot], self._filters[slot] = key, f
        self._slot_of[key] = slot
        constraints = f.constraints
        self._n_attrs[slot] = len(constraints)
        self._unsat[slot] = unsatisfiable(f)
        self._residual[slot] = any(c.residual for c in constraints.values())
        self._live[slot] = True
        for attr, c in constraints.items():
            column = self._columns.get((attr, c.type))
            if column is None:
                column = self._columns[(attr, c.type)] = _Column()
            if c.type == STRING:
                for word in (c.lo, c.hi):
                    if word is not None:
                        self.vocabulary.add(word)
                column.raw.append((c.lo, c.hi))
            column.append(slot, *self._bounds(c), c.residual)

    def remove(self, key: Key) -> Filter:
        slot = self._slot_of.pop(key)
        f = self._filters[slot]
        for attr, c in f.constraints.items():
            self._columns[(attr, c.type)].remove(slot)
        self._keys[slot] = self._filters[slot] = None
        self._live[slot] = False
        self._free.append(slot)
        return f

    def _grow(self) -> int:
        slot = len(self._keys)
        self._keys.append(None)
        self._filters.append(None)
        if slot == len(self._live):
            for name in ("_n_attrs", "_residual", "_unsat", "_live"):
                old = getattr(self, name)
                grown = np.zeros(2 * len(old), old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        return slot

    def _bounds(self, c: Constraint) -> tuple[float, bool, float, bool]:
        lo = -np.inf if c.lo is None else self._encode(c.lo, c.type)
        hi = np.inf if c.hi is None else self._encode(c.hi, c.type)
        return lo, c.lo_open, hi, c.hi_open

    def _encode(self, value, type_: str) -> float:
        return self.vocabulary.code(value) if type_ == STRING else float(value)

    def _reencode_strings(self) -> None:
        if self._encoded_version == self.vocabulary.version:
            return
        for (attr, type_), column in self._columns.items():
            if type_ != STRING:
                continue
            for i, (lo, hi) in enumerate(column.raw):
                column.lo[i] = -np.inf if lo is None else self.vocabulary.code(lo)
                column.hi[i] = np.inf if hi is None else self.vocabulary.code(hi)
        self._encoded_version = self.vocabulary.version

    # ------------------------------------------------------------------ the query engine

    def _count_hits(self, probes, test: Callable, family: str, point_overlaps: bool = False):
        """Per slot, how many probes (attr, type, bounds, residual) its columns passed; with
        ``point_overlaps``, also which slots overlapped a probe in a single point where the
        entry or the probe has residual conditions on that attribute."""
        self._reencode_strings()
        hits, points = [], []
        compared = 0
        for attr, type_, bounds, probe_residual in probes:
            column = self._columns.get((attr, type_))
            if column is None or column.size == 0:
                continue
            slots, lo, lo_open, hi, hi_open = column.view()
            compared += column.size
            passed = test(lo, lo_open, hi, hi_open, bounds)
            hits.append(slots[passed])
            if point_overlaps:
                touching = np.maximum(lo[passed], bounds[0]) == np.minimum(hi[passed], bounds[2])
                if not probe_residual:
                    touching &= column.residual[: column.size][passed]
                points.append(hits[-1][touching])
        work = self.work
        if family == "match":
            work.match_queries += 1
            work.match_entries += len(self._slot_of)
            work.match_predicates += compared
        else:
            work.cover_queries += 1
            work.cover_entries += len(self._slot_of)
            work.cover_predicates += compared
        size = len(self._live)
        counts = np.bincount(np.concatenate(hits), minlength=size) if hits else np.zeros(size, np.int64)
        if not point_overlaps:
            return counts
        flagged = np.zeros(size, bool)
        if points:
            flagged[np.concatenate(points)] = True
        return counts, flagged

    def _stable_probes(self, make: Callable[[], list]) -> list:
        """Build query probes; rebuild if encoding a new word renumbered the vocabulary."""
        while True:
            version = self.vocabulary.version
            probes = make()
            if version == self.vocabulary.version:
                return probes

    def _query_bounds(self, f: Filter):
        return self._stable_probes(
            lambda: [(attr, c.type, self._bounds(c), c.residual) for attr, c in f.constraints.items()]
        )

    def _finish(self, candidates: np.ndarray, recheck, exact: Callable[[Filter], bool]) -> list[Key]:
        """Keys of candidate slots; those flagged in ``recheck`` must also pass ``exact``."""
        slots = np.flatnonzero(candidates)
        if recheck is False or not len(slots):
            return [self._keys[s] for s in slots.tolist()]
        doubtful = np.ones(len(slots), bool) if recheck is True else recheck[slots]
        keys = self._keys
        result = []
        for slot, check in zip(slots.tolist(), doubtful.tolist()):
            if check:
                self.work.residual_checks += 1
                if not exact(self._filters[slot]):
                    continue
            result.append(keys[slot])
        return result

    # ------------------------------------------------------------------ the questions

    def matching(self, publication: Publication) -> list[Key]:
        """Keys of the entries (subscriptions) that match ``publication``."""
        probes = self._stable_probes(
            lambda: [
                (attr, STRING, (self.vocabulary.code(v),), False)
                if isinstance(v, str)
                else (attr, NUMERIC, (float(v),), False)
                for attr, v in publication.items
            ]
        )
        counts = self._count_hits(probes, _test_contains_point, "match")
        candidates = self._live & (counts == self._n_attrs)
        return self._finish(candidates, self._residual, lambda e: matches(e, publication))

    def covering(self, f: Filter) -> list[Key]:
        """Keys of the entries that cover ``f``."""
        if unsatisfiable(f):
            self._count_hits([], _test_entry_covers, "cover")
            return self.keys()
        counts = self._count_hits(self._query_bounds(f), _test_entry_covers, "cover")
        candidates = self._live & (counts == self._n_attrs)
        return self._finish(candidates, _has_residual(f) or self._residual, lambda e: covers(e, f))

    def covered_by(self, f: Filter) -> list[Key]:
        """Keys of the entries that ``f`` covers (every unsatisfiable entry among them)."""
        counts = self._count_hits(self._query_bounds(f), _test_entry_within, "cover")
        candidates = self._live & ((counts == len(f.constraints)) | self._unsat)
        recheck = (True if _has_residual(f) else self._residual) & ~self._unsat
        return self._finish(candidates, recheck, lambda e: covers(f, e))

    def intersecting(self, sub: Filter) -> list[Key]:
        """Keys of the entries (advertisements) that intersect subscription ``sub``.

        A residual condition can only empty an overlap that is a single point, so only
        entries touching ``sub`` in a point (or unsatisfiable ones) are re-checked."""
        if unsatisfiable(sub):
            return []
        counts, points = self._count_hits(self._query_bounds(sub), _test_overlap, "cover", point_overlaps=True)
        candidates = self._live & (counts == len(sub.constraints))
        return self._finish(candidates, points | self._unsat, lambda e: intersects(e, sub))

    def intersected_by(self, adv: Filter) -> list[Key]:
        """Keys of the entries (subscriptions) that advertisement ``adv`` intersects."""
        candidates, recheck = self._intersected_candidates(adv)
        return self._finish(candidates, recheck, lambda e: intersects(adv, e))

    def _intersected_candidates(self, adv: Filter):
        counts, points = self._count_hits(self._query_bounds(adv), _test_overlap, "cover", point_overlaps=True)
        candidates = self._live & (counts == self._n_attrs)
        recheck = np.ones(len(self._live), bool) if unsatisfiable(adv) else points | self._unsat
        return candidates, recheck


def _has_residual(f: Filter) -> bool:
    return any(c.residual for c in f.constraints.values())
