"""A columnar index of filters answering routing-table questions for a whole table at once.

Each (attribute, type) pair holds, for every entry that constrains it, the entry's interval
bounds as float64 (numbers as themselves, strings as order-preserving codes from
``Vocabulary``), in an interval column or, for equality constraints, in a bucket per value.
Every table of a process shares one vocabulary, and a message keeps its encoding on itself
while the vocabulary gains no word, so a publication or filter is encoded once per process,
not at every table it meets.
Every entry also keeps all its cells together in a row. A query probes few column cells
for candidates and checks each candidate's row (the numba kernel of protocols/kernels.py):
matching a publication probes one access cell per entry (in the bucket of the entry's least
common selective equality value, else in its least common place), so its cost follows the
candidates, not the table size (see ``FilterIndex``). Rows are in attribute order, and on
tables of wide entries (advertisements of a thousand attributes) a question about a few
attributes looks them up in a row by bisection, or counts each entry's passing cells over
those attributes' columns when that reads less (``kernels.ask``).
The storage (slots, columns, rows, the vocabulary, the work counters) is
protocols/index_storage.py; this module holds the questions.
Conditions that are not intervals (excluded values, postfixes, substrings) and unsatisfiable
filters are residual: matching checks them in the kernel (numeric exclusions by value,
string conditions decided once per publication); other questions re-check the candidates
carrying them with the scalar oracle of
protocols/language.py, so every answer equals the oracle's exactly. The index counts work
in a ``Work`` record, defined by what a counting matcher would compare, so that the
runtime's cost model, which turns it into virtual time, does not change with this index's
shortcuts.

A disjunctive entry ``F1 || F2`` keeps a slot of its own, which holds no cells and carries
whatever a routing table keeps per entry, and one part slot per disjunct, indexed like any
conjunction. Questions are asked per part and per disjunct of the query, then combined the
way the oracle combines them: matching and intersection take the union, covering the
intersection over the query's disjuncts, covered-by keeps the entries all of whose parts are
covered. Answers name entries' slots only.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

from . import kernels
from .index_planning import QueryEngine
# what the rest of the project takes from the index comes from here (the storage is an inside)
from .index_storage import NO_GROUP, PROCESS_VOCABULARY, SORTED_COLUMN, Key, Vocabulary, Work  # noqa: F401
from .language import Filter, Publication, constraints_overlap, residual_implied, unsatisfiable


class FilterIndex(QueryEngine):
    """A routing table of filters keyed by hashable keys (subscription or advertisement keys).

    Every entry has one cell per constrained attribute, in the place of that attribute (or of
    its equality value there), and the same cells in its row. One of its cells is its access
    cell: the one in the smallest bucket of its equality values that holds under half of its
    attribute's cells (a value nearly every entry shares, like a class, selects nothing),
    else the one in its smallest interval place, else in its smallest bucket.
    Questions an entry answers only if all its attributes pass (matching, covering,
    intersected-by) probe access cells; questions every attribute of the query must pass
    (covered-by, intersecting) probe every cell of the query's least common attribute (a
    value nearly every entry shares counting as the most common, see ``kernels.ask``). Either way
    the candidates are then checked against their rows.

    Queries return keys in slot order, which depends only on the table's history, so results
    are deterministic. ``work`` (possibly shared by several tables) accumulates the counters.
    """

    # ------------------------------------------------------------------ the questions

    def matching(self, publication: Publication) -> list[Key]:
        """Keys of the entries (subscriptions) that match ``publication``."""
        return self.keys_of(self.match(publication).slots)

    def match(self, publication: Publication, exclude: int = NO_GROUP) -> "Match":
        """The entries matching ``publication`` (slots, in slot order), in one kernel call
        that also checks their residual conditions and groups them (see ``Match``): the
        groups of a routing table are last hops, and ``exclude`` the one the publication came
        from."""
        points = self.vocabulary.points(publication)  # first: its unknown words may renumber every code
        out, room, found, local, groups, checks, cells = kernels.match(
            points, self._kernel_tables(), self._conditions.evaluate(publication.items), exclude)
        self._count("match", cells)
        self.work.residual_checks += checks
        return Match(out[:found], out[2 * room : 2 * room + groups].tolist(), out[room : room + local])

    def covering(self, f: Filter) -> list[Key]:
        """Keys of the entries that cover ``f`` (for a disjunction: every disjunct of ``f`` is
        covered by one of the entry's)."""
        return self.keys_of(self._covering_slots(f))

    def is_covered(self, f: Filter) -> bool:
        """Whether some entry covers ``f`` (``covering`` without naming them all)."""
        return len(self._covering_slots(f)) > 0

    def _covering_slots(self, f: Filter) -> np.ndarray:
        found = None
        for disjunct in f.disjuncts:
            slots = self._covering_conjunction(disjunct)
            found = slots if found is None else np.intersect1d(found, slots, assume_unique=True)
        return found  # type: ignore[return-value]  # (a filter has a disjunct at least)

    def _covering_conjunction(self, f: Filter) -> np.ndarray:
        """Entries' slots, in slot order, with a disjunct that covers conjunction ``f``."""
        if unsatisfiable(f):
            self._count("cover", 0)
            return np.array(sorted(self._slot_of.values()), np.int64)
        slots, _ = self._probe(self.vocabulary.probes(f), kernels.CONTAINS, "cover", None)
        if not len(slots):
            return slots
        recheck = True if _has_residual(f) else self._residual[slots]
        return self._entries(self._exact(slots, recheck, lambda slot: _residuals_implied(self._filters[slot], f)))

    def covered_by(self, f: Filter) -> list[Key]:
        """Keys of the entries that ``f`` covers (every unsatisfiable entry among them): those
        whose every disjunct one of ``f``'s covers."""
        covered = self._union(self._covered_by_conjunction, f.disjuncts)
        if not self._parts:
            return self.keys_of(covered)
        entries, parts = np.unique(self._owner[covered], return_counts=True)
        return self.keys_of(entries[parts == self._part_count[entries]])

    def _covered_by_conjunction(self, f: Filter) -> np.ndarray:
        """Slots (entries' or their disjuncts'), in slot order, that conjunction ``f`` covers."""
        slots, _ = self._probe(self.vocabulary.probes(f), kernels.WITHIN, "cover", len(f.constraints))
        if self._unsat_slots:
            slots = np.union1d(slots, np.fromiter(self._unsat_slots, np.int64))
        if not len(slots):
            return slots
        recheck = (True if _has_residual(f) else self._residual[slots]) & ~self._unsat[slots]
        return self._exact(slots, recheck, lambda slot: _residuals_implied(f, self._filters[slot]))

    def intersecting(self, sub: Filter) -> list[Key]:
        """Keys of the entries (advertisements) that intersect subscription ``sub``."""
        return self.keys_of(self.intersecting_slots(sub))

    def intersecting_slots(self, sub: Filter) -> np.ndarray:
        """Slots of the entries that intersect ``sub`` (one of its disjuncts), in slot order."""
        return self._union(self._intersecting_conjunction, sub.disjuncts)

    def _intersecting_conjunction(self, sub: Filter) -> np.ndarray:
        """A residual condition can only empty an overlap that is a single point, so only
        entries touching ``sub`` in a point there (or unsatisfiable ones) are re-checked."""
        if unsatisfiable(sub):
            return np.zeros(0, np.int64)
        slots, points = self._probe(self.vocabulary.probes(sub), kernels.OVERLAP, "match", len(sub.constraints))
        if not len(slots):
            return slots
        return self._entries(self._exact(slots, points, lambda slot: _overlaps_hold(self._filters[slot], sub)))

    def intersected_by(self, adv: Filter) -> list[Key]:
        """Keys of the entries (subscriptions) that advertisement ``adv`` intersects."""
        return self.keys_of(self.intersected_by_slots(adv))

    def intersected_by_slots(self, adv: Filter) -> np.ndarray:
        """Slots of the entries that ``adv`` (one of its disjuncts) intersects, in slot order."""
        return self._union(self._intersected_by_conjunction, adv.disjuncts)

    def _intersected_by_conjunction(self, adv: Filter) -> np.ndarray:
        slots, points = self._probe(self.vocabulary.probes(adv), kernels.OVERLAP, "match", None)
        if not len(slots):
            return slots
        recheck = True if unsatisfiable(adv) else points
        return self._entries(self._exact(slots, recheck, lambda slot: _overlaps_hold(adv, self._filters[slot])))

    def _entries(self, slots: np.ndarray) -> np.ndarray:
        """The distinct entries' slots, in slot order, of ``slots`` (entries' or disjuncts')."""
        return np.unique(self._owner[slots]) if self._parts else slots

    @staticmethod
    def _union(question: Callable[[Filter], np.ndarray], disjuncts: tuple[Filter, ...]) -> np.ndarray:
        """The union of ``question``'s sorted slot arrays for ``disjuncts`` (the one array, when one)."""
        found = question(disjuncts[0])
        for disjunct in disjuncts[1:]:
            found = np.union1d(found, question(disjunct))
        return found

    def keys_of(self, slots: np.ndarray) -> list[Key]:
        """The keys of ``slots``, in their order."""
        return self._keys[slots].tolist()


class Match(NamedTuple):
    """A publication's matching entries: ``slots`` (an array, in slot order), the distinct
    ``groups`` among them (ascending, without the excluded one) and the ``local`` slots
    (group -1)."""

    slots: np.ndarray
    groups: list[int]
    local: np.ndarray


# The re-checks below finish what the kernel started: it found the intervals passing, so only
# residual conditions (and, for overlaps, empty constraints) can still turn an answer.


def _kept_by_identity(test: Callable[[Filter, Filter], bool]) -> Callable[[Filter, Filter], bool]:
    """``test`` with its answers kept per pair of filter objects: one process re-checks the same
    two objects at every table both reach (in the engine benchmark each pair about 50 times).
    An answer is kept with both filters, so their ids name them for as long as it is kept.
    Emptied when full, which bounds the filters it keeps alive."""
    answers: dict[tuple[int, int], tuple[Filter, Filter, bool]] = {}

    @functools.wraps(test)
    def kept(a: Filter, b: Filter) -> bool:
        key = (id(a), id(b))
        entry = answers.get(key)
        if entry is None:
            if len(answers) >= _PAIRS_KEPT:
                answers.clear()
            entry = answers[key] = (a, b, test(a, b))
        return entry[2]

    return kept


_PAIRS_KEPT = 1 << 14  # (the engine benchmark's re-checks: 13,427 and 15,051 pairs)


@_kept_by_identity
def _residuals_implied(outer: Filter, inner: Filter) -> bool:
    """``covers(outer, inner)`` for satisfiable ``inner`` whose intervals lie in ``outer``'s."""
    inner_constraints = inner.constraints
    for attr, c in outer.constraints.items():
        if c.residual and not residual_implied(inner_constraints[attr], c):
            return False
    return True


@_kept_by_identity
def _overlaps_hold(adv: Filter, sub: Filter) -> bool:
    """``intersects(adv, sub)`` for filters whose intervals overlap on every attribute of ``sub``."""
    adv_constraints = adv.constraints
    for attr, c in sub.constraints.items():
        a = adv_constraints[attr]
        if (c.residual or a.residual or c.empty or a.empty) and not constraints_overlap(a, c):
            return False
    return True


def _has_residual(f: Filter) -> bool:
    return bool(f.residual_constraints)
