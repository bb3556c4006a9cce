"""The numba kernel of the index's query engine (see protocols/index.py).

Column cells live in an arena of parallel arrays (``slots``, ``lo``, ``hi``, ``bits``), one
segment ``[start, start + size)`` per column; an entry's own cells are the lines
``row_start[slot]`` to ``row_start[slot] + row_len[slot]`` of ``rows``, each
(lo, hi, attribute id * 8 + bits). Bounds are float64 (strings as order-preserving codes),
unbounded ends -inf/+inf; ``bits`` holds LO_OPEN, HI_OPEN, RESIDUAL.

``ask`` plans which places and column segments a question probes, probes them for
candidates and verifies each candidate against its row, all in one call (numba's dispatch
costs microseconds per call), so work follows the candidates, not the table. Rows are in
attribute order: a query-side question looks its few attributes up in a wide row by
bisection. Where the rows are so wide that reading the query attributes' whole columns costs
less than visiting the candidates' rows, it counts each entry's passing cells instead
(``_counted``). Two kinds of question:
- entry-side (every attribute of the entry must be one of the query's and pass: matching,
  covering, intersected-by): the probed segments are access cells, one per entry;
- query-side (every attribute of the query must be one of the entry's and pass: covered-by,
  intersecting): the probed segments are all cells of one query attribute.
Each entry sits at most once in the probed segments, so no entry is reported twice.

``match`` answers a publication in full: besides intervals it checks the entries' residual
lines (excluded numbers, and string conditions: postfixes, substrings, excluded words, whose truth
for this publication the caller decided once per distinct condition), and it groups the entries by a
per-slot ``group`` (a routing table's last hop): the distinct non-negative groups other than
``exclude``, and the entries of group -1 (local subscribers).
"""
import os

import numpy as np
from numba import njit, types
from numba.core.dispatcher import Dispatcher
from numba.experimental import structref

LO_OPEN, HI_OPEN, RESIDUAL = 1, 2, 4
POINT, CONTAINS, WITHIN, OVERLAP = 0, 1, 2, 3
BLOCK = 64  # cells per summary of a sorted column
EXCLUDED, CONDITION = 0, 1  # kinds of residual line: (attribute id, kind, number or condition id)


def cell_bits(lo_open: bool, hi_open: bool, residual: bool) -> int:
    """The ``bits`` of a cell (or of a query bound): which ends are open, residual conditions."""
    return lo_open * LO_OPEN | hi_open * HI_OPEN | residual * RESIDUAL


@njit(cache=True, nogil=True, inline="always")
def _passes(test, lo, hi, bits, qlo, qhi, qbits):
    """Whether a cell passes the test against a query bound, and (OVERLAP) whether the
    overlap is a single point where residual conditions may empty it."""
    lo_open = (bits & LO_OPEN) != 0
    hi_open = (bits & HI_OPEN) != 0
    qlo_open = (qbits & LO_OPEN) != 0
    qhi_open = (qbits & HI_OPEN) != 0
    if test == POINT or test == CONTAINS:  # the cell's interval contains the query's
        ok = (lo < qlo or (lo == qlo and (not lo_open or qlo_open))) and (
            hi > qhi or (hi == qhi and (not hi_open or qhi_open)))
        return ok, False
    if test == WITHIN:  # the cell's interval lies inside the query's
        ok = (qlo < lo or (qlo == lo and (not qlo_open or lo_open))) and (
            qhi > hi or (qhi == hi and (not qhi_open or hi_open)))
        return ok, False
    below = hi < qlo or (hi == qlo and (hi_open or qlo_open))
    above = qhi < lo or (qhi == lo and (qhi_open or lo_open))
    ok = not below and not above
    residual = (bits & RESIDUAL) != 0 or (qbits & RESIDUAL) != 0
    return ok, ok and residual and max(lo, qlo) == min(hi, qhi)


@njit(cache=True, nogil=True, inline="always")
def _verify(test, entry_side, row, query_set, query_lo, query_hi, query_bits, n_query):
    """Whether the entry with cells ``row`` answers the question, and its single-point flag."""
    passed = 0
    flag = False
    for j in range(len(row)):
        code = int(row[j, 2])
        a = code >> 3
        if not query_set[a]:
            if entry_side:
                return False, False
            continue
        ok, point = _passes(test, row[j, 0], row[j, 1], code & 7, query_lo[a], query_hi[a], query_bits[a])
        if not ok:
            return False, False
        passed += 1
        flag |= point
    return entry_side or passed == n_query, flag


@njit(cache=True, nogil=True, inline="always")
def _first_at_least(lines, column, first, end, value):
    """The first of ``lines[first:end]`` whose ``column`` is at least ``value`` (they are in
    that column's order), or ``end``."""
    while first < end:
        middle = (first + end) // 2
        if lines[middle, column] < value:
            first = middle + 1
        else:
            end = middle
    return first


@njit(cache=True, nogil=True, inline="always")
def _verify_sparse(test, row, bounds):
    """``_verify`` of a query-side question by looking up each query attribute's cell in the
    row (rows are in attribute order) instead of reading the whole row: for wide entries (an
    advertisement of a thousand attributes) asked about a few."""
    flag = False
    for k in range(len(bounds)):
        code = int(bounds[k, 0]) * 8
        first = _first_at_least(row, 2, 0, len(row), code)
        if first == len(row) or int(row[first, 2]) >> 3 != code >> 3:
            return False, False
        ok, point = _passes(test, row[first, 0], row[first, 1], int(row[first, 2]) & 7,
                            bounds[k, 1], bounds[k, 2], int(bounds[k, 3]))
        if not ok:
            return False, False
        flag |= point
    return True, flag


@njit(cache=True, nogil=True, inline="always")
def _into_slot_order(out_slots, count, marks):
    """Order the first ``count`` (distinct) slots of ``out_slots``: by a sweep over ``marks``
    (scratch per slot, all zero between calls) when they are many of the table's, else by
    sorting them (a sort of most of a big table would cost more than the sweep)."""
    if 16 * count > len(marks):
        first, last = len(marks), 0
        for c in range(count):
            s = out_slots[c]
            marks[s] = 1
            first, last = min(first, s), max(last, s)
        c = 0
        for s in range(first, last + 1):
            if marks[s]:
                marks[s] = 0
                out_slots[c] = s
                c += 1
    elif count > 1:
        out_slots[:count] = np.sort(out_slots[:count])


@njit(cache=True, nogil=True, inline="always")
def _load_bounds(bounds, query_set, query_lo, query_hi, query_bits):
    """Set the scratch arrays, indexed by attribute id, to the query's ``bounds``."""
    for k in range(len(bounds)):
        a = int(bounds[k, 0])
        query_set[a] = 1
        query_lo[a], query_hi[a], query_bits[a] = bounds[k, 1], bounds[k, 2], int(bounds[k, 3])


@njit(cache=True, nogil=True, inline="always")
def _clear_bounds(bounds, query_set):
    for k in range(len(bounds)):
        query_set[int(bounds[k, 0])] = 0


@njit(cache=True, nogil=True, inline="always")
def _report(test, slots, lo, hi, bits, first, end, start, block0, blocks, seg_lo, seg_hi, seg_bits, out_slots, n):
    """Append to ``out_slots`` (from ``n``) the live slots of cells ``first`` to ``end`` of a
    sorted column (cells from ``start``, block summaries from row ``block0``) that pass.
    A passing cell's ``hi`` is at most the query's hi (WITHIN), at least its hi (CONTAINS)
    or at least its lo (OVERLAP): a block whose least or greatest ``hi`` rules that out is
    skipped. Returns the new count."""
    if test == WITHIN:
        summary, bound, sign = 1, seg_hi, -1.0  # skip when the least hi > bound
    else:
        summary, bound, sign = 0, seg_lo if test == OVERLAP else seg_hi, 1.0  # when the greatest hi < bound
    k = (first - start) // BLOCK
    while start + k * BLOCK < end:
        if sign * blocks[block0 + k, summary] >= sign * bound:
            for i in range(max(first, start + k * BLOCK), min(end, start + (k + 1) * BLOCK)):
                if slots[i] >= 0:
                    ok, _ = _passes(test, lo[i], hi[i], bits[i], seg_lo, seg_hi, seg_bits)
                    if ok:
                        out_slots[n] = slots[i]
                        n += 1
        k += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _candidates(test, slots, lo, hi, bits, segments, blocks, marks, out_slots):
    """Write to ``out_slots``, in slot order, the slots whose probed cell passes its segment's
    bound; returns how many. Their rows are verified afterwards, in that order: rows lie in
    slot order, so a table the caches lost is read ahead instead of at random.

    A segment's first ``sorted`` cells are ordered by ``lo`` (dead cells among them have slot
    -1) with the greatest and least ``hi`` of every ``BLOCK`` of them in ``blocks`` (from row
    ``block0``): a bisection by ``lo`` bounds the cells that can pass, and the summaries skip
    blocks none of whose cells can. The cells after them are tested one by one."""
    candidates = 0
    for p in range(len(segments)):
        start, size = int(segments[p, 0]), int(segments[p, 1])
        seg_lo, seg_hi, seg_bits = segments[p, 2], segments[p, 3], int(segments[p, 4])
        ordered = int(segments[p, 5])
        for i in range(start + ordered, start + size):
            ok, _ = _passes(test, lo[i], hi[i], bits[i], seg_lo, seg_hi, seg_bits)
            if ok:
                out_slots[candidates] = slots[i]
                candidates += 1
        if ordered:
            keys = lo[start : start + ordered]
            if test == WITHIN:  # lo >= the query's lo, hi <= its hi
                first, end = start + np.searchsorted(keys, seg_lo, "left"), start + ordered
            else:  # lo <= the query's lo (CONTAINS) or hi (OVERLAP), hi >= its hi (CONTAINS) or lo
                first, end = start, start + np.searchsorted(keys, seg_lo if test != OVERLAP else seg_hi, "right")
            candidates = _report(test, slots, lo, hi, bits, first, end, start, int(segments[p, 6]), blocks,
                                 seg_lo, seg_hi, seg_bits, out_slots, candidates)
    _into_slot_order(out_slots, candidates, marks)  # unsorted cells keep no order (removal moves the last)
    return candidates


@njit(cache=True, nogil=True, inline="always")
def _first_above(lines, column, first, end, value):
    """The first of ``lines[first:end]`` whose ``column`` is above ``value``, or ``end``."""
    while first < end:
        middle = (first + end) // 2
        if lines[middle, column] <= value:
            first = middle + 1
        else:
            end = middle
    return first


@njit(cache=True, nogil=True, inline="always")
def _attribute_id(attribute_of_number, number):
    """The table's id of the vocabulary's attribute ``number`` (-1: the table has none)."""
    return attribute_of_number[number] if number < len(attribute_of_number) else -1


@njit(cache=True, nogil=True, inline="always")
def _bucket_line(buckets, start, end, code):
    """The line of ``buckets[start:end]`` (ordered by code) whose value has ``code``, or -1."""
    b = _first_at_least(buckets, 0, start, end, code)
    return b if b < end and buckets[b, 0] == code else -1


@njit(cache=True, nogil=True, inline="always")
def _attribute_cells(a, interval_of, buckets, bucket_start, bucket_len, place_size):
    """The cells of attribute id ``a`` in all its places."""
    cells = place_size[interval_of[a]]
    for b in range(bucket_start[a], bucket_start[a] + bucket_len[a]):
        cells += place_size[int(buckets[b, 1])]
    return cells


@njit(cache=True, nogil=True, inline="always")
def _probed_places(test, probes, attribute_of_number, interval_of, buckets, bucket_start, bucket_len, place_size,
                   rank):
    """The places a question's probes scan. ``probes`` rows are (the vocabulary's attribute number,
    lo, hi, bits, whether it is a point) per attribute of the query. Returns per probe: its
    attribute's id here (-1: the table has none); its non-empty places, ``places[first[k] :
    first[k + 1]]``: the interval place and the buckets whose value can pass (only the point's, for
    a point or a CONTAINS question); their cells; and (``rank``: for a query-side question, which
    ranks its attributes) whether the point's bucket holds half of its attribute's cells or more
    (a value nearly every entry shares). ``buckets`` as in ``_known_points``."""
    n = len(probes)
    ids = np.full(n, -1, np.int64)
    room = 0
    for k in range(n):
        ids[k] = _attribute_id(attribute_of_number, int(probes[k, 0]))
        if ids[k] >= 0:
            room += 1 + bucket_len[ids[k]]
    places = np.empty(room, np.int64)
    first = np.zeros(n + 1, np.int64)
    cells = np.zeros(n, np.int64)
    shared = np.zeros(n, np.bool_)
    p = 0
    for k in range(n):
        first[k] = p
        a = ids[k]
        if a < 0:
            continue
        interval = interval_of[a]
        if place_size[interval]:
            places[p] = interval
            p += 1
            cells[k] += place_size[interval]
        start, end = bucket_start[a], bucket_start[a] + bucket_len[a]
        qlo, qhi, qbits, point = probes[k, 1], probes[k, 2], int(probes[k, 3]), probes[k, 4] != 0
        if point:
            b = _bucket_line(buckets, start, end, qlo)
            start, end = (b, b + 1) if b >= 0 else (start, start)
        elif test == CONTAINS:  # no bucket's single value contains an interval
            continue
        else:
            if qbits & LO_OPEN:
                start = _first_above(buckets, 0, start, end, qlo)
            else:
                start = _first_at_least(buckets, 0, start, end, qlo)
            if qbits & HI_OPEN:
                end = _first_at_least(buckets, 0, start, end, qhi)
            else:
                end = _first_above(buckets, 0, start, end, qhi)
        for b in range(start, end):
            place = int(buckets[b, 1])
            if place_size[place]:
                places[p] = place
                p += 1
                cells[k] += place_size[place]
                if point and rank:
                    shared[k] = 2 * place_size[place] >= _attribute_cells(a, interval_of, buckets, bucket_start,
                                                                          bucket_len, place_size)
    first[n] = p
    return ids, places, first, cells, shared


@njit(cache=True, nogil=True, inline="always")
def _add_segments(segments, n, place, both, lo, hi, bits, column_start, column_size, column_sorted, column_blocks,
                  block_start):
    """Append to ``segments`` (from row ``n``) the non-empty columns of ``place`` probed with a
    query bound (its access column, or ``both``: and its other one), as
    (start, size, lo, hi, bits, sorted, block0) (see ``_candidates``); returns the new count."""
    for column in range(2 * place, 2 * place + 1 + both):
        size = column_size[column]
        if size:
            ordered = column_sorted[column]
            segments[n, 0], segments[n, 1], segments[n, 5] = column_start[column], size, ordered
            segments[n, 2], segments[n, 3], segments[n, 4] = lo, hi, bits
            segments[n, 6] = block_start[column_blocks[column]] if ordered else 0
            n += 1
    return n


@njit(cache=True, nogil=True)
def _ask(test, target, probes, attribute_of_number, interval_of, buckets, bucket_start, bucket_len,
         place_size, column_start, column_size, column_sorted, column_blocks, block_start,
         slots, lo, hi, bits, blocks, rows, row_start, row_len, unsat, row_width,
         query_set, query_lo, query_hi, query_bits, marks, counts, flagged):
    """The entries answering a question other than matching, in slot order, planned here from
    the query's ``probes`` (see ``_probed_places``) and the table's places and columns.

    ``target`` -1: an entry-side question (every attribute of an entry must be probed and pass):
    the candidates are the access cells in every probed place. Else a query-side one: every one
    of the ``target`` attributes of the query must be an entry's and pass, so a query attribute
    the table lacks answers nothing; the candidates are the cells of the query's least common
    attribute (a value nearly every entry shares counting as the most common), unless reading
    every query attribute's cells costs less than visiting the candidates' rows of ``row_width``
    lines on average (by bisection where that reads fewer): then every one is probed and
    counted (``_counted``).

    Returns (the answers' slots and their flags as ``_verified`` sets them, as the two rows of one
    array, and the cells of every probed place: the work a counting matcher does, however few cells
    this reaches). One array, as every array returned costs its boxing. ``marks``, ``counts`` and
    ``flagged`` (per slot) and ``query_set`` (per attribute id) are scratch, all zero between calls.
    """
    ids, places, first, cells, shared = _probed_places(test, probes, attribute_of_number, interval_of, buckets,
                                                       bucket_start, bucket_len, place_size, target >= 0)
    known = 0
    fewest = -1
    for k in range(len(probes)):
        if ids[k] >= 0:
            known += 1
            if fewest < 0 or shared[k] < shared[fewest] or (shared[k] == shared[fewest] and cells[k] < cells[fewest]):
                fewest = k
    bounds = np.empty((known, 4))
    j = 0
    for k in range(len(probes)):
        if ids[k] >= 0:
            bounds[j, 0], bounds[j, 1], bounds[j, 2], bounds[j, 3] = ids[k], probes[k, 1], probes[k, 2], probes[k, 3]
            j += 1
    entry_side = target < 0
    counting = False
    probed = np.zeros(len(probes), np.bool_)  # the probes whose places give segments
    if entry_side:
        probed[:] = ids >= 0
    elif known and known == len(probes):
        verify_cost = cells[fewest] * min(row_width, known * np.log2(2 + row_width))
        counting = cells.sum() < verify_cost
        if counting:
            probed[:] = True
        else:
            probed[fewest] = True
    segments = np.empty((2 * len(places), 7))
    n = 0
    for k in range(len(probes)):
        if probed[k]:
            for p in range(first[k], first[k + 1]):
                n = _add_segments(segments, n, places[p], not entry_side, probes[k, 1], probes[k, 2],
                                  int(probes[k, 3]), column_start, column_size, column_sorted, column_blocks,
                                  block_start)
    segments = segments[:n]
    room = cells[fewest] if counting else int(segments[:, 1].sum())
    out = np.empty((2, room), np.int64)
    if room == 0:
        return out, cells.sum()
    if counting:
        found = _counted(test, slots, lo, hi, bits, segments, target, unsat, counts, flagged, marks, out[0], out[1])
    else:
        found = _verified(test, entry_side, slots, lo, hi, bits, segments, blocks, rows, row_start, row_len, unsat,
                          bounds, query_set, query_lo, query_hi, query_bits, marks, out[0], out[1])
    return out[:, :found], cells.sum()


@njit(cache=True, nogil=True, inline="always")
def _verified(test, entry_side, slots, lo, hi, bits, segments, blocks, rows, row_start, row_len, unsat, bounds,
              query_set, query_lo, query_hi, query_bits, marks, out_slots, out_flags):
    """Probe the segments, verify candidates; returns how many slots were written to ``out_slots``,
    in slot order.

    ``segments`` rows are (start, size, lo, hi, bits, sorted, block0) of a probed column
    segment, the query bound it is tested against and its sorted cells (see ``_candidates``);
    ``bounds`` rows are (attribute id, lo, hi, bits) of the query's attributes; ``query_*``
    are scratch arrays indexed by attribute id (``query_set`` all zero between calls). For
    OVERLAP, ``out_flags`` marks single-point overlaps where a cell or the query has residual
    conditions, and unsatisfiable entries (``unsat``): only those need the scalar oracle.
    """
    _load_bounds(bounds, query_set, query_lo, query_hi, query_bits)
    candidates = _candidates(test, slots, lo, hi, bits, segments, blocks, marks, out_slots)
    found = 0
    for c in range(candidates):
        s = out_slots[c]
        row = rows[row_start[s] : row_start[s] + row_len[s]]
        if not entry_side and len(row) > 8 * len(bounds):
            ok, flag = _verify_sparse(test, row, bounds)
        else:
            ok, flag = _verify(test, entry_side, row, query_set, query_lo, query_hi, query_bits, len(bounds))
        if ok:
            out_slots[found] = s
            out_flags[found] = flag or (test == OVERLAP and unsat[s])
            found += 1
    _clear_bounds(bounds, query_set)
    return found


@njit(cache=True, nogil=True, inline="always")
def _counted(test, slots, lo, hi, bits, segments, n_query, unsat, counts, flagged, marks, out_slots, out_flags):
    """A query-side question answered by counting instead of verifying rows (for tables of
    wide entries, whose rows are long and far apart): ``segments`` hold every probed column
    segment of every query attribute, and an entry answers when its cells pass in
    ``n_query`` of them (an entry has at most one cell per attribute). Returns how many slots
    were written to ``out_slots``, in slot order, with ``out_flags`` as in ``_verified``.
    ``counts`` and ``flagged`` (per slot) are scratch, all zero between calls."""
    for p in range(len(segments)):
        start, size = int(segments[p, 0]), int(segments[p, 1])
        seg_lo, seg_hi, seg_bits = segments[p, 2], segments[p, 3], int(segments[p, 4])
        for i in range(start, start + size):
            ok, point = _passes(test, lo[i], hi[i], bits[i], seg_lo, seg_hi, seg_bits)
            s = slots[i]
            if ok and s >= 0:  # (slot -1: a dead cell of a sorted column)
                counts[s] += 1
                if point:
                    flagged[s] = 1
    found = 0
    for p in range(len(segments)):
        start, size = int(segments[p, 0]), int(segments[p, 1])
        for i in range(start, start + size):
            s = slots[i]
            if s >= 0 and counts[s]:  # a slot's first cell here: answer or not, its scratch is cleared
                if counts[s] == n_query:
                    out_slots[found] = s
                    found += 1
                else:
                    flagged[s] = 0
                counts[s] = 0
    _into_slot_order(out_slots, found, marks)
    for f in range(found):  # the answers' flags, read (and cleared) once they are in slot order
        s = out_slots[f]
        out_flags[f] = flagged[s] != 0 or (test == OVERLAP and unsat[s])
        flagged[s] = 0
    return found


@njit(cache=True, nogil=True, inline="always")
def _known_points(points, attribute_of_number, interval_of, buckets, bucket_start, bucket_len):
    """Of a publication's ``points``, rows (the vocabulary's attribute number, code), those of the
    attributes the table knows, as ``_match_plan`` takes them: (attribute id, code, interval
    place, the place of the value's bucket or -1). ``attribute_of_number`` gives an attribute
    number's id in the table (-1: none), ``interval_of`` an id's interval place, and ``buckets``
    from line ``bucket_start[id]`` on its ``bucket_len[id]`` buckets as (code, place), ordered
    by code."""
    known = np.empty((len(points), 4))
    k = 0
    for p in range(len(points)):
        a = _attribute_id(attribute_of_number, int(points[p, 0]))
        if a < 0:
            continue
        code = points[p, 1]
        b = _bucket_line(buckets, bucket_start[a], bucket_start[a] + bucket_len[a], code)
        known[k, 0], known[k, 1], known[k, 2] = a, code, interval_of[a]
        known[k, 3] = buckets[b, 1] if b >= 0 else -1.0
        k += 1
    return known[:k]


@njit(cache=True, nogil=True, inline="always")
def _match_plan(points, place_size, column_start, column_size, column_sorted, column_blocks, block_start):
    """A publication's probes: ``points`` rows are (attribute id, value's code, interval place,
    bucket place or -1) of its attributes the table knows (see ``index_storage._Columns``). Returns
    the access columns' segments (rows as ``_add_segments`` makes them), the bounds (one point per
    attribute), how many cells the probed places hold (the work counted) and how many
    candidates the segments can give."""
    segments = np.empty((2 * len(points), 7))
    bounds = np.empty((len(points), 4))
    n, cells = 0, 0
    for k in range(len(points)):
        code = points[k, 1]
        bounds[k, 0], bounds[k, 1], bounds[k, 2], bounds[k, 3] = points[k, 0], code, code, 0.0
        for j in (2, 3):
            place = int(points[k, j])
            if place < 0 or not place_size[place]:
                continue
            cells += place_size[place]
            n = _add_segments(segments, n, place, False, code, code, 0, column_start, column_size, column_sorted,
                              column_blocks, block_start)
    return segments[:n], bounds, cells, int(segments[:n, 1].sum())


@njit(cache=True, nogil=True)
def _match(publication_points, attribute_of_number, interval_of, buckets, bucket_start, bucket_len,
           place_size, column_start, column_size, column_sorted, column_blocks, block_start,
           slots, lo, hi, bits, blocks, rows, row_start, row_len, residuals, residual_start, residual_len,
           condition_true, query_set, query_lo, query_hi, query_bits, marks, owner, group, exclude, group_seen):
    """The entries matching a publication, in slot order: its probes are planned here from its
    points (``_known_points``) and the table's places and columns (``_match_plan``). A disjunctive entry's
    disjuncts have slots of their own, ``owner`` maps them to the entry's slot (every other
    slot to itself): an entry matches once, whichever disjuncts do.

    Returns one array and where its parts are: (``out``, ``room``, ``found``, ``local``, ``groups``,
    residual checks, cells of the probed places), the matching entries' slots ``out[:found]``, the
    local ones (group -1) ``out[room : room + local]`` and their distinct groups ascending but
    ``exclude`` ``out[2 * room : 2 * room + groups]`` (every array returned costs its boxing). A residual check is
    an entry whose intervals hold and that has residual lines (what a scalar re-check costs).
    ``group_seen`` (per group) and ``marks`` (per slot) are scratch, all zero between calls.
    """
    points = _known_points(publication_points, attribute_of_number, interval_of, buckets, bucket_start, bucket_len)
    segments, bounds, cells, candidates = _match_plan(points, place_size, column_start, column_size,
                                                      column_sorted, column_blocks, block_start)
    room = candidates
    out = np.empty(2 * room + len(group_seen), np.int64)
    out_slots, out_local, out_groups = out[:room], out[room : 2 * room], out[2 * room :]
    if not candidates:
        return out, room, 0, 0, 0, 0, cells
    _load_bounds(bounds, query_set, query_lo, query_hi, query_bits)
    candidates = _candidates(POINT, slots, lo, hi, bits, segments, blocks, marks, out_slots)
    found = 0
    checks = 0
    merged = False
    for c in range(candidates):
        s = out_slots[c]
        row = rows[row_start[s] : row_start[s] + row_len[s]]
        ok, _ = _verify(POINT, True, row, query_set, query_lo, query_hi, query_bits, len(bounds))
        if not ok:
            continue
        if residual_len[s]:
            checks += 1
            r = residual_start[s]
            for j in range(r, r + residual_len[s]):
                kind = int(residuals[j, 1])
                if kind == EXCLUDED:
                    ok = query_lo[int(residuals[j, 0])] != residuals[j, 2]
                else:
                    ok = condition_true[int(residuals[j, 2])] != 0
                if not ok:
                    break
            if not ok:
                continue
        entry = owner[s]
        if entry != s:
            if marks[entry]:
                continue
            marks[entry] = 1
            merged = True
        out_slots[found] = entry
        found += 1
    _clear_bounds(bounds, query_set)
    if merged:
        for f in range(found):
            marks[out_slots[f]] = 0
        out_slots[:found] = np.sort(out_slots[:found])
    local = 0
    for f in range(found):
        g = group[out_slots[f]]
        if g == -1:
            out_local[local] = out_slots[f]
            local += 1
        elif g >= 0 and g != exclude:
            group_seen[g] = 1
    groups = 0
    for g in range(len(group_seen)):
        if group_seen[g]:
            group_seen[g] = 0
            out_groups[groups] = g
            groups += 1
    return out, room, found, local, groups, checks, cells


@structref.register
class _TablesType(types.StructRef):
    pass


class Tables(structref.StructRefProxy):
    """A table's arrays that ``ask`` and ``match`` read, as one argument: numba's call costs
    about 690 instructions per array argument, most of a small question's call (bench/LOG.md,
    session 69). It holds the arrays themselves (their contents change in place), so a table
    makes a new one when it replaces one of them (``tables_of``)."""

    __slots__ = ()


structref.define_boxing(_TablesType, Tables)
_I64, _I32, _U8, _F64 = types.int64[::1], types.int32[::1], types.uint8[::1], types.float64[::1]
_LINES = types.float64[:, ::1]
_TABLES_FIELDS = [
    ("attribute_of_number", _I64), ("interval_of", _I64), ("buckets", _LINES), ("bucket_start", _I64),
    ("bucket_len", _I64), ("place_size", _I64), ("column_start", _I64), ("column_size", _I64),
    ("column_sorted", _I64), ("column_blocks", _I64), ("block_start", _I64), ("slots", _I32), ("lo", _F64),
    ("hi", _F64), ("bits", _U8), ("blocks", _LINES), ("rows", _LINES), ("row_start", _I64), ("row_len", _I64),
    ("residuals", _LINES), ("residual_start", _I64), ("residual_len", _I64), ("unsat", types.bool_[::1]),
    ("query_set", _U8), ("query_lo", _F64), ("query_hi", _F64), ("query_bits", _U8), ("marks", _U8),
    ("counts", _I32), ("flagged", _U8), ("owner", _I64), ("group", _I32), ("group_seen", _U8),
]
_TABLES = _TablesType(_TABLES_FIELDS)


@njit(cache=True, nogil=True)
def tables_of(attribute_of_number, interval_of, buckets, bucket_start, bucket_len, place_size, column_start,
              column_size, column_sorted, column_blocks, block_start, slots, lo, hi, bits, blocks, rows, row_start,
              row_len, residuals, residual_start, residual_len, unsat, query_set, query_lo, query_hi, query_bits,
              marks, counts, flagged, owner, group, group_seen):
    """The ``Tables`` of these arrays (in the order of the fields above)."""
    t = structref.new(_TABLES)
    t.attribute_of_number, t.interval_of, t.buckets = attribute_of_number, interval_of, buckets
    t.bucket_start, t.bucket_len, t.place_size = bucket_start, bucket_len, place_size
    t.column_start, t.column_size, t.column_sorted = column_start, column_size, column_sorted
    t.column_blocks, t.block_start, t.slots, t.lo, t.hi, t.bits = column_blocks, block_start, slots, lo, hi, bits
    t.blocks, t.rows, t.row_start, t.row_len = blocks, rows, row_start, row_len
    t.residuals, t.residual_start, t.residual_len, t.unsat = residuals, residual_start, residual_len, unsat
    t.query_set, t.query_lo, t.query_hi, t.query_bits = query_set, query_lo, query_hi, query_bits
    t.marks, t.counts, t.flagged, t.owner, t.group, t.group_seen = marks, counts, flagged, owner, group, group_seen
    return t


@njit(cache=True, nogil=True)
def ask(test, target, probes, t, row_width):
    """``_ask`` of a table's ``Tables``."""
    return _ask(test, target, probes, t.attribute_of_number, t.interval_of, t.buckets, t.bucket_start,
                t.bucket_len, t.place_size, t.column_start, t.column_size, t.column_sorted, t.column_blocks,
                t.block_start, t.slots, t.lo, t.hi, t.bits, t.blocks, t.rows, t.row_start, t.row_len, t.unsat,
                row_width, t.query_set, t.query_lo, t.query_hi, t.query_bits, t.marks, t.counts, t.flagged)


@njit(cache=True, nogil=True)
def match(publication_points, t, condition_true, exclude):
    """``_match`` of a table's ``Tables``, for a publication whose string conditions are
    ``condition_true``."""
    return _match(publication_points, t.attribute_of_number, t.interval_of, t.buckets, t.bucket_start,
                  t.bucket_len, t.place_size, t.column_start, t.column_size, t.column_sorted, t.column_blocks,
                  t.block_start, t.slots, t.lo, t.hi, t.bits, t.blocks, t.rows, t.row_start, t.row_len,
                  t.residuals, t.residual_start, t.residual_len, condition_true, t.query_set, t.query_lo,
                  t.query_hi, t.query_bits, t.marks, t.owner, t.group, exclude, t.group_seen)


@njit(cache=True, nogil=True)
def _append_cells(slot, row_columns, first, rows, row_start, column_start, column_capacity, column_size, place_size,
                 slots, lo, hi, bits, line, offsets):
    """Add the cells of ``slot``'s row (``rows`` from line ``row_start``) to their columns
    ``row_columns`` (one per line), from line ``first`` on, and write each one's offset in its
    column to ``offsets``. Returns the line it stopped at: the row's length, or the first line
    whose column is full (the caller gives that column room and calls again from there)."""
    for j in range(first, len(row_columns)):
        column = row_columns[j]
        offset = column_size[column]
        if offset == column_capacity[column]:
            return j
        i = column_start[column] + offset
        slots[i] = slot
        lo[i] = rows[row_start + j, 0]
        hi[i] = rows[row_start + j, 1]
        bits[i] = int(rows[row_start + j, 2]) & 7
        line[i] = j
        column_size[column] = offset + 1
        place_size[column >> 1] += 1
        offsets[j] = offset
    return len(row_columns)


@njit(cache=True, nogil=True)
def _store_row(slot, probes, places, access, attribute_of_number, rows, first, row_columns, column_start,
              column_capacity, column_size, place_size, slots, lo, hi, bits, line, offsets):
    """Write ``slot``'s row at line ``first`` of ``rows`` (room made for it) from its conjunction's
    ``probes`` (``Vocabulary.probes``: attribute number, lo, hi, bits per constraint) and the
    ``places`` of its cells (``access`` the one of its access cell), in attribute order, with each
    line's column in ``row_columns``; then add the cells to their columns (``_append_cells``)."""
    count = len(places)
    ids = np.empty(count, np.int64)
    for j in range(count):
        ids[j] = attribute_of_number[int(probes[j, 0])]
    order = np.argsort(ids)  # (distinct: one constraint per attribute)
    for k in range(count):
        j = order[k]
        place = places[j]
        row_columns[k] = 2 * place + (place != access)
        rows[first + k, 0] = probes[j, 1]
        rows[first + k, 1] = probes[j, 2]
        rows[first + k, 2] = ids[j] * 8 + probes[j, 3]
    return _append_cells(slot, row_columns, 0, rows, first, column_start, column_capacity, column_size, place_size,
                        slots, lo, hi, bits, line, offsets)


@njit(cache=True, nogil=True)
def _remove_cells(slot, row_columns, offsets, offset_start, column_start, column_size, column_sorted, column_dead,
                 place_size, slots, lo, hi, bits, line):
    """Take ``slot``'s cells out of their columns ``row_columns`` (one per line of its row, the
    cells' offsets there from ``offsets[offset_start[slot]]``): a sorted cell dies in place (dead
    until its column is sorted again), another gives its place to its column's last cell."""
    first = offset_start[slot]
    for j in range(len(row_columns)):
        column = row_columns[j]
        offset = offsets[first + j]
        start = column_start[column]
        if offset < column_sorted[column]:
            slots[start + offset] = -1
            column_dead[column] += 1
        else:
            last = column_size[column] - 1
            if offset != last:
                i, k = start + offset, start + last
                slots[i], line[i], lo[i], hi[i], bits[i] = slots[k], line[k], lo[k], hi[k], bits[k]
                offsets[offset_start[slots[i]] + line[i]] = offset
            column_size[column] = last
        place_size[column >> 1] -= 1


@structref.register
class _StorageType(types.StructRef):
    pass


class Storage(structref.StructRefProxy):
    """A table's arrays that ``store_row``, ``append_cells`` and ``remove_cells`` change, as one
    argument, as ``Tables`` is for the questions: a table makes a new one when it replaces one of
    them."""

    __slots__ = ()


structref.define_boxing(_StorageType, Storage)
_STORAGE_FIELDS = [
    ("attribute_of_number", _I64), ("rows", _LINES), ("column_start", _I64), ("column_capacity", _I64),
    ("column_size", _I64), ("column_sorted", _I64), ("column_dead", _I64), ("place_size", _I64), ("slots", _I32),
    ("lo", _F64), ("hi", _F64), ("bits", _U8), ("line", _I32), ("offsets", _I32), ("offset_start", _I64),
]
_STORAGE = _StorageType(_STORAGE_FIELDS)


@njit(cache=True, nogil=True)
def storage_of(attribute_of_number, rows, column_start, column_capacity, column_size, column_sorted, column_dead,
               place_size, slots, lo, hi, bits, line, offsets, offset_start):
    """The ``Storage`` of these arrays (in the order of the fields above)."""
    s = structref.new(_STORAGE)
    s.attribute_of_number, s.rows = attribute_of_number, rows
    s.column_start, s.column_capacity = column_start, column_capacity
    s.column_size, s.column_sorted, s.column_dead, s.place_size = column_size, column_sorted, column_dead, place_size
    s.slots, s.lo, s.hi, s.bits, s.line = slots, lo, hi, bits, line
    s.offsets, s.offset_start = offsets, offset_start
    return s


@njit(cache=True, nogil=True)
def store_row(slot, probes, places, access, first, row_columns, offsets_first, s):
    """``_store_row`` of a table's ``Storage``, the row's cell offsets written from line
    ``offsets_first`` of its offsets."""
    return _store_row(slot, probes, places, access, s.attribute_of_number, s.rows, first, row_columns, s.column_start,
                      s.column_capacity, s.column_size, s.place_size, s.slots, s.lo, s.hi, s.bits, s.line,
                      s.offsets[offsets_first:])


@njit(cache=True, nogil=True)
def append_cells(slot, row_columns, first, row_start, offsets_first, s):
    """``_append_cells`` of a table's ``Storage`` (as ``store_row``)."""
    return _append_cells(slot, row_columns, first, s.rows, row_start, s.column_start, s.column_capacity,
                         s.column_size, s.place_size, s.slots, s.lo, s.hi, s.bits, s.line, s.offsets[offsets_first:])


@njit(cache=True, nogil=True)
def remove_cells(slot, row_columns, s):
    """``_remove_cells`` of a table's ``Storage``."""
    _remove_cells(slot, row_columns, s.offsets, s.offset_start, s.column_start, s.column_size, s.column_sorted,
                  s.column_dead, s.place_size, s.slots, s.lo, s.hi, s.bits, s.line)


@njit(cache=True, nogil=True)
def count_toward(slots, toward, routed, group, hop, delta, out):
    """Add ``delta`` (+1: an advertisement from neighbour ``hop`` arrived, -1: withdrawn) to
    ``toward[slot, hop]`` of each slot; write to ``out`` the slots whose routing toward ``hop``
    changes (+1: not routed there and not from there; -1: routed there and now uncounted);
    returns how many."""
    changed = 0
    for s in slots:
        count = toward[s, hop] + delta
        toward[s, hop] = count
        if delta > 0:
            if not routed[s, hop] and group[s] != hop:
                out[changed] = s
                changed += 1
        elif count == 0 and routed[s, hop]:
            out[changed] = s
            changed += 1
    return changed


@njit(cache=True, nogil=True)
def within_windows(slots, since, until, t, out):
    """Write to ``out`` those of ``slots`` whose window ``[since, until)`` holds ``t``, in
    order; returns how many."""
    inside = 0
    for s in slots:
        if since[s] <= t < until[s]:
            out[inside] = s
            inside += 1
    return inside


@njit(cache=True, nogil=True)
def group_counts(slots, group, counts):
    """``counts[g]``: how many of ``slots`` are in group g >= 0 (``counts`` zeroed by the caller)."""
    for s in slots:
        g = group[s]
        if g >= 0:
            counts[g] += 1


# ---------------------------------------------------------------- the kernels Python calls
#
# Each is called through its compiled entry point for the one set of argument types its callers
# pass, not through numba's dispatcher, which works every call's types out again (``typeof`` of
# each argument and a search of the overloads): 6.6% of the engine benchmark's instructions per
# event (bench/LOG.md, session 72). The entry point does not check the types it is given, so a
# caller passes exactly the declared ones: ints, floats and writable C-contiguous arrays of these
# dtypes and dimensions. With ``PUBSUB_EMU_CHECK_KERNEL_TYPES=1`` they are called through the
# dispatcher instead, and a call with other types is refused (the builds' test runs every reference
# scenario so).

CHECK_TYPES = os.environ.get("PUBSUB_EMU_CHECK_KERNEL_TYPES") == "1"
ENTRIES: dict[str, tuple] = {}  # name -> (kernel, declared argument types)


def _entry(kernel, argument_types: tuple):
    """What the module offers under the kernel's name: ``kernel``'s entry point for
    ``argument_types``, looked up (in numba's cache, or compiled) at its first call, so that
    importing this module stays cheap; with ``CHECK_TYPES``, the kernel with every call's types
    checked. Without numba's compiler (``NUMBA_DISABLE_JIT``), the Python function itself."""
    if not isinstance(kernel, Dispatcher):
        return kernel
    name = kernel.py_func.__name__
    ENTRIES[name] = (kernel, argument_types)
    if CHECK_TYPES:
        return _checked(kernel, argument_types, name)

    def first_call(*args):
        entry = globals()[name] = kernel.compile(argument_types)
        return entry(*args)

    return first_call


def _checked(kernel, argument_types: tuple, name: str):
    """``kernel`` called through numba's dispatcher, which compiles an overload of its own for
    other types than the declared ones: a call that made one is refused, naming the argument."""
    def checked(*args):
        if not kernel.overloads:
            kernel.compile(argument_types)  # (so that the declared overload is the first)
        result = kernel(*args)
        if len(kernel.overloads) > 1:
            other = next(reversed(kernel.overloads))  # (as many types as the declared: the kernel's arity)
            i = next(i for i, (a, b) in enumerate(zip(other, argument_types)) if a != b)
            raise TypeError(f"kernels.{name}: argument {i} is {other[i]}, declared {argument_types[i]}")
        return result

    return checked


_INT, _FLOAT = types.int64, types.float64
ask = _entry(ask, (_INT, _INT, _LINES, _TABLES, _FLOAT))
match = _entry(match, (_LINES, _TABLES, _U8, _INT))
tables_of = _entry(tables_of, tuple(field_type for _, field_type in _TABLES_FIELDS))
storage_of = _entry(storage_of, tuple(field_type for _, field_type in _STORAGE_FIELDS))
store_row = _entry(store_row, (_INT, _LINES, _I64, _INT, _INT, _I32, _INT, _STORAGE))
append_cells = _entry(append_cells, (_INT, _I32, _INT, _INT, _INT, _STORAGE))
remove_cells = _entry(remove_cells, (_INT, _I32, _STORAGE))
count_toward = _entry(count_toward, (_I64, types.int32[:, ::1], types.bool_[:, ::1], _I32, _INT, _INT, _I64))
within_windows = _entry(within_windows, (_I64, _I64, _I64, _INT, _I64))
group_counts = _entry(group_counts, (_I64, _I32, _I32))
