"""The numba kernel of the index's query engine (see protocols/index.py).

All columns live in one arena of parallel arrays (``slots``, ``lo``, ``hi``, ``bits``); a
column is the segment ``[start, start + size)``. ``query`` probes the segments of the query's
attributes, adding 1 to ``counts[slot]`` for every cell that passes, then walks the same cells
again to collect the slots whose count reached their target, resetting every count and flag
it touched: work follows the cells probed, never the table size, and one query is one call
(numba's dispatch costs microseconds per call). Bounds are float64 (strings as
order-preserving codes), unbounded ends -inf/+inf; ``bits`` holds LO_OPEN, HI_OPEN, RESIDUAL.

The inner loops are branch-free (``&``/``|`` on booleans, counts always written): predicate
outcomes are unpredictable, and mispredicted branches cost several times the arithmetic.
"""
from numba import njit

LO_OPEN, HI_OPEN, RESIDUAL = 1, 2, 4
POINT, CONTAINS, WITHIN, OVERLAP = 0, 1, 2, 3


def cell_bits(lo_open: bool, hi_open: bool, residual: bool) -> int:
    """The ``bits`` of a cell (or of a query bound): which ends are open, residual conditions."""
    return lo_open * LO_OPEN | hi_open * HI_OPEN | residual * RESIDUAL


@njit(cache=True, nogil=True)
def _probe(test, counts, flags, slots, lo, hi, bits, start, stop, qlo, qhi, qbits):
    qlo_open = (qbits & LO_OPEN) != 0
    qhi_open = (qbits & HI_OPEN) != 0
    q_residual = (qbits & RESIDUAL) != 0
    if test == POINT:  # the cell's interval contains the value qlo
        for i in range(start, stop):
            lo_open = (bits[i] & LO_OPEN) != 0
            hi_open = (bits[i] & HI_OPEN) != 0
            ok = ((lo[i] < qlo) | ((lo[i] == qlo) & ~lo_open)) & ((hi[i] > qlo) | ((hi[i] == qlo) & ~hi_open))
            counts[slots[i]] += ok
    elif test == CONTAINS:  # the cell's interval contains the query's
        for i in range(start, stop):
            lo_open = (bits[i] & LO_OPEN) != 0
            hi_open = (bits[i] & HI_OPEN) != 0
            ok = ((lo[i] < qlo) | ((lo[i] == qlo) & (~lo_open | qlo_open))) & (
                (hi[i] > qhi) | ((hi[i] == qhi) & (~hi_open | qhi_open)))
            counts[slots[i]] += ok
    elif test == WITHIN:  # the cell's interval lies inside the query's
        for i in range(start, stop):
            lo_open = (bits[i] & LO_OPEN) != 0
            hi_open = (bits[i] & HI_OPEN) != 0
            ok = ((qlo < lo[i]) | ((qlo == lo[i]) & (~qlo_open | lo_open))) & (
                (qhi > hi[i]) | ((qhi == hi[i]) & (~qhi_open | hi_open)))
            counts[slots[i]] += ok
    else:  # overlap; flag single-point overlaps where residual conditions may empty it
        for i in range(start, stop):
            lo_open = (bits[i] & LO_OPEN) != 0
            hi_open = (bits[i] & HI_OPEN) != 0
            below = (hi[i] < qlo) | ((hi[i] == qlo) & (hi_open | qlo_open))
            above = (qhi < lo[i]) | ((qhi == lo[i]) & (qhi_open | lo_open))
            ok = ~below & ~above
            residual = ((bits[i] & RESIDUAL) != 0) | q_residual
            point = max(lo[i], qlo) == min(hi[i], qhi)
            s = slots[i]
            counts[s] += ok
            flags[s] |= ok & residual & point


@njit(cache=True, nogil=True)
def query(counts, flags, slots, lo, hi, bits, n_attrs, starts, sizes, qlo, qhi, qbits, test, fixed_target,
          out_slots, out_flags):
    """Probe, then harvest; returns how many slots were written to ``out_slots``.

    A slot qualifies when its count equals ``n_attrs[slot]`` (or ``fixed_target`` if >= 0).
    For OVERLAP, ``out_flags`` marks single-point overlaps where the cell or the query has
    residual conditions: only those need the scalar oracle.
    """
    for p in range(len(starts)):
        _probe(test, counts, flags, slots, lo, hi, bits, starts[p], starts[p] + sizes[p], qlo[p], qhi[p], qbits[p])
    found = 0
    for p in range(len(starts)):
        for i in range(starts[p], starts[p] + sizes[p]):
            s = slots[i]
            c = counts[s]
            target = fixed_target if fixed_target >= 0 else n_attrs[s]
            out_slots[found] = s
            out_flags[found] = flags[s]
            found += (c == target) & (c > 0)
            counts[s] = 0
            flags[s] = 0
    return found
