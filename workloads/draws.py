"""Python's ``random.Random`` draws of the SIENA vocabulary's periodic publishers, compiled.

The mobile rush hour at the paper's size has millions of publications of up to 19 attributes
each: tens of millions of draws, most of its build time when made one by one in Python. Here
they are taken from the same Mersenne Twister stream (numpy's ``MT19937`` continues from
the ``random.Random``'s state and yields the same 32-bit words) and turned into values by a
numba kernel that consumes the words exactly as CPython's ``random`` does:

- ``random()``: two words, ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``;
- ``getrandbits(k)``, k <= 32: one word shifted right by ``32 - k``;
- ``randint(1, n)``: ``getrandbits(n.bit_length())`` until it is below n, plus 1.

So the workloads are the same values as the loop in Python draws, checked against it in
tests/test_workloads.py, and the ``random.Random`` is left where that loop would leave it.
"""
from __future__ import annotations

import random

import numpy as np
from numba import njit

_WORDS_PER_BLOCK = 1 << 22


@njit(cache=True)
def _uniform(words, pos):
    a = np.int64(words[pos] >> np.uint32(5))
    b = np.int64(words[pos + 1] >> np.uint32(6))
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0), pos + 2


@njit(cache=True)
def _below(words, pos, n, bits):
    """``_randbelow_with_getrandbits(n)``; -1 where the words ran out."""
    while pos < len(words):
        r = np.int64(words[pos] >> np.uint32(32 - bits))
        pos += 1
        if r < n:
            return r, pos
    return -1, pos


@njit(cache=True)
def _publications(words, cumulative, last, values, value_bits, max_attributes, publishers, first, begin, duration,
                  period_min, period_max, publisher_out, t_out, count_out, pair_out):
    """The publishers ``first``, ``first + 1``, ... while their publications fit the outputs
    and their draws the words; an attribute's (word, value) pair is written as
    ``word * values + value index``. Returns (next publisher, words used by the finished
    ones, publications written, pairs written)."""
    total = cumulative[last] + 0.0
    rows = cells = 0
    pos = 0
    count_bits = 0
    while (1 << count_bits) <= max_attributes:
        count_bits += 1
    chosen = np.empty(max_attributes, np.int64)
    for p in range(first, publishers):
        if pos + 4 > len(words):
            return p, pos, rows, cells
        start_pos, start_rows, start_cells = pos, rows, cells
        r, pos = _uniform(words, pos)
        period = period_min + (period_max - period_min) * r
        r, pos = _uniform(words, pos)
        t = begin + period * r
        complete = True
        while t < duration:
            if rows >= len(t_out) or cells + max_attributes > len(pair_out):
                complete = False
                break
            count, pos = _below(words, pos, max_attributes, count_bits)
            if count < 0:
                complete = False
                break
            count += 1
            n = 0
            while n < count:
                if pos + 2 > len(words):
                    break
                r, pos = _uniform(words, pos)
                word = np.searchsorted(cumulative[:last], r * total, side="right")
                seen = False
                for i in range(n):
                    if chosen[i] == word:
                        seen = True
                if not seen:
                    chosen[n] = word
                    n += 1
            if n < count:
                complete = False
                break
            for i in range(count):
                value, pos = _below(words, pos, values, value_bits)
                if value < 0:
                    complete = False
                    break
                pair_out[cells + i] = chosen[i] * values + value
            if not complete:
                break
            publisher_out[rows] = p
            t_out[rows] = t
            count_out[rows] = count
            rows += 1
            cells += count
            t += period
        if not complete:
            return p, start_pos, start_rows, start_cells
    return publishers, pos, rows, cells


def periodic_publications(rng: random.Random, cumulative: list[float], values: int, max_attributes: int,
                          publishers: int, begin: float, duration: float, period_min: float, period_max: float,
                          block: int = _WORDS_PER_BLOCK):
    """The publications of ``publishers`` periodic publishers as this loop in Python draws
    them from ``rng`` (words Zipf-weighted by ``cumulative``, value indices uniform)::

        for p in range(publishers):
            period = rng.uniform(period_min, period_max)
            t = begin + rng.uniform(0, period)
            while t < duration:
                count = rng.randint(1, max_attributes)
                words = distinct bisect(cumulative, rng.random() * total, 0, len(cumulative) - 1), count of them
                value indices = [rng.randrange(values) for each word]
                t += period

    Yields, in that order, chunks of (publisher, t, count) arrays, one row per publication,
    and its (word, value) pairs, ``count`` per row, each ``word * values + value index``;
    ``rng`` continues after them once the last chunk is taken. The kernel reads ``block``
    words at a time (more where one publisher needs more)."""
    version, state, gauss = rng.getstate()
    stream = _stream(state)
    cumulative = np.asarray(cumulative, np.float64)
    words = stream.random_raw(block).astype(np.uint32)
    used = first = 0
    while first < publishers:
        rows = max(1024, len(words) // 24)
        out = (np.empty(rows, np.int32), np.empty(rows, np.float64), np.empty(rows, np.int8),
               np.empty(rows * max_attributes, np.int32))
        following, consumed, written, pairs = _publications(
            words, cumulative, len(cumulative) - 1, values, values.bit_length(), max_attributes, publishers, first,
            begin, duration, period_min, period_max, *out)
        used += consumed
        if written:
            yield out[0][:written], out[1][:written], out[2][:written], out[3][:pairs]
        if following < publishers:
            more = len(words) if following == first and written == 0 else consumed  # one publisher needs more
            words = np.concatenate([words[consumed:], stream.random_raw(more).astype(np.uint32)])
        first = following
    after = _stream(state)
    while used:
        step = min(used, _WORDS_PER_BLOCK)
        after.random_raw(step)
        used -= step
    key, pos = after.state["state"]["key"], after.state["state"]["pos"]
    rng.setstate((version, tuple(int(k) for k in key) + (int(pos),), gauss))


def _stream(state: tuple) -> np.random.MT19937:
    """numpy's Mersenne Twister at ``random.Random``'s ``getstate()[1]``."""
    stream = np.random.MT19937()
    stream.state = {"bit_generator": "MT19937", "state": {"key": np.array(state[:-1], np.uint32), "pos": state[-1]}}
    return stream
