"""The filter index's query engine (protocols/index.py): which places and blocks of cells a
question reads, laid out for the kernel, the work it counts, and the scalar re-checks of
candidates with residual conditions."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from . import kernels

from .index_storage import IndexStorage


class QueryEngine(IndexStorage):
    """A ``FilterIndex``'s query plans over its storage."""

    # ------------------------------------------------------------------ the query engine

    def _probe(self, probes, test: int, family: str, target: int | None):
        """Slots (in slot order) answering the question, with their re-check flags (OVERLAP:
        single-point overlaps where residual conditions may empty them, unsatisfiable entries)."""
        segments, bounds, candidates, counting = self._plan(probes, test, family, target)
        if not candidates:
            return np.zeros(0, np.int64), np.zeros(0, bool)
        found_slots = np.empty(candidates, np.int64)
        found_flags = np.empty(candidates, np.bool_)
        arena, rows = self._arena, self._rows
        if counting:
            found = kernels.count_query(
                test, arena.slots, arena.lo, arena.hi, arena.bits, segments, target, self._unsat,
                self._slot_counts, self._slot_flagged, self._slot_marks, found_slots, found_flags,
            )
            return found_slots[:found], found_flags[:found]
        found = kernels.query(
            test, target is None, arena.slots, arena.lo, arena.hi, arena.bits, segments, self._blocks.lines,
            rows.lines, rows.start, rows.length, self._unsat, bounds,
            self._query_set, self._query_lo, self._query_hi, self._query_bits, self._slot_marks,
            found_slots, found_flags,
        )
        return found_slots[:found], found_flags[:found]

    def _plan(self, probes, test: int, family: str, target: int | None):
        """Count the work of a question and lay out the kernel's input: the probed column
        segments (``_segment``) and the query's bounds per attribute (id, lo, hi,
        bits) as arrays, how many candidates there can be, and whether to count passing
        cells (``kernels.count_query``) rather than verify candidates' rows.

        ``target`` None: every attribute of an entry must be probed and pass; else every one
        of the ``target`` probed attributes must be an entry's and pass: the candidates are
        the cells of the query's least common attribute, unless reading every query
        attribute's cells costs less than visiting the candidates' rows (wide entries, see
        ``_verify_cost``); then every one is probed and counted. The work counted is
        the cells of every probed attribute's places: what a counting matcher compares,
        however few cells this index reaches (the cost model charges for the former).
        """
        self._reencode_strings()
        attributes, columns = self._attributes, self._columns
        bounds, probed = [], []  # bounds: (attribute id, lo, hi, bits) per probe, flattened
        cells, unknown = 0, False
        fewest = fewest_rank = None  # the probe a query-side question's candidates come from
        for attr, type_, (low, _, high, _), flags, query in probes:
            attribute = attributes.get((attr, type_))
            if attribute is None:
                unknown = True
                continue
            places, size, shared = attribute.probed(test, query, columns.place_size)
            cells += size
            probe = (size, places, low, high, flags)
            probed.append(probe)
            bounds += (attribute.id, low, high, flags)
            # the attribute with the fewest cells, but a value nearly every entry shares
            # (which they all pass) after any range
            if fewest is None or (shared, size) < fewest_rank:
                fewest, fewest_rank = probe, (shared, size)
        self._count(family, cells)
        segments = []  # (start, size, lo, hi, bits, sorted, block0) per probed column, flattened
        if target is None:
            for _, places, low, high, flags in probed:
                for place in places:
                    if columns.size[2 * place]:
                        segments += self._segment(2 * place, low, high, flags)
        elif probed and not unknown:
            counting = cells < self._verify_cost(fewest[0], len(probed))
            for _, places, low, high, flags in probed if counting else (fewest,):
                for place in places:
                    for column in (2 * place, 2 * place + 1):  # its access and other cells
                        if columns.size[column]:
                            segments += self._segment(column, low, high, flags)
            if counting:
                return self._layout(segments, bounds) + (fewest[0], True)
        candidates = sum(segments[1::7])
        if not candidates:
            return None, None, 0, False
        return self._layout(segments, bounds) + (candidates, False)

    @staticmethod
    def _layout(segments: list, bounds: list) -> tuple[np.ndarray, np.ndarray]:
        return np.array(segments, np.float64).reshape(-1, 7), np.array(bounds, np.float64).reshape(-1, 4)

    def _verify_cost(self, candidates: int, query_attributes: int) -> float:
        """Cells a query-side question reads verifying ``candidates`` rows of the table's
        average width (by bisection where that reads fewer)."""
        rows = self._rows
        width = (rows.used - rows.garbage) / max(1, self._slots - len(self._free))
        return candidates * min(width, query_attributes * math.log2(2 + width))

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

    def _exact(self, slots: np.ndarray, recheck, exact: Callable[[int], bool]) -> np.ndarray:
        """``slots`` but those flagged in ``recheck`` (per slot, or True: all) that fail ``exact``."""
        if recheck is False:
            return slots
        positions = np.flatnonzero(recheck) if recheck is not True else range(len(slots))
        if not len(positions):
            return slots
        self.work.residual_checks += len(positions)
        keep = None
        for position in positions:
            if not exact(int(slots[position])):
                if keep is None:
                    keep = np.ones(len(slots), bool)
                keep[position] = False
        return slots if keep is None else slots[keep]
