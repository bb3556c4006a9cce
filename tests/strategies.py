"""Hypothesis strategies for filters and publications over small, colliding domains.

Small attribute sets and value pools make matches, covers and intersections frequent, so the
properties exercise the interesting cases rather than trivially disjoint filters.

Every strategy a composite draws from is made once (``_integers``, ``_sampled``) and each
composite strategy once per argument (``functools.cache`` over ``st.composite``): Hypothesis validates each new strategy
object it meets, which cost more than drawing from it (a property test of 3,000 examples spent
three quarters of its time there).
"""
from functools import cache

from hypothesis import strategies as st

from protocols.language import Filter, Predicate, Publication

ATTRS = ["a", "b", "c", "x%y"]
NUMBERS = [-2, 0, 1, 1.5, 2, 3, 10]
WORDS = ["", "a", "ab", "abc", "b", "ba", "bab", "c"]
NUMERIC_OPS = ["<", "<=", "=", ">=", ">", "<>", "isPresent"]
STRING_OPS = ["eq", "neq", "str-lt", "str-le", "str-gt", "str-ge", "str-prefix", "str-postfix",
              "str-contains", "isPresent"]
# attribute -> type, fixed so filters on one attribute agree (as parse_filter demands)
ATTR_TYPES = {"a": "n", "b": "s", "c": "n", "x%y": "s"}


_integers = cache(st.integers)


@cache
def _sampled(values: tuple):
    return st.sampled_from(values)


@cache
@st.composite
def predicates(draw, attr=None):
    attr = attr or draw(_sampled(tuple(ATTRS)))
    if ATTR_TYPES[attr] == "n":
        return Predicate(attr, draw(_sampled(tuple(NUMERIC_OPS))), draw(_sampled(tuple(NUMBERS))))
    return Predicate(attr, draw(_sampled(tuple(STRING_OPS))), draw(_sampled(tuple(WORDS))))


@cache
@st.composite
def filters(draw, max_predicates=4):
    """A conjunction."""
    n = draw(_integers(1, max_predicates))
    return Filter(tuple(draw(predicates()) for _ in range(n)))


@cache
@st.composite
def any_filters(draw, max_disjuncts=3):
    """A conjunction, or (about one time in three) a disjunction ``F1 || F2 ...``."""
    n = draw(_integers(1, max_disjuncts))
    if n == 1 or draw(_integers(0, 2)):
        return draw(filters())
    return Filter((), tuple(draw(filters(max_predicates=3)) for _ in range(n)))


_PUBLICATION_ATTRS = st.lists(st.sampled_from(ATTRS), min_size=1, max_size=4, unique=True)


@cache
@st.composite
def publications(draw):
    items = []
    for attr in draw(_PUBLICATION_ATTRS):
        pool = NUMBERS + [0.5, 2.5, -1] if ATTR_TYPES[attr] == "n" else WORDS + ["aa", "abd", "bb", "zz"]
        # occasionally a value of the other type, which no predicate on the attribute accepts
        if draw(_integers(0, 9)) == 0:
            pool = WORDS if ATTR_TYPES[attr] == "n" else NUMBERS
        items.append((attr, draw(_sampled(tuple(pool)))))
    return Publication(tuple(items))


WIDE_ATTRS = [f"n{i}" for i in range(12)] + [f"s{i}" for i in range(12)]
ATTR_TYPES.update({attr: attr[0] for attr in WIDE_ATTRS + ["n99"]})  # n: numeric, s: string


_WIDE_MISSING = st.sets(st.sampled_from(WIDE_ATTRS), max_size=4)
_WIDE_ORDERS = st.permutations(WIDE_ATTRS)
_NARROW_ATTRS = st.lists(st.sampled_from(["n0"] * 8 + WIDE_ATTRS + ["n99"]), min_size=1, max_size=2, unique=True)


@cache
@st.composite
def wide_filters(draw):
    """A conjunction over most of 24 attributes, in a shuffled order (an advertisement of a
    wide vocabulary): its row is far wider than a few-attribute question."""
    missing = draw(_WIDE_MISSING)
    attrs = [a for a in draw(_WIDE_ORDERS) if a not in missing]
    return Filter(tuple(draw(predicates(attr)) for attr in attrs))


@cache
@st.composite
def narrow_filters(draw):
    """A conjunction of 1-2 predicates over the wide attributes (or one no entry constrains),
    often one on ``n0`` (see ``hot_filters``)."""
    return Filter(tuple(draw(predicates(attr)) for attr in draw(_NARROW_ATTRS)))


@cache
def hot_filters():
    """One predicate on ``n0``: many of them make its column long and the table's rows short
    on average, so questions about ``n0`` and another attribute verify candidates' rows."""
    return predicates("n0").map(lambda p: Filter((p,)))
