"""The filter index's query engine (protocols/index.py): a question asked of the kernel, the
work it counts, and the scalar re-checks of candidates with residual conditions."""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import kernels

from .index_storage import IndexStorage, Probes


class QueryEngine(IndexStorage):
    """A ``FilterIndex``'s query plans over its storage."""

    # the arrays the kernels read, and the ``kernels.Tables`` holding them (``_kernel_tables``; not pickled)
    _tables_arrays: tuple = ()
    _tables: object = None

    def _kernel_tables(self) -> object:
        """The arrays the kernels' questions read, current (strings re-encoded, buckets laid out),
        as one ``kernels.Tables``, made again when the table has replaced one of them (grown, laid
        out again). Call it after encoding the question: its words may renumber the codes. Gathered
        anew only after a change: gathering them costs as much as a small question's kernel call
        (bench/LOG.md, session 70)."""
        self._reencode_strings()
        if self._stale_buckets:
            self._lay_out_buckets()
        if self._arrays_gathered:
            return self._tables
        arena, rows, residual_lines, buckets, blocks = (self._arena, self._rows, self._residual_lines, self._buckets,
                                                        self._blocks)
        arrays = (self._attribute_of_number, self._interval_of, buckets.lines, buckets.starts, buckets.lengths,
                  *self._columns.views, blocks.starts, arena.slots, arena.lo, arena.hi, arena.bits, blocks.lines,
                  rows.lines, rows.starts, rows.lengths, residual_lines.lines, residual_lines.starts,
                  residual_lines.lengths, self._unsat, self._query_set, self._query_lo, self._query_hi,
                  self._query_bits, self._slot_marks, self._slot_counts, self._slot_flagged, self._owner,
                  self._group, self._group_seen)
        held = self._tables_arrays
        if len(held) != len(arrays) or any(array is not kept for array, kept in zip(arrays, held)):
            self._tables_arrays, self._tables = arrays, kernels.tables_of(*arrays)
        self._arrays_gathered = True
        return self._tables

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_tables_arrays", None)
        state.pop("_tables", None)
        state.pop("_arrays_gathered", None)
        return state

    # ------------------------------------------------------------------ the query engine

    def _probe(self, probes: Probes, test: int, family: str, target: int | None):
        """Slots (in slot order) answering the question, and their re-check flags (1 for OVERLAP's
        single-point overlaps where residual conditions may empty them, and unsatisfiable entries),
        planned and answered in one kernel call (``kernels.ask``).

        ``target`` None: every attribute of an entry must be probed and pass; else every one
        of the ``target`` probed attributes must be an entry's and pass. The work counted is
        the cells of every probed attribute's places: what a counting matcher compares,
        however few cells this index reaches (the cost model charges for the former)."""
        answer, cells = kernels.ask(test, -1 if target is None else target, probes.rows, self._kernel_tables(),
                                    0.0 if target is None else self._row_width())
        self._count(family, cells)
        return answer[0], answer[1]

    def _row_width(self) -> float:
        """The average row's lines (cells) over the slots in use."""
        rows = self._rows
        return (rows.used - rows.garbage) / max(1, self._slots - len(self._free))

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
        if recheck is True:
            rechecked = slots.tolist()
            self.work.residual_checks += len(rechecked)
            kept = [slot for slot in rechecked if exact(slot)]
            return slots if len(kept) == len(rechecked) else np.array(kept, slots.dtype)
        flagged = recheck.nonzero()[0]
        if not len(flagged):
            return slots
        self.work.residual_checks += len(flagged)
        failed = [position for position, slot in zip(flagged.tolist(), slots[flagged].tolist()) if not exact(slot)]
        if not failed:
            return slots
        passed = np.empty(len(slots), np.bool_)
        passed.fill(True)  # (np.ones is a Python function: 0.4 us more)
        passed[failed] = False
        return slots[passed]
