"""The filter index's storage (protocols/index.py): the vocabulary that encodes strings in
order, the work counters, per attribute its places and columns of interval cells, each
entry's row of cells, its slot, key and filter, and the table's upkeep as entries come and
go (columns kept sorted, arenas compacted, strings re-encoded)."""
from __future__ import annotations

import array
import bisect
import itertools
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Hashable, NamedTuple

import numpy as np

from . import kernels
from .language import (
    NUMERIC,
    STRING,
    Constraint,
    Filter,
    Publication,
    attributes_of,
    rebuilt_by_constructor,
    set_attributes,
)

Key = Hashable
SORTED_COLUMN = 2048  # cells from which a numeric interval column is kept sorted by lower bound
COMPACT_FROM = 4096  # arena cells from which a table that shrank to an eighth of them is compacted
LAID_OUT_FROM = 256  # bucket values from which an attribute's lines are laid out whole, not kept line by line
_GAP = 1024.0
NO_GROUP = -2  # a slot's group when it has none (group -1: a routing table's local entries)


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
        Work.__init__(self)  # every counter back to its default, 0

    def __reduce__(self):  # the same in both builds (protocols/compiled.py)
        return rebuilt_by_constructor(self)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _WORK_COUNTERS}


_WORK_COUNTERS = tuple(f.name for f in fields(Work))


class Vocabulary:
    """Order-preserving float codes for strings, with gaps so inserts rarely renumber.

    Codes of known strings are distinct and ordered like the strings; an unknown string gets
    a code strictly between its neighbours', so comparisons against known codes stay exact.
    ``version`` changes whenever existing codes change (an index then re-encodes its cells);
    ``generation`` whenever any code may change, an unknown word's too: on every new word.
    Generations are unique in the process, so a message's encoding cached under one
    (``points``, ``probes``) is this vocabulary's and current. One vocabulary serves every
    routing table of a process (``FilterIndex``), so a message is encoded once per process,
    not once per table it meets.
    """

    def __init__(self) -> None:
        self.words: list[str] = []
        self.codes: list[float] = []
        self.code_of: dict[str, float] = {}
        self.attribute_numbers: dict[tuple[str, str], int] = {}  # (attribute, type) -> its number here
        self.version = 0
        self.generation = next(_GENERATIONS)

    def __getstate__(self) -> dict:
        return attributes_of(self)

    def __setstate__(self, state: dict) -> None:
        global _GENERATIONS
        set_attributes(self, {"attribute_numbers": {}} | state)  # (a checkpoint written before they were numbered)
        # a copy (from a checkpoint, or ``copy.deepcopy``) numbers attributes apart from its original,
        # so it takes a generation of its own, one no vocabulary of this process had: an encoding
        # cached under a generation holds one vocabulary's attribute numbers. Past its own: the
        # process it came from may have counted further than this one.
        _GENERATIONS = itertools.count(max(next(_GENERATIONS), self.generation + 1))
        self.generation = next(_GENERATIONS)

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
        self.generation = next(_GENERATIONS)
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

    def bounds(self, c: Constraint) -> tuple[float, bool, float, bool]:
        lo = -np.inf if c.lo is None else self._encode(c.lo, c.type)
        hi = np.inf if c.hi is None else self._encode(c.hi, c.type)
        return lo, c.lo_open, hi, c.hi_open

    def _encode(self, value, type_: str) -> float:
        return self.code(value) if type_ == STRING else float(value)

    def attribute_number(self, attr: str, type_: str) -> int:
        number = self.attribute_numbers.get((attr, type_))
        if number is None:
            number = self.attribute_numbers[attr, type_] = len(self.attribute_numbers)
        return number

    def points(self, publication: Publication) -> np.ndarray:
        """A publication's points, rows (attribute number, code), encoded once per generation."""
        return self._cached(publication, lambda: np.array([
            (self.attribute_number(attr, STRING), self.code(v)) if isinstance(v, str)
            else (self.attribute_number(attr, NUMERIC), float(v)) for attr, v in publication.items
        ], np.float64).reshape(-1, 2))

    def probes(self, f: Filter) -> Probes:
        """A conjunction's probes, encoded once per generation."""
        return self._cached(f, lambda: self._probes(f))

    def stored_probes(self, f: Filter) -> Probes:
        """``probes(f)`` once every string bound of ``f`` has a code, added in the order of its
        constraints before ``f`` is encoded anew (encoding may add a word that no float fits
        between its neighbours, and the order of additions decides the codes)."""
        current = self._current(f)
        for word in _bound_words(f) if current is None else current.unknown_words:
            self.add(word)
        return self.probes(f)

    def _probes(self, f: Filter) -> Probes:
        constraints = f.constraints.items()
        rows = np.array([(self.attribute_number(attr, c.type), lo, hi, kernels.cell_bits(lo_open, hi_open, c.residual),
                          c.point is not None)
                         for attr, c in constraints for lo, lo_open, hi, hi_open in (self.bounds(c),)], np.float64)
        unknown = tuple(word for word in _bound_words(f) if word not in self.code_of)
        return Probes([(attr, c.type, c.point) for attr, c in constraints], rows.reshape(-1, 5), unknown)

    def _current(self, message) -> Any:
        """The encoding cached on ``message``, if it is of this generation."""
        cached = message.encoded
        return cached[1] if cached is not None and cached[0] == self.generation else None

    def _cached(self, message, encode: Callable[[], Any]) -> Any:
        current = self._current(message)
        if current is not None:
            return current
        while True:  # encoding an unknown word may add it (no float left between neighbours)
            generation = self.generation
            encoded = encode()
            if generation == self.generation:
                object.__setattr__(message, "encoded", (generation, encoded))
                return encoded


def _bound_words(f: Filter) -> list:
    """The string bounds of conjunction ``f``'s constraints, in their order (lo, then hi)."""
    return [word for c in f.constraints.values() if c.type == STRING for word in (c.lo, c.hi) if word is not None]


class Probes(NamedTuple):
    """A conjunction encoded for the index: ``per_constraint``, (attribute, type, equality
    value or None); ``rows``, the kernel's (attribute number, lo, hi, bits, whether it is a
    point) (``kernels.ask``), ``bits`` as a cell or query bound has them (``kernels.cell_bits``);
    and the ``unknown_words`` among its bounds, in order (the vocabulary had no code for them)."""

    per_constraint: list[tuple]
    rows: np.ndarray
    unknown_words: tuple[str, ...]


_GENERATIONS = itertools.count(1)
PROCESS_VOCABULARY = Vocabulary()


def _grown_array(values: array.array, size: int) -> array.array:
    """A zeroed copy of the int64 ``values`` with room for ``size`` items, its items kept."""
    grown = array.array("q", bytes(8 * size))
    grown[: len(values)] = values
    return grown


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    """A zeroed copy of ``array`` with room for ``size`` items, its first ``keep`` kept."""
    grown = np.zeros(size, array.dtype)
    grown[:keep] = array[:keep]
    return grown


class _Arena:
    """The cells of every column of one index, in parallel arrays; columns are segments.
    ``line`` is a cell's place in its slot's row (to find the cell again when another moves)."""

    NAMES: ClassVar[tuple[str, ...]] = ("slots", "lo", "hi", "bits", "line")

    def __init__(self, capacity: int = 64) -> None:
        self.slots = np.zeros(capacity, np.int32)
        self.lo = np.zeros(capacity)
        self.hi = np.zeros(capacity)
        self.bits = np.zeros(capacity, np.uint8)
        self.line = np.zeros(capacity, np.int32)
        self.used = 0
        self.garbage = 0

    def allocate(self, capacity: int) -> int:
        if self.used + capacity > len(self.slots):
            size = max(2 * len(self.slots), self.used + capacity)
            for name in self.NAMES:
                setattr(self, name, _grown(getattr(self, name), size, self.used))
        start = self.used
        self.used += capacity
        return start

    def move(self, start: int, size: int, to: int) -> None:
        for name in self.NAMES:
            values = getattr(self, name)
            values[to : to + size] = values[start : start + size]


class _Lines:
    """Per slot, a run of lines (``width`` values each) in one growing store, a slot's lines
    together: the kernel reads ``lines[start[slot] : start[slot] + length[slot]]`` from one or
    two cache lines. Rows of cells are (lo, hi, attribute id * 8 + bits); residual lines are
    (attribute id, kind, excluded number or condition id); cell offsets are, per line of a
    row, the offset of that cell in its column.

    ``start`` and ``length`` are ``array.array``s, written a slot at a time from Python (a NumPy
    array's single items cost more there: bench/LOG.md, session 70); the kernels and the
    whole-array steps read them through NumPy views of the same memory, ``starts`` and
    ``lengths``, made again when they grow (by copying: a viewed array cannot grow in place)."""

    def __init__(self, width: int = 3, dtype=np.float64, capacity: int = 64) -> None:
        self.width = width
        self._hold(np.zeros(width * capacity, dtype))
        self.used = 0
        self.garbage = 0
        self._hold_slots(array.array("q", bytes(64)), array.array("q", bytes(64)))

    def _hold(self, flat: np.ndarray) -> None:
        """Keep the lines in ``flat``, and ``lines``, a view of it as rows (made once: every kernel
        call reads it)."""
        self.flat = flat
        self.flat_size = len(flat)
        self.lines = flat.reshape(-1, self.width)

    def _hold_slots(self, start: array.array, length: array.array) -> None:
        self.start, self.length = start, length
        self.starts, self.lengths = np.frombuffer(start, np.int64), np.frombuffer(length, np.int64)

    def __getstate__(self) -> dict:  # without the views (pickled, they would be copies)
        views = ("lines", "starts", "lengths", "flat_size")
        return {name: value for name, value in attributes_of(self).items() if name not in views}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        start, length = state.pop("start"), state.pop("length")
        set_attributes(self, state)
        self._hold(self.flat)
        if isinstance(start, np.ndarray):  # a checkpoint written while they were NumPy arrays
            start, length = (array.array("q", values.astype(np.int64).tobytes()) for values in (start, length))
        self._hold_slots(start, length)

    def grow_slots(self, size: int) -> None:
        self._hold_slots(_grown_array(self.start, size), _grown_array(self.length, size))

    def store(self, slot: int, flat_lines) -> None:
        """Give ``slot`` the lines given as a flat list of values (replacing its old ones)."""
        width = self.width
        count = len(flat_lines) // width
        first = self.reserve(slot, count)
        self.flat[width * first : width * (first + count)] = flat_lines

    def reserve(self, slot: int, count: int) -> int:
        """Give ``slot`` room for ``count`` lines in place of its old ones; the first of them."""
        self.release(slot)
        width = self.width
        if width * (self.used + count) > self.flat_size:
            if self.garbage > self.used // 2:
                self._compact()
            if width * (self.used + count) > self.flat_size:
                self._hold(_grown(self.flat, max(2 * self.flat_size, width * (self.used + count)), width * self.used))
        first = self.start[slot] = self.used
        self.length[slot] = count
        self.used += count
        return first

    def insert(self, slot: int, i: int, line: tuple) -> None:
        """Give ``slot`` the line ``line`` before its line ``i``."""
        start, length = self.start[slot], self.length[slot]
        flat, width = self.flat, self.width
        split = width * (start + i)
        self.store(slot, np.concatenate((flat[width * start : split], line, flat[split : width * (start + length)])))

    def release(self, slot: int) -> None:
        self.garbage += self.length[slot]
        self.length[slot] = 0

    def _compact(self) -> None:
        """Copy the lines of every slot that has some into the store's front, in slot order."""
        live = np.flatnonzero(self.lengths)
        lengths = self.lengths[live]
        starts = np.cumsum(lengths) - lengths
        lines = np.repeat(self.starts[live] - starts, lengths) + np.arange(lengths.sum())
        kept = self.lines[lines].ravel()
        flat = np.zeros(max(self.flat_size, 2 * len(kept)), self.flat.dtype)
        flat[: len(kept)] = kept
        self._hold(flat)
        self.starts[live] = starts
        self.used, self.garbage = len(lines), 0


class _Conditions:
    """Ids of the string conditions the entries carry (postfixes, substrings, excluded
    words), per attribute, held by count so that the ids of conditions no entry carries any
    more are reused. ``evaluate`` decides each condition once for a publication, for the
    kernel to look up per entry. (Excluded words are conditions rather than codes: a word
    outside the vocabulary has no code of its own.)"""

    def __init__(self) -> None:
        self.id_of: dict[tuple[str, str, str], int] = {}  # (attribute, kind, text) -> id
        self.refs: list[int] = []
        self.of_attribute: dict[str, _AttributeConditions] = {}
        self.free: list[int] = []
        self.true = np.zeros(8, np.uint8)  # per id, for the publication last evaluated

    def __getstate__(self) -> dict:
        return attributes_of(self)

    def __setstate__(self, state: dict) -> None:
        of_attribute = state["of_attribute"]
        if any(type(conditions) is dict for conditions in of_attribute.values()):  # pickled by id, not kind
            of_attribute = {attr: _AttributeConditions.of(conditions, state["true"])
                            for attr, conditions in of_attribute.items()}
        set_attributes(self, state | {"of_attribute": of_attribute})

    @staticmethod
    def _named(attr: str, c: Constraint) -> list[tuple[str, str, str]]:
        if c.type != STRING:
            return []
        return ([(attr, "postfix", q) for q in c.postfixes] + [(attr, "substring", q) for q in c.substrings]
                + [(attr, "excluded", x) for x in sorted(c.excluded)])

    def hold(self, attr: str, c: Constraint) -> None:
        for name in self._named(attr, c):
            condition = self.id_of.get(name)
            if condition is None:
                condition = self.free.pop() if self.free else len(self.refs)
                if condition == len(self.refs):
                    self.refs.append(0)
                    if condition == len(self.true):
                        self.true = _grown(self.true, 2 * condition, condition)
                self.id_of[name] = condition
                conditions = self.of_attribute.get(attr)
                if conditions is None:
                    conditions = self.of_attribute[attr] = _AttributeConditions()
                conditions.hold(condition, name[1], name[2], self.true)
            self.refs[condition] += 1

    def release(self, attr: str, c: Constraint) -> None:
        for name in self._named(attr, c):
            condition = self.id_of[name]
            self.refs[condition] -= 1
            if not self.refs[condition]:
                del self.id_of[name]
                if self.of_attribute[attr].release(condition, name[1], name[2]):
                    del self.of_attribute[attr]
                self.free.append(condition)

    def ids(self, attr: str, c: Constraint) -> list[int]:
        return [self.id_of[name] for name in self._named(attr, c)]

    def evaluate(self, items) -> np.ndarray:
        """Each condition's truth for the string values of a publication's ``items``. Conditions
        on attributes the publication lacks keep stale values: no entry carrying them can match
        (every attribute of a matching entry is one the publication has)."""
        true, of_attribute = self.true, self.of_attribute
        if not of_attribute:
            return true
        for attr, value in items:
            conditions = of_attribute.get(attr)
            if conditions is None or not isinstance(value, str):
                continue
            if conditions.excluded:
                if conditions.false >= 0:
                    true[conditions.false] = 1
                false = conditions.false = conditions.excluded.get(value, -1)
                if false >= 0:
                    true[false] = 0
            for condition, text in conditions.substrings.items():
                true[condition] = text in value
            for condition, text in conditions.postfixes.items():
                true[condition] = value.endswith(text)
        return true


class _AttributeConditions:
    """One attribute's conditions by kind. An excluded word's condition is true for every value
    but the word, so a publication changes at most two of them: the one its value makes false
    (``false``, -1: none) and the one the previous publication's made false."""

    __slots__ = ("excluded", "substrings", "postfixes", "false")

    def __init__(self) -> None:
        self.excluded: dict[str, int] = {}  # word -> id
        self.substrings: dict[int, str] = {}  # id -> text
        self.postfixes: dict[int, str] = {}
        self.false = -1

    def __getstate__(self) -> dict:  # (a dict in both builds: protocols/compiled.py)
        return attributes_of(self)

    def __setstate__(self, state: dict | tuple) -> None:
        set_attributes(self, state)

    @classmethod
    def of(cls, by_id: dict[int, tuple[str, str]], true: np.ndarray) -> "_AttributeConditions":
        """From {id: (kind, text)}, as tables pickled before kept them."""
        conditions = cls()
        for condition, (kind, text) in by_id.items():
            conditions.hold(condition, kind, text, true)
        return conditions

    def hold(self, condition: int, kind: str, text: str, true: np.ndarray) -> None:
        if kind == "excluded":
            self.excluded[text] = condition
            true[condition] = 1
        else:
            (self.substrings if kind == "substring" else self.postfixes)[condition] = text

    def release(self, condition: int, kind: str, text: str) -> bool:
        """Drop a condition; whether the attribute has none left."""
        if kind == "excluded":
            del self.excluded[text]
            if self.false == condition:
                self.false = -1
        else:
            del (self.substrings if kind == "substring" else self.postfixes)[condition]
        return not (self.excluded or self.substrings or self.postfixes)


class _Columns:
    """Every column of one index, by number, in parallel arrays: a table's places and columns
    run to hundreds of thousands, and as objects (with its attributes) they were most of a
    checkpoint's pickling time (bench/LOG.md); as arrays, matching reads them in the kernel
    (``kernels.match``). A place is where the cells of one (attribute, type), or of one
    equality value of it, go: place ``p``'s column ``2p`` holds the entries' access cells
    there (see ``FilterIndex``), column ``2p + 1`` their other cells.

    A column's cells are a segment of the arena (from ``start``, room for ``capacity``), its
    ``size`` cells counting dead ones; a cell's offset in it is kept per line of its slot's
    row, in ``FilterIndex._offsets``. A large numeric interval column keeps its first
    ``sorted`` cells ordered by lower bound, with block summaries in ``FilterIndex._blocks``
    under the key ``blocks`` (-1: none; see ``kernels._candidates``); cells added since are
    after them, and a sorted cell removed stays in place, dead (slot -1, counted in
    ``dead``), until the column is sorted again (``FilterIndex._sort``)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("start", "capacity", "size", "sorted", "dead", "blocks")
    __slots__ = FIELDS + ("place_size", "place_attribute", "views", "upkeep_views", "removal_views")
    start: array.array  # (the fields, by name for mypy and mypyc: ``_resize`` sets them by name)
    capacity: array.array
    size: array.array
    sorted: array.array
    dead: array.array
    blocks: array.array
    place_size: array.array
    place_attribute: list
    views: tuple
    upkeep_views: tuple
    removal_views: tuple

    def __init__(self) -> None:
        self.place_attribute: list[_Attribute] = []
        self._resize(8)

    def _resize(self, places: int) -> None:
        """Room for ``places`` places. The fields are ``array.array``s (twice as fast to read
        from Python as numpy's) that the kernel reads through numpy ``views`` of the same
        memory; they grow by copying, as a viewed array cannot grow in place."""
        sizes = dict.fromkeys(self.FIELDS, 2 * places) | {"place_size": places}
        for name, size in sizes.items():
            old = getattr(self, name, array.array("q"))
            new = _grown_array(old, size)
            if name == "blocks":
                new[len(old) :] = array.array("q", [-1]) * (size - len(old))
            setattr(self, name, new)
        self._view()

    def _view(self) -> None:
        # ``views`` in the order ``kernels.tables_of`` takes them; the three made together (``_kernel_storage``)
        view = {name: np.frombuffer(getattr(self, name), np.int64) for name in self.FIELDS + ("place_size",)}
        self.views = tuple(view[name] for name in ("place_size", "start", "size", "sorted", "blocks"))
        self.upkeep_views = tuple(view[name] for name in ("start", "capacity", "size", "place_size"))
        self.removal_views = tuple(view[name] for name in ("start", "size", "sorted", "dead", "place_size"))

    def __getstate__(self) -> dict:  # without the views (pickled, they would be copies)
        return {name: getattr(self, name) for name in self.FIELDS + ("place_size", "place_attribute")}

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._view()

    def new_place(self, attribute: "_Attribute") -> int:
        place = len(self.place_attribute)
        if place == len(self.place_size):
            self._resize(2 * place)
        self.place_attribute.append(attribute)
        return place

    def __len__(self) -> int:
        return 2 * len(self.place_attribute)


@dataclass(slots=True, eq=False)
class _Attribute:
    """The places of one (attribute, type), by number (see ``_Columns``): its interval cells,
    and a bucket of equality cells per value."""

    id: int
    numeric: bool  # its interval columns may be sorted (string codes get renumbered)
    cells: int = 0  # in all its places
    interval: int = -1  # its interval place (the index gives it one)
    buckets: dict[object, int] = field(default_factory=dict)
    values: list = field(default_factory=list)  # the buckets' values, sorted

    def __reduce__(self):
        return rebuilt_by_constructor(self)


class IndexStorage:
    """The slots, columns and rows of a ``FilterIndex`` and their upkeep."""

    # False once the arrays the kernels read may have been replaced (grown, laid out again) since
    # the query engine last gathered them (``QueryEngine._kernel_tables``): set by every change
    _arrays_gathered: bool = False
    # the arrays the storage kernels change, and the ``kernels.Storage`` holding them (``_kernel_storage``; not pickled)
    _storage_arrays: tuple = ()
    _storage: object = None

    def __init__(self, work: Work | None = None, vocabulary: Vocabulary | None = None) -> None:
        self.work = work if work is not None else Work()
        self.vocabulary = vocabulary if vocabulary is not None else PROCESS_VOCABULARY
        self._encoded_version = self.vocabulary.version  # the codes its cells hold
        self._attributes: dict[tuple[str, str], _Attribute] = {}  # by (attr, type)
        # for the kernels' questions: per attribute number of the vocabulary, the attribute's id
        # here (-1: none); per attribute id, its interval place, and its buckets' lines (code,
        # place) in code order: a new bucket's line inserted while its attribute has few (``_place``),
        # the stale attributes (many values, or codes changed) laid out again whole before the next question
        self._attribute_of_number = np.full(8, -1, np.int64)
        self._interval_of = np.zeros(8, np.int64)
        self._buckets = _Lines(2)
        self._stale_buckets: dict[_Attribute, None] = {}
        self._arena = _Arena()
        self._live_cells = 0  # cells of the slots in use (the arena also holds room, dead cells, garbage)
        self._columns = _Columns()
        self._blocks = _Lines(2)  # per sorted column (its key): (greatest hi, least hi) of each block of cells
        self._block_keys: list[int] = []  # keys of _blocks no column holds
        self._block_key_count = 0  # keys ever used
        self._rows = _Lines()
        self._offsets = _Lines(1, np.int32)  # per line of a row: its cell's offset in the column
        self._residual_lines = _Lines()  # per slot: its excluded numbers and string conditions
        self._conditions = _Conditions()
        self._keys = np.empty(8, object)  # per slot (an object array: fast to gather)
        self._slots = 0  # slots ever used
        self._filters: list[Filter] = []  # (None in a free slot, which is never read; so in ``_columns_of``)
        self._residual_constraints: list[tuple | None] = []  # per slot: its (attr, Constraint) with residuals
        # per slot: the columns holding its cells (an array, not a list of ints: an advertisement's
        # row can hold a thousand, and every broker keeps every advertisement)
        self._columns_of: list[array.array] = []
        self._slot_of: dict[Key, int] = {}  # an entry's slot
        self._parts: dict[int, tuple[int, ...]] = {}  # a disjunctive entry's slot -> its disjuncts' slots
        self._owner = np.zeros(8, np.int64)  # per slot: the entry's slot (a part's entry; else itself)
        self._part_count = np.zeros(8, np.int32)  # per entry's slot: its disjuncts (1: a conjunction)
        self._free: list[int] = []
        self._unsat_slots: set[int] = set()
        self._group = np.full(8, NO_GROUP, np.int32)  # per slot: its group in ``match`` (a routing table's last hop)
        self._group_seen = np.zeros(0, np.uint8)  # scratch per group (a routing table sizes it)
        self._residual = np.zeros(8, bool)  # per slot: has residual constraints (an array, for the queries)
        self._unsat = np.zeros(8, bool)
        self._slot_marks = np.zeros(8, np.uint8)  # scratch for the kernels, all zero between calls
        self._slot_counts = np.zeros(8, np.int32)
        self._slot_flagged = np.zeros(8, np.uint8)
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
        self._arrays_gathered = False
        self.work.inserts += 1
        self.work.insert_entries += len(self._slot_of)
        slot = self._new_slot()
        self._keys[slot] = key
        self._slot_of[key] = slot
        if not f.alternatives:
            self._store(slot, f)
            return
        # a disjunction: the entry's slot holds no cells; each disjunct is a part slot of its own
        self._filters[slot], self._columns_of[slot], self._residual_constraints[slot] = f, array.array("i"), ()
        self._residual[slot] = self._unsat[slot] = False
        parts = self._parts[slot] = tuple(self._new_slot() for _ in f.alternatives)
        for part, disjunct in zip(parts, f.alternatives):
            self._owner[part] = slot
            self._store(part, disjunct)
        self._part_count[slot] = len(parts)

    def __getstate__(self) -> dict:
        """The slots' columns as one array and their lengths (-1: a free slot). Pickled slot by
        slot, each slot's array added a tuple and a buffer, all of which the pickler keeps until
        the dump ends."""
        state = attributes_of(self)
        state.pop("_storage_arrays", None)
        state.pop("_storage", None)
        columns_of = state.pop("_columns_of")
        lengths, flat = state["_columns_of_lengths"], state["_columns_of_flat"] = array.array("i"), array.array("i")
        for columns in columns_of:
            lengths.append(-1 if columns is None else len(columns))
            if columns:
                flat.extend(columns)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        if "_columns_of_flat" in state:
            flat, start, columns_of = state.pop("_columns_of_flat"), 0, []
            for length in state.pop("_columns_of_lengths"):
                columns_of.append(None if length < 0 else flat[start : start + length])
                start += max(length, 0)
            state["_columns_of"] = columns_of
        set_attributes(self, state)
        if "_live_cells" not in state:  # a checkpoint written before the count was kept
            self._live_cells = sum(len(columns) for columns in self._columns_of if columns)
        if "_buckets" not in state:  # written before matching looked the buckets up in the kernel
            self._attribute_of_number = np.full(8, -1, np.int64)
            self._interval_of = np.zeros(len(self._query_set), np.int64)
            self._buckets = _Lines(2)
            self._buckets.grow_slots(len(self._query_set))
            self._stale_buckets = dict.fromkeys(self._attributes.values())
            for (attr, type_), attribute in self._attributes.items():
                self._number(attribute, attr, type_)
        self._arrays_gathered = False  # (a state may carry another table's gathered arrays)

    def _new_slot(self) -> int:
        slot = self._free.pop() if self._free else self._grow()
        self._owner[slot], self._part_count[slot] = slot, 1
        return slot

    def _store(self, slot: int, f: Filter) -> None:
        """Give ``slot`` the cells, row and residual lines of conjunction ``f``."""
        self._filters[slot] = f
        places = array.array("q")
        access, rank = -1, None  # (a conjunction constrains an attribute at least: both are set below)
        attributes = self._attributes
        probes = self.vocabulary.stored_probes(f)  # (a renumbering here re-encodes the cells before the next query)
        for attr, type_, point in probes.per_constraint:
            attribute = attributes.get((attr, type_)) or self._attribute(attr, type_)
            place = attribute.interval if point is None else self._place(attribute, point)
            places.append(place)
            # the access cell: the smallest selective bucket of the entry's equality values
            # (one holding under half of its attribute's cells) if it has any, else its
            # smallest interval place, else its smallest bucket: the cells a probe is least
            # likely to pass
            size = self._columns.place_size[place]  # (read anew: a new place may grow the array)
            place_rank = (point is None or 2 * size >= attribute.cells, point is not None, size)
            if rank is None or place_rank < rank:
                access, rank = place, place_rank
            attribute.cells += 1  # (the cell itself goes into its column below)
        residual = self._residual_constraints[slot] = f.residual_constraints
        empty = f.unsatisfiable
        self._residual[slot], self._unsat[slot] = bool(residual), empty
        if empty:
            self._unsat_slots.add(slot)
        row_columns = self._columns_of[slot] = self._store_row(slot, probes.rows, places, access)
        self._live_cells += len(row_columns)
        self._keep_sorted(row_columns)
        if residual:
            for attr, c in residual:
                self._conditions.hold(attr, c)
            self._residual_lines.store(slot, self._encode_residuals(residual))

    def remove(self, key: Key) -> Filter:
        slot = self._slot_of.pop(key)
        self._arrays_gathered = False
        f = self._filters[slot]
        for part in self._parts.pop(slot, ()):
            self._release(part)
        self._release(slot)
        return f

    def _release(self, slot: int) -> None:
        """Drop ``slot``'s cells and per-slot state; the slot becomes free."""
        row_columns = self._columns_of[slot]
        if row_columns:
            kernels.remove_cells(slot, np.frombuffer(row_columns, np.int32), self._kernel_storage())
            place_attribute = self._columns.place_attribute
            for column in row_columns:
                place_attribute[column >> 1].cells -= 1
        self._rows.release(slot)
        self._offsets.release(slot)
        self._keep_sorted(row_columns)
        self._live_cells -= len(row_columns)
        if 8 * self._live_cells < self._arena.used and self._arena.used >= COMPACT_FROM:
            self._compact()  # a table that grew and shrank gives its room back (and then holds under 5x its cells)
        self._residual_lines.release(slot)
        for attr, c in self._residual_constraints[slot]:  # type: ignore[union-attr]
            self._conditions.release(attr, c)
        self._keys[slot] = self._filters[slot] = self._columns_of[slot] = None  # type: ignore[call-overload]
        self._residual_constraints[slot] = None
        self._group[slot] = NO_GROUP
        self._unsat_slots.discard(slot)
        self._free.append(slot)

    def _grow(self) -> int:
        slot = self._slots
        self._slots += 1
        self._filters.append(None)  # type: ignore[arg-type]  # (a free slot's: see ``__init__``)
        self._residual_constraints.append(None)
        self._columns_of.append(None)  # type: ignore[arg-type]
        if slot == len(self._keys):
            self._grow_slot_arrays(2 * slot)
        return slot

    def _grow_slot_arrays(self, size: int) -> None:
        """Room for ``size`` slots in every per-slot array (subclasses add theirs)."""
        for name in ("_keys", "_residual", "_unsat", "_slot_marks", "_slot_counts", "_slot_flagged", "_owner",
                     "_part_count"):
            old = getattr(self, name)
            setattr(self, name, _grown(old, size, len(old)))
        self._group = np.concatenate([self._group, np.full(size - len(self._group), NO_GROUP, np.int32)])
        self._rows.grow_slots(size)
        self._offsets.grow_slots(size)
        self._residual_lines.grow_slots(size)

    def _attribute(self, attr: str, type_: str) -> _Attribute:
        attribute = self._attributes.get((attr, type_))
        if attribute is None:
            attribute = self._attributes[attr, type_] = _Attribute(len(self._attributes), type_ == NUMERIC)
            attribute.interval = self._columns.new_place(attribute)
            if attribute.id == len(self._query_set):
                for name in ("_query_set", "_query_lo", "_query_hi", "_query_bits", "_interval_of"):
                    old = getattr(self, name)
                    setattr(self, name, _grown(old, 2 * len(old), len(old)))
                self._buckets.grow_slots(len(self._query_set))
            self._number(attribute, attr, type_)
        return attribute

    def _number(self, attribute: _Attribute, attr: str, type_: str) -> None:
        """Enter a new attribute in the kernel's look-ups by the vocabulary's attribute number."""
        number = self.vocabulary.attribute_number(attr, type_)
        if number >= len(self._attribute_of_number):
            known = self._attribute_of_number
            self._attribute_of_number = np.full(max(2 * len(known), number + 1), -1, np.int64)
            self._attribute_of_number[: len(known)] = known
        self._attribute_of_number[number] = attribute.id
        self._interval_of[attribute.id] = attribute.interval

    def _lay_out_buckets(self) -> None:
        """The lines (code, place) of the buckets of the stale attributes (whose codes changed, or
        too many values to keep line by line), in value order (that is code order)."""
        self._arrays_gathered = False
        for attribute in self._stale_buckets:
            buckets = attribute.buckets
            self._buckets.store(attribute.id, [x for value in attribute.values
                                               for x in (self._bucket_code(attribute, value), buckets[value])])
        self._stale_buckets.clear()

    def _bucket_code(self, attribute: _Attribute, value) -> float:
        """The code of ``attribute``'s equality value ``value`` (its bucket's line is ordered by it)."""
        return self.vocabulary._encode(value, NUMERIC if attribute.numeric else STRING)

    def _place(self, attribute: _Attribute, point) -> int:
        """The place of a constraint of ``attribute`` with this equality value (None: an interval)."""
        if point is None:
            return attribute.interval
        bucket = attribute.buckets.get(point)
        if bucket is None:
            bucket = attribute.buckets[point] = self._columns.new_place(attribute)
            values = attribute.values
            i = bisect.bisect_left(values, point)
            values.insert(i, point)
            # kept in order line by line while it is short; a long one (or a stale one, or every
            # string one after a renumbering) is laid out whole before the next question: many
            # values added at once would be copied as many times
            if len(values) > LAID_OUT_FROM:
                self._stale_buckets[attribute] = None
            elif attribute not in self._stale_buckets:
                self._buckets.insert(attribute.id, i, (self._bucket_code(attribute, point), bucket))
        return bucket

    def _store_row(self, slot: int, probes: np.ndarray, places: array.array, access: int) -> array.array:
        """Give ``slot`` its row and its cells in their columns (their attributes counted them
        already) and their offsets there; returns the row's columns. The row is in attribute
        order, so that a question about a few attributes finds their cells in a wide row by
        bisection (kernels._verify_sparse)."""
        count = len(places)
        row_columns = array.array("i", bytes(4 * count))
        rows, offsets = self._rows, self._offsets
        first, offsets_first = rows.reserve(slot, count), offsets.reserve(slot, count)
        if not count:
            return row_columns
        columns_of_lines = np.frombuffer(row_columns, np.int32)
        done = kernels.store_row(slot, probes, np.frombuffer(places, np.int64), access, first, columns_of_lines,
                                 offsets_first, self._kernel_storage())
        while done < count:  # a full column stopped it: room there, and on from that line
            self._relocate(row_columns[done])  # (it may grow or compact the arena: new arrays)
            done = kernels.append_cells(slot, columns_of_lines, done, first, offsets_first, self._kernel_storage())
        return row_columns

    def _kernel_storage(self) -> object:
        """The arrays the storage kernels change, as one ``kernels.Storage``, made again when one of
        them has been replaced (grown, compacted): checked by identity at every call, ten comparisons
        in the compiled code, where each array passed to a kernel on its own costs an allocation
        (bench/LOG.md, session 72)."""
        arena, rows, offsets, columns = self._arena, self._rows, self._offsets, self._columns
        held = self._storage_arrays
        if (held and held[0] is self._attribute_of_number and held[1] is rows.lines and held[2] is columns.views
                and held[3] is arena.slots and held[4] is arena.lo and held[5] is arena.hi and held[6] is arena.bits
                and held[7] is arena.line and held[8] is offsets.flat and held[9] is offsets.starts):
            return self._storage
        self._storage_arrays = (self._attribute_of_number, rows.lines, columns.views, arena.slots, arena.lo, arena.hi,
                                arena.bits, arena.line, offsets.flat, offsets.starts)
        start, capacity, size, place_size = columns.upkeep_views
        _, _, sorted_, dead, _ = columns.removal_views
        self._storage = kernels.storage_of(self._attribute_of_number, rows.lines, start, capacity, size, sorted_, dead,
                                           place_size, arena.slots, arena.lo, arena.hi, arena.bits, arena.line,
                                           offsets.flat, offsets.starts)
        return self._storage

    def _keep_sorted(self, changed) -> None:
        """Sort those of the ``changed`` columns that are large numeric interval columns
        and have no sorted cells yet, or more cells unsorted or dead than an eighth of them."""
        columns = self._columns
        for column in changed:
            ordered = columns.sorted[column]
            if ordered:
                if 8 * (columns.size[column] - ordered + columns.dead[column]) > ordered:
                    self._sort(column)
            elif columns.size[column] >= SORTED_COLUMN:
                attribute = columns.place_attribute[column >> 1]
                if attribute.numeric and column >> 1 == attribute.interval:
                    self._sort(column)

    def _sort(self, column: int) -> None:
        """Order a column's live cells by lower bound and summarise them per block; a column
        under half of ``SORTED_COLUMN`` cells keeps them unsorted."""
        columns, arena = self._columns, self._arena
        start, size = columns.start[column], columns.size[column]
        live = start + np.flatnonzero(arena.slots[start : start + size] >= 0)
        order = live[np.argsort(arena.lo[live], kind="stable")] if len(live) >= SORTED_COLUMN // 2 else live
        end = start + len(order)
        for name in _Arena.NAMES:
            values = getattr(arena, name)
            values[start:end] = values[order]
        offsets = self._offsets
        offsets.flat[offsets.starts[arena.slots[start:end]] + arena.line[start:end]] = np.arange(len(order))
        columns.size[column], columns.dead[column] = len(order), 0
        if columns.blocks[column] >= 0:
            self._blocks.release(columns.blocks[column])
            self._block_keys.append(columns.blocks[column])
            columns.blocks[column] = -1
        ordered = columns.sorted[column] = len(order) if len(order) >= SORTED_COLUMN // 2 else 0
        if ordered:
            key = columns.blocks[column] = self._block_keys.pop() if self._block_keys else self._new_block_key()
            firsts = np.arange(0, ordered, kernels.BLOCK)
            hi = arena.hi[start:end]
            summaries = np.column_stack([np.maximum.reduceat(hi, firsts), np.minimum.reduceat(hi, firsts)])
            self._blocks.store(key, summaries.ravel())

    def _new_block_key(self) -> int:
        key = self._block_key_count
        self._block_key_count += 1
        if key == len(self._blocks.start):
            self._blocks.grow_slots(2 * key)
        return key

    def _relocate(self, column: int) -> None:
        """Give a full column twice the room at the arena's end."""
        columns, arena = self._columns, self._arena
        old_start, old_capacity = columns.start[column], columns.capacity[column]
        columns.capacity[column] = max(8, 2 * old_capacity)
        columns.start[column] = arena.allocate(columns.capacity[column])
        if old_capacity:
            arena.move(old_start, columns.size[column], columns.start[column])
            arena.garbage += old_capacity
            if arena.garbage > arena.used // 2:
                self._compact()

    def _compact(self) -> None:
        """Copy every column into a fresh arena, dropping garbage; a column keeps its room
        unless its cells fill less than a quarter of it (it shrank), then it gets twice its cells
        (none when empty). In numpy over all columns at once: a table keeps every column it ever
        had, and many are empty."""
        columns, old, count = self._columns, self._arena, len(self._columns)
        start, size, capacity = (np.frombuffer(getattr(columns, name), np.int64)[:count]
                                 for name in ("start", "size", "capacity"))
        fitted = np.where(4 * size >= capacity, capacity, 2 * size)
        fitted_start = np.cumsum(fitted) - fitted
        used = int(fitted.sum())
        new = _Arena(max(64, used))
        new.used = used
        within = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)  # a cell's offset
        source, target = np.repeat(start, size) + within, np.repeat(fitted_start, size) + within
        for name in _Arena.NAMES:
            getattr(new, name)[target] = getattr(old, name)[source]
        start[:], capacity[:] = fitted_start, fitted
        self._arena = new

    def _encode_residuals(self, residual: tuple) -> list[float]:
        """The residual lines of an entry's residual constraints, flattened: one per excluded
        number and one per string condition (its condition id)."""
        lines: list[float] = []
        for attr, c in residual:
            attribute_id = self._attributes[attr, c.type].id
            if c.type == NUMERIC:
                for value in sorted(c.excluded):
                    lines += (attribute_id, kernels.EXCLUDED, float(value))
            for condition in self._conditions.ids(attr, c):
                lines += (attribute_id, kernels.CONDITION, condition)
        return lines

    def _reencode_strings(self) -> None:
        if self._encoded_version == self.vocabulary.version:
            return
        self._arrays_gathered = False
        arena, rows, lines = self._arena, self._rows, self._rows.lines
        for slot in range(self._slots):
            if not self._columns_of[slot]:  # a free slot or a disjunctive entry's (its parts hold its cells)
                continue
            constraints = sorted(self._filters[slot].constraints.items(),
                                 key=lambda item: self._attributes[item[0], item[1].type].id)
            for j, (column, (_, c)) in enumerate(zip(self._columns_of[slot], constraints)):
                if c.type == STRING:
                    lo, _, hi, _ = self.vocabulary.bounds(c)
                    i = self._columns.start[column] + self._offsets.flat[self._offsets.start[slot] + j]
                    arena.lo[i], arena.hi[i] = lo, hi
                    lines[rows.start[slot] + j, :2] = lo, hi
        for attribute in self._attributes.values():
            if not attribute.numeric:
                self._stale_buckets[attribute] = None
        self._encoded_version = self.vocabulary.version
