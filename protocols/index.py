"""A columnar index of filters answering routing-table questions for a whole table at once.

Each (attribute, type) pair holds, for every entry that constrains it, the entry's interval
bounds as float64 (numbers as themselves, strings as order-preserving codes from
``Vocabulary``), in an interval column or, for equality constraints, in a bucket per value.
Every entry also keeps all its cells together in a row. A query probes few column cells
for candidates and checks each candidate's row (the numba kernel of protocols/kernels.py):
matching a publication probes one access cell per entry (in the bucket of the entry's least
common equality value, else of its least common attribute), so its cost follows the
candidates, not the table size (see ``FilterIndex``).
Conditions that are not intervals (excluded values, postfixes, substrings) and unsatisfiable
filters are residual: candidates carrying them are re-checked with the scalar oracle of
protocols/language.py, so every answer equals the oracle's exactly. The index counts work
in a ``Work`` record, defined by what a counting matcher would compare, so that the
runtime's cost model, which turns it into virtual time, does not change with this index's
shortcuts.
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
    constraints_overlap,
    residual_holds,
    residual_implied,
    unsatisfiable,
)

Key = Hashable
_GAP = 1024.0


@dataclass(slots=True)
class Work:
    """Work counters per query family, ``match`` (publications against subscriptions,
    subscriptions against advertisements and back: PADRES's "matching") and ``cover``
    (covering and covered-by queries): queries, entries in the table, and predicates a
    counting matcher compares (every cell of the queried attributes' interval columns and of
    the equality buckets that can pass); residual checks are candidates re-checked with the
    scalar oracle; inserted entries and the entries already in the tables they joined (a
    Rete-style table, as PADRES's, pays for inserting into a big table)."""

    match_queries: int = 0
    match_entries: int = 0
    match_predicates: int = 0
    cover_queries: int = 0
    cover_entries: int = 0
    cover_predicates: int = 0
    residual_checks: int = 0
    inserts: int = 0
    insert_entries: int = 0

    def reset(self) -> None:
        self.__init__()  # every counter back to its default, 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _WORK_COUNTERS}


_WORK_COUNTERS = tuple(f.name for f in fields(Work))


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
        self.copy(self, start, size, to)

    def copy(self, source: "_Arena", start: int, size: int, to: int) -> None:
        for name in ("slots", "lo", "hi", "bits"):
            getattr(self, name)[to : to + size] = getattr(source, name)[start : start + size]


class _Rows:
    """Every entry's cells as lines (lo, hi, attribute id * 8 + bits), an entry's lines
    together: the kernel reads a candidate's whole row from one or two cache lines."""

    def __init__(self, capacity: int = 64) -> None:
        self.flat = np.zeros(3 * capacity)
        self.used = 0
        self.garbage = 0

    @property
    def lines(self) -> np.ndarray:
        return self.flat.reshape(-1, 3)  # a view (kept out of the state: pickling would copy it)

    def full(self, more: int) -> bool:
        return 3 * (self.used + more) > len(self.flat)

    def append(self, flat_cells) -> int:
        """Store cells given as a flat list of line values; returns the first line's index."""
        lines = len(flat_cells) // 3
        if self.full(lines):
            self.flat = _grown(self.flat, max(2 * len(self.flat), 3 * (self.used + lines)), 3 * self.used)
        start = self.used
        self.used += lines
        self.flat[3 * start : 3 * self.used] = flat_cells
        return start


class _Column:
    """Cells of one attribute in a segment of the column arena."""

    __slots__ = ("start", "capacity", "size", "position")

    def __init__(self) -> None:
        self.start = self.capacity = self.size = 0
        self.position: dict[int, int] = {}  # slot -> offset in the segment


class _Place:
    """Where the cells of one (attribute, type), or of one equality value of it, go: a column
    for the entries' access cells (see ``FilterIndex``) and one for their other cells."""

    __slots__ = ("access", "others")

    def __init__(self) -> None:
        self.access = _Column()
        self.others = _Column()

    @property
    def size(self) -> int:
        return self.access.size + self.others.size


class _Attribute:
    """The places of one (attribute, type): its interval cells, and a bucket of equality cells
    per value."""

    __slots__ = ("id", "interval", "buckets")

    def __init__(self, attr_id: int) -> None:
        self.id = attr_id
        self.interval = _Place()
        self.buckets: dict[object, _Place] = {}

    def place(self, point) -> _Place:
        """The place of a constraint with this equality value (None: an interval)."""
        if point is None:
            return self.interval
        bucket = self.buckets.get(point)
        if bucket is None:
            bucket = self.buckets[point] = _Place()
        return bucket

    def places(self) -> list[_Place]:
        return [self.interval, *self.buckets.values()]

    def probed(self, test: int, query) -> tuple[list[_Place], int]:
        """The non-empty places a probe must scan, and their cells: the interval cells, plus
        the buckets whose value can pass (``query`` is the probed value for POINT, else the
        query's Constraint)."""
        interval = self.interval
        cells = interval.size
        places = [interval] if cells else []
        buckets = self.buckets
        if buckets:
            if test == kernels.POINT:
                passing = (buckets.get(query),)
            elif test == kernels.CONTAINS:
                passing = (None if query.point is None else buckets.get(query.point),)
            else:
                passing = [place for value, place in buckets.items() if query.contains(value)]
            for place in passing:
                if place is not None and place.size:
                    places.append(place)
                    cells += place.size
        return places, cells


class FilterIndex:
    """A routing table of filters keyed by hashable keys (subscription or advertisement keys).

    Every entry has one cell per constrained attribute, in the place of that attribute (or of
    its equality value there), and the same cells in its row. One of its cells is its access
    cell: the one of its least common equality value, else of its least common attribute.
    Questions an entry answers only if all its attributes pass (matching, covering,
    intersected-by) probe access cells; questions every attribute of the query must pass
    (covered-by, intersecting) probe every cell of the query's least common attribute. Either
    way the candidates are then checked against their rows.

    Queries return keys in slot order, which depends only on the table's history, so results
    are deterministic. ``work`` (possibly shared by several tables) accumulates the counters.
    """

    def __init__(self, work: Work | None = None) -> None:
        self.work = work if work is not None else Work()
        self.vocabulary = Vocabulary()
        self._encoded_version = 0
        self._attributes: dict[tuple[str, str], _Attribute] = {}  # by (attr, type)
        self._arena = _Arena()
        self._rows = _Rows()
        self._keys = np.empty(8, object)  # per slot (an object array: fast to gather)
        self._slots = 0  # slots ever used
        self._filters: list[Filter | None] = []
        self._residual_constraints: list[tuple | None] = []  # per slot: its (attr, Constraint) with residuals
        self._columns_of: list[list[_Column] | None] = []  # per slot: the columns holding its cells
        self._slot_of: dict[Key, int] = {}
        self._free: list[int] = []
        self._unsat_slots: set[int] = set()
        # per slot: its row in _rows
        self._row_start = np.zeros(8, np.int64)
        self._row_len = np.zeros(8, np.int64)
        self._residual = np.zeros(8, bool)  # per slot: has residual constraints (an array, for the queries)
        self._unsat = np.zeros(8, bool)
        # per attribute id: the query's bounds during a kernel call (_query_set is zero between calls)
        self._query_set = np.zeros(8, np.uint8)
        self._query_lo = np.zeros(8)
        self._query_hi = np.zeros(8)
        self._query_bits = np.zeros(8, np.uint8)

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
        self.work.inserts += 1
        self.work.insert_entries += len(self._slot_of)
        slot = self._free.pop() if self._free else self._grow()
        self._keys[slot], self._filters[slot] = key, f
        self._slot_of[key] = slot
        constraints = f.constraints
        places, row = [], []
        access = rank = None
        empty = False
        for attr, c in constraints.items():
            if c.type == STRING:  # a renumbering here re-encodes the cells before the next query
                for word in (c.lo, c.hi):
                    if word is not None:
                        self.vocabulary.add(word)
            attribute = self._attribute(attr, c.type)
            point = c.point
            place = attribute.place(point)
            places.append(place)
            # the access cell: the smallest bucket of the entry's equality values if it has
            # any, else its smallest place (the cells a probe is least likely to reach)
            place_rank = (point is None, place.size)
            if rank is None or place_rank < rank:
                access, rank = place, place_rank
            lo, lo_open, hi, hi_open = self._bounds(c)
            empty |= c.empty
            row += (lo, hi, attribute.id * 8 + kernels.cell_bits(lo_open, hi_open, c.residual))
        residual = self._residual_constraints[slot] = tuple((a, c) for a, c in constraints.items() if c.residual)
        self._residual[slot], self._unsat[slot] = bool(residual), empty
        if empty:
            self._unsat_slots.add(slot)
        columns = self._columns_of[slot] = [place.access if place is access else place.others for place in places]
        for j, column in enumerate(columns):
            self._append(column, slot, row[3 * j], row[3 * j + 1], row[3 * j + 2] & 7)
        self._store_row(slot, row)

    def remove(self, key: Key) -> Filter:
        slot = self._slot_of.pop(key)
        f = self._filters[slot]
        for column in self._columns_of[slot]:
            self._remove(column, slot)
        self._rows.garbage += len(self._columns_of[slot])
        self._keys[slot] = self._filters[slot] = self._columns_of[slot] = None
        self._residual_constraints[slot] = None
        self._unsat_slots.discard(slot)
        self._free.append(slot)
        return f

    def _grow(self) -> int:
        slot = self._slots
        self._slots += 1
        self._filters.append(None)
        self._residual_constraints.append(None)
        self._columns_of.append(None)
        if slot == len(self._row_start):
            for name in ("_keys", "_row_start", "_row_len", "_residual", "_unsat"):
                old = getattr(self, name)
                setattr(self, name, _grown(old, 2 * len(old), len(old)))
        return slot

    def _attribute(self, attr: str, type_: str) -> _Attribute:
        attribute = self._attributes.get((attr, type_))
        if attribute is None:
            attribute = self._attributes[attr, type_] = _Attribute(len(self._attributes))
            if attribute.id == len(self._query_set):
                for name in ("_query_set", "_query_lo", "_query_hi", "_query_bits"):
                    old = getattr(self, name)
                    setattr(self, name, _grown(old, 2 * len(old), len(old)))
        return attribute

    def _append(self, column: _Column, slot: int, lo: float, hi: float, bits: int) -> None:
        if column.size == column.capacity:
            self._relocate(column)
        arena = self._arena
        i = column.start + column.size
        arena.slots[i], arena.lo[i], arena.hi[i], arena.bits[i] = slot, lo, hi, bits
        column.position[slot] = column.size
        column.size += 1

    def _remove(self, column: _Column, slot: int) -> None:
        offset = column.position.pop(slot)
        last = column.size - 1
        if offset != last:  # the column's last cell takes the freed place
            arena = self._arena
            i, j = column.start + offset, column.start + last
            moved = arena.slots[i] = arena.slots[j]
            arena.lo[i], arena.hi[i], arena.bits[i] = arena.lo[j], arena.hi[j], arena.bits[j]
            column.position[int(moved)] = offset
        column.size = last

    def _relocate(self, column: _Column) -> None:
        """Give a full column twice the room at the arena's end."""
        arena = self._arena
        old_start, old_capacity = column.start, column.capacity
        column.capacity = max(8, 2 * old_capacity)
        column.start = arena.allocate(column.capacity)
        if old_capacity:
            arena.move(old_start, column.size, column.start)
            arena.garbage += old_capacity
            if arena.garbage > arena.used // 2:
                self._compact()

    def _compact(self) -> None:
        """Copy every column into a fresh arena, leaving room to grow, dropping garbage."""
        old, new = self._arena, _Arena()
        for column in self._all_columns():
            start = new.allocate(column.capacity)
            new.copy(old, column.start, column.size, start)
            column.start = start
        self._arena = new

    def _store_row(self, slot: int, row: list[float]) -> None:
        self._row_len[slot] = 0  # a reused slot's old row is garbage: a compaction must not copy it
        rows = self._rows
        if rows.full(len(row) // 3) and rows.garbage > rows.used // 2:
            self._compact_rows()
        self._row_start[slot] = self._rows.append(row)
        self._row_len[slot] = len(row) // 3

    def _compact_rows(self) -> None:
        """Copy the rows of the entries left into a fresh store, in slot order."""
        live = np.sort(np.fromiter(self._slot_of.values(), np.int64, len(self._slot_of)))
        lengths = self._row_len[live]
        starts = np.cumsum(lengths) - lengths
        lines = np.repeat(self._row_start[live] - starts, lengths) + np.arange(lengths.sum())
        new = _Rows(max(64, 2 * len(lines)))
        new.append(self._rows.lines[lines].ravel())
        self._row_start[live] = starts
        self._rows = new

    def _all_columns(self) -> list[_Column]:
        return [column for attribute in self._attributes.values() for place in attribute.places()
                for column in (place.access, place.others)]

    def _bounds(self, c: Constraint) -> tuple[float, bool, float, bool]:
        lo = -np.inf if c.lo is None else self._encode(c.lo, c.type)
        hi = np.inf if c.hi is None else self._encode(c.hi, c.type)
        return lo, c.lo_open, hi, c.hi_open

    def _encode(self, value, type_: str) -> float:
        return self.vocabulary.code(value) if type_ == STRING else float(value)

    def _reencode_strings(self) -> None:
        if self._encoded_version == self.vocabulary.version:
            return
        arena, lines = self._arena, self._rows.lines
        for slot in self._slot_of.values():
            constraints = self._filters[slot].constraints.values()
            for j, (column, c) in enumerate(zip(self._columns_of[slot], constraints)):
                if c.type == STRING:
                    lo, _, hi, _ = self._bounds(c)
                    i = column.start + column.position[slot]
                    arena.lo[i], arena.hi[i] = lo, hi
                    lines[self._row_start[slot] + j, :2] = lo, hi
        self._encoded_version = self.vocabulary.version

    # ------------------------------------------------------------------ the query engine

    def _probe(self, probes, test: int, family: str, target: int | None):
        """Slots (in slot order) answering the question, with their single-point flags.

        ``target`` None: every attribute of an entry must be probed and pass; else every one
        of the ``target`` probed attributes must be an entry's and pass. The work counted is
        the cells of every probed attribute's places: what a counting matcher compares,
        however few cells this index reaches (the cost model charges for the former).
        """
        self._reencode_strings()
        attributes = self._attributes
        bounds, probed = [], []  # bounds: (attribute id, lo, hi, bits) per probe, flattened
        cells, unknown = 0, False
        for attr, type_, query_bounds, probe_residual, query in probes:
            attribute = attributes.get((attr, type_))
            if attribute is None:
                unknown = True
                continue
            if len(query_bounds) == 4:
                low, low_open, high, high_open = query_bounds
                flags = kernels.cell_bits(low_open, high_open, probe_residual)
            else:
                low = high = query_bounds[0]
                flags = 0
            places, size = attribute.probed(test, query)
            cells += size
            probed.append((size, places, low, high, flags))
            bounds += (attribute.id, low, high, flags)
        self._count(family, cells)
        segments = []  # (start, size, lo, hi, bits) per probed column, flattened
        if target is None:
            for _, places, low, high, flags in probed:
                for place in places:
                    if place.access.size:
                        segments += (place.access.start, place.access.size, low, high, flags)
        elif probed and not unknown:
            _, places, low, high, flags = min(probed, key=lambda p: p[0])
            for place in places:
                for column in (place.access, place.others):
                    if column.size:
                        segments += (column.start, column.size, low, high, flags)
        candidates = sum(segments[1::5])
        if not candidates:
            return np.zeros(0, np.int64), np.zeros(0, bool)
        found_slots = np.empty(candidates, np.int64)
        found_flags = np.empty(candidates, np.bool_)
        arena = self._arena
        found = kernels.query(
            test, target is None, arena.slots, arena.lo, arena.hi, arena.bits,
            np.array(segments, np.float64).reshape(-1, 5), self._rows.lines, self._row_start, self._row_len,
            np.array(bounds, np.float64).reshape(-1, 4),
            self._query_set, self._query_lo, self._query_hi, self._query_bits, found_slots, found_flags,
        )
        return found_slots[:found], found_flags[:found]

    def _count(self, family: str, cells: int) -> None:
        work = self.work
        if family == "match":
            work.match_queries += 1
            work.match_entries += len(self._slot_of)
            work.match_predicates += cells
        else:
            work.cover_queries += 1
            work.cover_entries += len(self._slot_of)
            work.cover_predicates += cells

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

    def _finish(self, slots: np.ndarray, recheck, exact: Callable[[int], bool]) -> list[Key]:
        """Keys of ``slots``; those flagged in ``recheck`` (per slot, or True: all) must pass ``exact``."""
        keys = self._keys
        if recheck is False:
            return keys[slots].tolist()
        doubtful = slots.tolist() if recheck is True else slots[recheck].tolist()
        if not doubtful:
            return keys[slots].tolist()
        self.work.residual_checks += len(doubtful)
        rejected = {slot for slot in doubtful if not exact(slot)}  # only asked for membership
        if not rejected:
            return keys[slots].tolist()
        return [keys[slot] for slot in slots.tolist() if slot not in rejected]

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
        # the kernel checked every interval, so only the residual conditions are left to check
        values = dict(publication.items)
        return self._finish(
            slots, self._residual[slots], lambda slot: _residuals_hold(self._residual_constraints[slot], values)
        )

    def covering(self, f: Filter) -> list[Key]:
        """Keys of the entries that cover ``f``."""
        if unsatisfiable(f):
            self._probe([], kernels.CONTAINS, "cover", None)
            return self.keys()
        slots, _ = self._probe(self._query_bounds(f), kernels.CONTAINS, "cover", None)
        recheck = True if _has_residual(f) else self._residual[slots]
        return self._finish(slots, recheck, lambda slot: _residuals_implied(self._filters[slot], f))

    def covered_by(self, f: Filter) -> list[Key]:
        """Keys of the entries that ``f`` covers (every unsatisfiable entry among them)."""
        slots, _ = self._probe(self._query_bounds(f), kernels.WITHIN, "cover", len(f.constraints))
        if self._unsat_slots:
            slots = np.union1d(slots, np.fromiter(self._unsat_slots, np.int64))
        recheck = (True if _has_residual(f) else self._residual[slots]) & ~self._unsat[slots]
        return self._finish(slots, recheck, lambda slot: _residuals_implied(f, self._filters[slot]))

    def intersecting(self, sub: Filter) -> list[Key]:
        """Keys of the entries (advertisements) that intersect subscription ``sub``.

        A residual condition can only empty an overlap that is a single point, so only
        entries touching ``sub`` in a point there (or unsatisfiable ones) are re-checked."""
        if unsatisfiable(sub):
            return []
        slots, points = self._probe(self._query_bounds(sub), kernels.OVERLAP, "match", len(sub.constraints))
        return self._finish(slots, points | self._unsat[slots], lambda slot: _overlaps_hold(self._filters[slot], sub))

    def intersected_by(self, adv: Filter) -> list[Key]:
        """Keys of the entries (subscriptions) that advertisement ``adv`` intersects."""
        slots, points = self._probe(self._query_bounds(adv), kernels.OVERLAP, "match", None)
        recheck = True if unsatisfiable(adv) else points | self._unsat[slots]
        return self._finish(slots, recheck, lambda slot: _overlaps_hold(adv, self._filters[slot]))


# The re-checks below finish what the kernel started: it found the intervals passing, so only
# residual conditions (and, for overlaps, empty constraints) can still turn an answer.


def _residuals_hold(constraints: tuple, values: dict) -> bool:
    """``matches`` for an entry whose intervals hold the publication's values."""
    for attr, c in constraints:
        if not residual_holds(c, values[attr]):
            return False
    return True


def _residuals_implied(outer: Filter, inner: Filter) -> bool:
    """``covers(outer, inner)`` for satisfiable ``inner`` whose intervals lie in ``outer``'s."""
    inner_constraints = inner.constraints
    for attr, c in outer.constraints.items():
        if c.residual and not residual_implied(inner_constraints[attr], c):
            return False
    return True


def _overlaps_hold(adv: Filter, sub: Filter) -> bool:
    """``intersects(adv, sub)`` for filters whose intervals overlap on every attribute of ``sub``."""
    adv_constraints = adv.constraints
    for attr, c in sub.constraints.items():
        a = adv_constraints[attr]
        if (c.residual or a.residual or c.empty or a.empty) and not constraints_overlap(a, c):
            return False
    return True


def _has_residual(f: Filter) -> bool:
    return any(c.residual for c in f.constraints.values())
