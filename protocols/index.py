"""A columnar index of filters answering routing-table questions for a whole table at once.

Each (attribute, type) pair is a column holding, for every entry that constrains it, the
entry's interval bounds as float64 (numbers as themselves, strings as order-preserving
codes from ``Vocabulary``). A query probes the columns of its attributes with the numba
kernels of protocols/kernels.py, counting per entry how many of its attributes passed, and
keeps entries whose count reaches the target; its cost follows the cells probed, not the
table size.
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

from . import kernels
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
    """Work counters: entries considered and column cells compared, per query family:
    ``match`` (publications against subscriptions, subscriptions against advertisements and
    back: PADRES's "matching") and ``cover`` (covering and covered-by queries)."""

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


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    """A zeroed copy of ``array`` with room for ``size`` items, its first ``keep`` kept."""
    grown = np.zeros(size, array.dtype)
    grown[:keep] = array[:keep]
    return grown


class _Arena:
    """The cells of every column of one index, in parallel arrays; columns are segments."""

    def __init__(self) -> None:
        self.slots = np.zeros(64, np.int64)
        self.lo = np.zeros(64)
        self.hi = np.zeros(64)
        self.bits = np.zeros(64, np.uint8)
        self.used = 0
        self.garbage = 0

    def allocate(self, capacity: int) -> int:
        if self.used + capacity > len(self.slots):
            size = max(2 * len(self.slots), self.used + capacity)
            for name in ("slots", "lo", "hi", "bits"):
                setattr(self, name, _grown(getattr(self, name), size, self.used))
        start = self.used
        self.used += capacity
        return start

    def move(self, start: int, size: int, to: int) -> None:
        for array in (self.slots, self.lo, self.hi, self.bits):
            array[to : to + size] = array[start : start + size]


class _Column:
    """The cells of one (attribute, type): a segment of the arena, plus where each slot sits."""

    __slots__ = ("start", "capacity", "size", "position", "raw")

    def __init__(self) -> None:
        self.start = self.capacity = self.size = 0
        self.position: dict[int, int] = {}  # slot -> offset in the segment
        self.raw: list[tuple] = []  # string columns: (lo, hi) strings per offset, for re-encoding


class FilterIndex:
    """A routing table of filters keyed by hashable keys (subscription or advertisement keys).

    Queries return keys in slot order, which depends only on the table's history, so results
    are deterministic. ``work`` (possibly shared by several tables) accumulates the counters.
    """

    def __init__(self, work: Work | None = None) -> None:
        self.work = work if work is not None else Work()
        self.vocabulary = Vocabulary()
        self._encoded_version = 0
        # (attr, type) -> interval cells; (attr, type, value) -> equality cells of that value
        self._columns: dict[tuple, _Column] = {}
        self._buckets: dict[tuple[str, str], dict] = {}  # (attr, type) -> {value: _Column}
        self._arena = _Arena()
        self._keys: list[Key | None] = []
        self._filters: list[Filter | None] = []
        self._slot_of: dict[Key, int] = {}
        self._free: list[int] = []
        self._unsat_slots: set[int] = set()
        # per slot; _counts and _flags are all zero between queries (see protocols/kernels.py)
        self._n_attrs = np.zeros(8, np.int64)
        self._residual = np.zeros(8, bool)  # excluded values, postfixes or substrings
        self._unsat = np.zeros(8, bool)
        self._counts = np.zeros(8, np.int64)
        self._flags = np.zeros(8, np.uint8)

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
        if self._unsat[slot]:
            self._unsat_slots.add(slot)
        self._residual[slot] = any(c.residual for c in constraints.values())
        for attr, c in constraints.items():
            column = self._column_for(attr, c)
            if c.type == STRING:
                for word in (c.lo, c.hi):
                    if word is not None:
                        self.vocabulary.add(word)
                column.raw.append((c.lo, c.hi))
            self._append(column, slot, c)

    def remove(self, key: Key) -> Filter:
        slot = self._slot_of.pop(key)
        f = self._filters[slot]
        for attr, c in f.constraints.items():
            self._remove(self._columns[_column_key(attr, c)], slot)
        self._keys[slot] = self._filters[slot] = None
        self._unsat_slots.discard(slot)
        self._free.append(slot)
        return f

    def _grow(self) -> int:
        slot = len(self._keys)
        self._keys.append(None)
        self._filters.append(None)
        if slot == len(self._n_attrs):
            for name in ("_n_attrs", "_residual", "_unsat", "_counts", "_flags"):
                old = getattr(self, name)
                setattr(self, name, _grown(old, 2 * len(old), len(old)))
        return slot

    def _column_for(self, attr: str, c: Constraint) -> _Column:
        key = _column_key(attr, c)
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = _Column()
            if len(key) == 3:
                self._buckets.setdefault((attr, c.type), {})[c.point] = column
        return column

    def _segments(self, attr: str, type_: str, test: int, query) -> list[_Column]:
        """The columns a probe must scan: the interval cells, plus the equality buckets whose
        value can pass (``query`` is the probed value for POINT, else the query's Constraint)."""
        columns = [self._columns.get((attr, type_))]
        buckets = self._buckets.get((attr, type_))
        if buckets:
            if test == kernels.POINT:
                columns.append(buckets.get(query))
            elif test == kernels.CONTAINS:
                columns.append(None if query.point is None else buckets.get(query.point))
            else:
                columns.extend(column for value, column in buckets.items() if query.contains(value))
        return [column for column in columns if column is not None and column.size]

    def _append(self, column: _Column, slot: int, c: Constraint) -> None:
        arena = self._arena
        if column.size == column.capacity:
            capacity = max(8, 2 * column.capacity)
            start = arena.allocate(capacity)
            arena.move(column.start, column.size, start)
            arena.garbage += column.capacity
            column.start, column.capacity = start, capacity
            if arena.garbage > arena.used // 2:
                self._compact()
        i = column.start + column.size
        lo, lo_open, hi, hi_open = self._bounds(c)
        arena.slots[i], arena.lo[i], arena.hi[i] = slot, lo, hi
        arena.bits[i] = kernels.cell_bits(lo_open, hi_open, c.residual)
        column.position[slot] = column.size
        column.size += 1

    def _remove(self, column: _Column, slot: int) -> None:
        offset = column.position.pop(slot)
        last = column.size - 1
        if offset != last:
            arena = self._arena
            arena.move(column.start + last, 1, column.start + offset)
            column.position[int(arena.slots[column.start + offset])] = offset
            if column.raw:
                column.raw[offset] = column.raw[last]
        if column.raw:
            column.raw.pop()
        column.size = last

    def _compact(self) -> None:
        """Copy every column into a fresh arena, leaving room to grow, dropping garbage."""
        old, new = self._arena, _Arena()
        for column in self._columns.values():
            start = new.allocate(column.capacity)
            for name in ("slots", "lo", "hi", "bits"):
                getattr(new, name)[start : start + column.size] = getattr(old, name)[column.start : column.start + column.size]
            column.start = start
        self._arena = new

    def _bounds(self, c: Constraint) -> tuple[float, bool, float, bool]:
        lo = -np.inf if c.lo is None else self._encode(c.lo, c.type)
        hi = np.inf if c.hi is None else self._encode(c.hi, c.type)
        return lo, c.lo_open, hi, c.hi_open

    def _encode(self, value, type_: str) -> float:
        return self.vocabulary.code(value) if type_ == STRING else float(value)

    def _reencode_strings(self) -> None:
        if self._encoded_version == self.vocabulary.version:
            return
        for key, column in self._columns.items():
            if key[1] != STRING:
                continue
            for offset, (lo, hi) in enumerate(column.raw):
                i = column.start + offset
                self._arena.lo[i] = -np.inf if lo is None else self.vocabulary.code(lo)
                self._arena.hi[i] = np.inf if hi is None else self.vocabulary.code(hi)
        self._encoded_version = self.vocabulary.version

    # ------------------------------------------------------------------ the query engine

    def _probe(self, probes, test: int, family: str, target: int | None):
        """Slots (in slot order) whose count of passed probes reaches the target (each
        entry's own number of attributes when ``target`` is None), with their point flags."""
        self._reencode_strings()
        starts, sizes, qlo, qhi, qbits = [], [], [], [], []
        for attr, type_, bounds, probe_residual, query in probes:
            low, low_open, high, high_open = bounds if len(bounds) == 4 else (bounds[0], False, bounds[0], False)
            flags = kernels.cell_bits(low_open, high_open, probe_residual)
            for column in self._segments(attr, type_, test, query):
                starts.append(column.start)
                sizes.append(column.size)
                qlo.append(low)
                qhi.append(high)
                qbits.append(flags)
        cells = sum(sizes)
        work = self.work
        if family == "match":
            work.match_queries += 1
            work.match_entries += len(self._slot_of)
            work.match_predicates += cells
        else:
            work.cover_queries += 1
            work.cover_entries += len(self._slot_of)
            work.cover_predicates += cells
        if not cells:
            return np.zeros(0, np.int64), np.zeros(0, bool)
        arena = self._arena
        found_slots = np.empty(cells, np.int64)
        found_flags = np.empty(cells, np.uint8)
        found = kernels.query(
            self._counts, self._flags, arena.slots, arena.lo, arena.hi, arena.bits, self._n_attrs,
            np.array(starts, np.int64), np.array(sizes, np.int64), np.array(qlo), np.array(qhi),
            np.array(qbits, np.uint8), test, -1 if target is None else target, found_slots, found_flags,
        )
        order = np.argsort(found_slots[:found], kind="stable")
        return found_slots[:found][order], found_flags[:found][order].astype(bool)

    def _stable_probes(self, make: Callable[[], list]) -> list:
        """Build query probes; rebuild if encoding a new word renumbered the vocabulary."""
        while True:
            version = self.vocabulary.version
            probes = make()
            if version == self.vocabulary.version:
                return probes

    def _query_bounds(self, f: Filter):
        return self._stable_probes(
            lambda: [(attr, c.type, self._bounds(c), c.residual, c) for attr, c in f.constraints.items()]
        )

    def _finish(self, slots: np.ndarray, recheck, exact: Callable[[Filter], bool]) -> list[Key]:
        """Keys of ``slots``; those flagged in ``recheck`` (per slot, or True: all) must pass ``exact``."""
        keys = self._keys
        if recheck is False or not len(slots) or (recheck is not True and not recheck.any()):
            return [keys[s] for s in slots.tolist()]
        doubtful = [True] * len(slots) if recheck is True else recheck.tolist()
        result = []
        for slot, check in zip(slots.tolist(), doubtful):
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
                (attr, STRING, (self.vocabulary.code(v),), False, v)
                if isinstance(v, str)
                else (attr, NUMERIC, (float(v),), False, v)
                for attr, v in publication.items
            ]
        )
        slots, _ = self._probe(probes, kernels.POINT, "match", None)
        return self._finish(slots, self._residual[slots], lambda e: matches(e, publication))

    def covering(self, f: Filter) -> list[Key]:
        """Keys of the entries that cover ``f``."""
        if unsatisfiable(f):
            self._probe([], kernels.CONTAINS, "cover", None)
            return self.keys()
        slots, _ = self._probe(self._query_bounds(f), kernels.CONTAINS, "cover", None)
        recheck = True if _has_residual(f) else self._residual[slots]
        return self._finish(slots, recheck, lambda e: covers(e, f))

    def covered_by(self, f: Filter) -> list[Key]:
        """Keys of the entries that ``f`` covers (every unsatisfiable entry among them)."""
        slots, _ = self._probe(self._query_bounds(f), kernels.WITHIN, "cover", len(f.constraints))
        if self._unsat_slots:
            slots = np.union1d(slots, np.fromiter(self._unsat_slots, np.int64))
        recheck = (True if _has_residual(f) else self._residual[slots]) & ~self._unsat[slots]
        return self._finish(slots, recheck, lambda e: covers(f, e))

    def intersecting(self, sub: Filter) -> list[Key]:
        """Keys of the entries (advertisements) that intersect subscription ``sub``.

        A residual condition can only empty an overlap that is a single point, so only
        entries touching ``sub`` in a point there (or unsatisfiable ones) are re-checked."""
        if unsatisfiable(sub):
            return []
        slots, points = self._probe(self._query_bounds(sub), kernels.OVERLAP, "match", len(sub.constraints))
        return self._finish(slots, points | self._unsat[slots], lambda e: intersects(e, sub))

    def intersected_by(self, adv: Filter) -> list[Key]:
        """Keys of the entries (subscriptions) that advertisement ``adv`` intersects."""
        slots, points = self._probe(self._query_bounds(adv), kernels.OVERLAP, "match", None)
        recheck = True if unsatisfiable(adv) else points | self._unsat[slots]
        return self._finish(slots, recheck, lambda e: intersects(adv, e))


def _column_key(attr: str, c: Constraint) -> tuple:
    """Equality constraints live in a bucket per value; everything else in the interval column."""
    return (attr, c.type) if c.point is None else (attr, c.type, c.point)


def _has_residual(f: Filter) -> bool:
    return any(c.residual for c in f.constraints.values())
