"""The PADRES subscription language and its scalar reference semantics.

Filters (advertisements and subscriptions) are conjunctions of predicates
``[attr,op,value]``, or disjunctions of such conjunctions joined by ``||``; publications
are attribute/value lists ``[attr,value]``, both in PADRES's syntax so existing PADRES
workloads run unchanged. ``matches``, ``covers``, ``conforms`` and ``intersects`` are the
oracle that the vectorised index (protocols/index.py) is held to. Deliberate differences
from PADRES: several predicates may constrain one attribute (ranges), strict bounds are
exact (PADRES rounds ``x>v`` to ``x>=v+1``), and ``isPresent`` is typed by its value
(numeric or string), as PADRES types it.

Every conjunction also has a normal form, one ``Constraint`` per attribute: an interval
(numeric, or lexicographic for strings; a prefix is the interval ``[p, succ(p))``) plus residual
conditions that are not intervals (excluded values, postfixes, substrings). ``covers`` and
``intersects`` are decided on that normal form: exactly for intervals and exclusions, and
safely (``covers`` False, ``intersects`` True) where residual string conditions make the
question hard.

A disjunction ``F1 || F2`` matches (or admits) a publication when one of its disjuncts does;
``covers(G, F)`` holds when every disjunct of F is covered by some disjunct of G (sufficient,
not necessary: a disjunct covered only by several of G's together counts as not covered,
which is safe), and a disjunctive advertisement intersects a disjunctive subscription when
some pair of their disjuncts does.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

Value = float | int | str

NUMERIC_OPS = frozenset({"<", "<=", "=", ">=", ">", "<>"})
STRING_OPS = frozenset(
    {"eq", "neq", "str-lt", "str-le", "str-gt", "str-ge", "str-prefix", "str-postfix", "str-contains"}
)
ANY_OPS = frozenset({"isPresent"})
OPERATORS = NUMERIC_OPS | STRING_OPS | ANY_OPS

NUMERIC, STRING = "n", "s"

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def rebuilt_by_constructor(self):
    """``__reduce__`` of a dataclass with slots whose fields (two or more) are all its
    constructor's, in order (no ``init=False`` field, no ``__post_init__``, not subclassed):
    unpickled by one constructor call, about twice as fast as field by field (checkpoints and
    batches between hosts hold many), and pickled with one tuple of its fields, where the
    default makes a tuple, a dict and another tuple, all of which the pickler keeps until the
    dump ends."""
    cls = type(self)
    fields = _FIELDS_OF.get(cls)
    if fields is None:
        names = getattr(cls, "__mypyc_attrs__", None) or cls.__slots__  # (compiled: see ``attributes_of``)
        fields = _FIELDS_OF[cls] = attrgetter(*names)  # (of one name it would not give a tuple)
    return cls, fields(self)


_FIELDS_OF: dict[type, attrgetter] = {}  # per class: its instances' fields as a tuple


def attributes_of(obj) -> dict:
    """An object's attributes by name (its state, to pickle), whether its class was compiled with
    mypyc (protocols/compiled.py: attributes in no ``__dict__``, named in ``__mypyc_attrs__``) or not."""
    cls = type(obj)
    names = getattr(cls, "__mypyc_attrs__", None)
    if names is None:
        if hasattr(obj, "__dict__"):
            return dict(vars(obj))
        names = [name for base in cls.__mro__ for name in getattr(base, "__slots__", ())]
    return {name: getattr(obj, name) for name in names if name != "__dict__" and hasattr(obj, name)}


def set_attributes(obj, state: dict | tuple) -> None:
    """``obj``'s attributes from ``state``: ``attributes_of``'s, a ``__dict__`` pickled, or what Python
    pickles of an object with slots, (its ``__dict__`` or None, {slot: value})."""
    if isinstance(state, tuple):
        state = {**(state[0] or {}), **state[1]}
    for name, value in state.items():
        setattr(obj, name, value)


@dataclass(frozen=True, slots=True)
class Predicate:
    attr: str
    op: str
    value: Value

    __reduce__ = rebuilt_by_constructor

    @property
    def type(self) -> str:
        return STRING if isinstance(self.value, str) else NUMERIC

    def __str__(self) -> str:
        return f"[{self.attr},{self.op},{_format_value(self.value)}]"


@dataclass(frozen=True)
class Filter:
    """An advertisement or subscription: a conjunction of predicates, or (``alternatives``
    given, ``predicates`` empty) a disjunction of at least two conjunctions."""

    predicates: tuple[Predicate, ...]
    alternatives: tuple["Filter", ...] = ()
    encoded = None  # not a field: a routing table's cache of its encoding (``index.Vocabulary.probes``)

    @property
    def disjuncts(self) -> tuple["Filter", ...]:
        """The conjunctions this filter is a disjunction of (itself, for a conjunction)."""
        return self.alternatives or (self,)

    @cached_property
    def constraints(self) -> dict[str, "Constraint"]:
        """The normal form of a conjunction: one Constraint per attribute."""
        if self.alternatives:
            raise TypeError("a disjunction has no single normal form: use its disjuncts")
        return _normalise(self)

    @cached_property
    def unsatisfiable(self) -> bool:
        """No publication can match it (``unsatisfiable``)."""
        return all(any(c.empty for c in d.constraints.values()) for d in self.disjuncts)

    @cached_property
    def residual_constraints(self) -> tuple[tuple[str, "Constraint"], ...]:
        """A conjunction's (attribute, Constraint) pairs with residual conditions, in its order."""
        return tuple((attr, c) for attr, c in self.constraints.items() if c.residual)

    @cached_property
    def by_attribute(self) -> dict[str, tuple[Predicate, ...]]:
        """A conjunction's predicates grouped by attribute (for ``conforms``: a publication
        names a few of a wide advertisement's attributes)."""
        grouped: dict[str, list[Predicate]] = {}
        for p in self.predicates:
            grouped.setdefault(p.attr, []).append(p)
        return {attr: tuple(predicates) for attr, predicates in grouped.items()}

    def __getstate__(self) -> dict:  # without what is rebuilt cheaply, and a routing table's cache
        return {name: value for name, value in self.__dict__.items()
                if name not in ("by_attribute", "unsatisfiable", "residual_constraints", "encoded")}

    def __str__(self) -> str:
        if self.alternatives:
            return " || ".join(str(d) for d in self.alternatives)
        return ",".join(str(p) for p in self.predicates)


@dataclass(frozen=True, slots=True)
class Publication:
    """A publication: attribute -> value (numbers or strings). ``encoded`` is a routing
    table's cache of its encoded points (see ``index.Vocabulary.points``): never pickled,
    never compared."""

    items: tuple[tuple[str, Value], ...]
    encoded: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __reduce__(self):
        return Publication, (self.items,)

    def as_dict(self) -> dict[str, Value]:
        return dict(self.items)

    def __str__(self) -> str:
        return ",".join(f"[{a},{_format_value(v)}]" for a, v in self.items)


def _format_value(value: Value) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)


# ---------------------------------------------------------------------------- parsing


def _split_terms(text: str, what: str, start: int = 0, end: int | None = None) -> list[tuple[int, str]]:
    """Split ``[a,b],[c,d]`` (``text[start:end]``) into (position in ``text``, counted from 1,
    inner text) pairs, honouring quotes."""
    terms: list[tuple[int, str]] = []
    i, n = start, len(text) if end is None else end
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] != "[":
            raise ValueError(f"{what}: expected '[' at position {i + 1}, found {text[i]!r}")
        start, j, quoted = i, i + 1, False
        while j < n and (quoted or text[j] != "]"):
            if text[j] == "'":
                quoted = not quoted
            elif text[j] == "[" and not quoted:
                raise ValueError(f"{what}: unbalanced '[' in predicate {len(terms) + 1} at position {start + 1}")
            j += 1
        if j >= n:
            problem = "unterminated string" if quoted else "unbalanced '['"
            raise ValueError(f"{what}: {problem} in predicate {len(terms) + 1} at position {start + 1}")
        terms.append((start + 1, text[start + 1 : j]))
        i = j + 1
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i < n:
            if text[i] != ",":
                raise ValueError(f"{what}: expected ',' after predicate {len(terms)} at position {i + 1}")
            i += 1
    if not terms:
        raise ValueError(f"{what}: empty (expected at least one [..] term)")
    return terms


def _split_fields(inner: str) -> list[str]:
    fields, current, quoted = [], [], False
    for ch in inner:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            fields.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if quoted:
        raise ValueError("unterminated string")
    fields.append("".join(current).strip())
    return fields


def _parse_value(token: str) -> Value:
    if len(token) >= 2 and token[0] == "'" and token[-1] == "'":
        return token[1:-1]
    if _NUMBER.match(token):
        number = float(token)
        if not math.isfinite(number):
            raise ValueError(f"number out of range {token!r}")
        return int(token) if re.fullmatch(r"[+-]?\d+", token) else number
    if not token:
        raise ValueError("missing value")
    raise ValueError(f"value {token!r} is neither a number nor a quoted string")


def _check_attr(attr: str) -> None:
    if not attr or any(ch in attr for ch in "[]'") or any(ch.isspace() for ch in attr):
        raise ValueError(f"bad attribute name {attr!r}")


def parse_filter(text: str) -> Filter:
    """Parse an advertisement or subscription ``[attr,op,value],...``, or a disjunction of
    them joined by ``||``."""
    if "||" not in text:
        plain = _plain_conjunction(text)
        if plain is not None:
            return plain
    spans = _split_disjuncts(text)
    if len(spans) == 1:
        return _parse_conjunction(text, "filter")
    return Filter((), tuple(
        _parse_conjunction(text, f"filter disjunct {number}", start, end)
        for number, (start, end) in enumerate(spans, start=1)
    ))


def _split_disjuncts(text: str) -> list[tuple[int, int]]:
    """Split ``F1 || F2`` at every ``||`` outside quotes: (start, end) of each disjunct."""
    spans, start, quoted, i = [], 0, False, 0
    while i < len(text):
        if text[i] == "'":
            quoted = not quoted
        elif not quoted and text.startswith("||", i):
            spans.append((start, i))
            start = i = i + 2
            continue
        i += 1
    spans.append((start, len(text)))
    return spans


def _parse_conjunction(text: str, what: str, start: int = 0, end: int | None = None) -> Filter:
    """Parse the ``[attr,op,value],...`` at ``text[start:end]`` (positions in errors are
    those in ``text``)."""
    predicates = []
    for number, (position, inner) in enumerate(_split_terms(text, what, start, end), start=1):
        where = f"{what} predicate {number} [{inner}] at position {position}"
        try:
            parts = _split_fields(inner)
            if len(parts) != 3:
                raise ValueError(f"expected [attribute,operator,value], got {len(parts)} field(s)")
            attr, op, raw = parts
            _check_attr(attr)
            if op not in OPERATORS:
                raise ValueError(f"unknown operator {op!r}")
            value = _parse_value(raw)
            if op == "=" and isinstance(value, str):
                op = "eq"
            if isinstance(value, str) and op in NUMERIC_OPS:
                raise ValueError(f"operator {op!r} needs a numeric value, got string {raw}")
            if not isinstance(value, str) and op in STRING_OPS:
                raise ValueError(f"operator {op!r} needs a quoted string value, got {raw}")
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        predicates.append(Predicate(attr, op, value))
    _check_types_agree(predicates, what)
    return Filter(tuple(predicates))


def _check_types_agree(predicates: list[Predicate], what: str) -> None:
    seen: dict[str, tuple[int, Predicate]] = {}
    for number, predicate in enumerate(predicates, start=1):
        first = seen.setdefault(predicate.attr, (number, predicate))
        if first[1].type != predicate.type:
            raise ValueError(
                f"{what} predicate {number} {predicate}: attribute {predicate.attr!r} is "
                f"{'numeric' if first[1].type == NUMERIC else 'a string'} in predicate {first[0]}"
            )


# Plain text, no spaces: names, quoted strings without brackets or commas, numbers of up to 15
# digits before and after the point (finite, exact as the careful parser reads them). Plain
# publications and conjunctions parse through one compiled expression; anything else takes the
# careful path, which also names what is wrong. Generated workloads are plain: millions of
# their operations are parsed when a scenario is built.
_PLAIN_NAME = r"([^\[\]',\s]+)"
_PLAIN_VALUE = r"('[^'\[\],]*'|[+-]?\d{1,15}(?:\.\d{1,15})?)"
_PLAIN_OPERATOR = "(" + "|".join(re.escape(op) for op in sorted(OPERATORS, key=len, reverse=True)) + ")"
_PLAIN_TERM = rf"\[{_PLAIN_NAME},{_PLAIN_VALUE}\]"
_PLAIN_PUBLICATION = re.compile(rf"{_PLAIN_TERM}(?:,{_PLAIN_TERM})*")
_PLAIN_TERMS = re.compile(_PLAIN_TERM)
_PLAIN_PREDICATE = rf"\[{_PLAIN_NAME},{_PLAIN_OPERATOR},{_PLAIN_VALUE}\]"
_PLAIN_CONJUNCTION = re.compile(rf"{_PLAIN_PREDICATE}(?:,{_PLAIN_PREDICATE})*")
_PLAIN_PREDICATES = re.compile(_PLAIN_PREDICATE)


def _plain_value(raw: str) -> Value:
    return raw[1:-1] if raw[0] == "'" else float(raw) if "." in raw else int(raw)


def _plain_conjunction(text: str) -> Filter | None:
    """``text`` parsed as the careful parser would, when it is a plain conjunction without
    mistakes; None otherwise (the careful parser then parses it or names the mistake)."""
    if not _PLAIN_CONJUNCTION.fullmatch(text):
        return None
    predicates = []
    types: dict[str, bool] = {}  # attribute -> whether it is a string
    for attr, op, raw in _PLAIN_PREDICATES.findall(text):
        value = _plain_value(raw)
        is_string = isinstance(value, str)
        if is_string and op == "=":
            op = "eq"
        if (op in NUMERIC_OPS if is_string else op in STRING_OPS) or types.setdefault(attr, is_string) != is_string:
            return None
        predicates.append(Predicate(attr, op, value))
    return Filter(tuple(predicates))


def parse_publication(text: str) -> Publication:
    """Parse a publication ``[attr,value],...``."""
    if _PLAIN_PUBLICATION.fullmatch(text):
        items = [(attr, _plain_value(raw)) for attr, raw in _PLAIN_TERMS.findall(text)]
        if len({attr for attr, _ in items}) == len(items):
            return Publication(tuple(items))
    return _parse_publication_carefully(text)


def _parse_publication_carefully(text: str) -> Publication:
    items: list[tuple[str, Value]] = []
    seen: set[str] = set()
    for number, (position, inner) in enumerate(_split_terms(text, "publication"), start=1):
        where = f"publication term {number} [{inner}] at position {position}"
        try:
            parts = _split_fields(inner)
            if len(parts) != 2:
                raise ValueError(f"expected [attribute,value], got {len(parts)} field(s)")
            attr, raw = parts
            _check_attr(attr)
            if attr in seen:
                raise ValueError(f"attribute {attr!r} appears twice")
            value = _parse_value(raw)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        seen.add(attr)
        items.append((attr, value))
    return Publication(tuple(items))


# ---------------------------------------------------------------------------- predicates


def satisfies(value: Value, op: str, operand: Value) -> bool:
    """Does a publication value satisfy one predicate ``[_, op, operand]``?"""
    if isinstance(value, str) != isinstance(operand, str):
        return False
    if op == "isPresent":
        return True
    if isinstance(value, str):
        return _STRING_TESTS[op](value, operand)
    return _NUMERIC_TESTS[op](value, operand)


_NUMERIC_TESTS = {
    "<": lambda v, x: v < x,
    "<=": lambda v, x: v <= x,
    "=": lambda v, x: v == x,
    ">=": lambda v, x: v >= x,
    ">": lambda v, x: v > x,
    "<>": lambda v, x: v != x,
}
_STRING_TESTS = {
    "eq": lambda v, x: v == x,
    "neq": lambda v, x: v != x,
    "str-lt": lambda v, x: v < x,
    "str-le": lambda v, x: v <= x,
    "str-gt": lambda v, x: v > x,
    "str-ge": lambda v, x: v >= x,
    "str-prefix": lambda v, x: v.startswith(x),
    "str-postfix": lambda v, x: v.endswith(x),
    "str-contains": lambda v, x: x in v,
}


def matches(sub: Filter, publication: Publication) -> bool:
    """Every predicate's attribute is present in the publication and satisfied (in some
    disjunct)."""
    if sub.alternatives:
        return any(matches(d, publication) for d in sub.alternatives)
    values = publication.as_dict()
    for p in sub.predicates:
        if p.attr not in values or not satisfies(values[p.attr], p.op, p.value):
            return False
    return True


def conforms(publication: Publication, adv: Filter) -> bool:
    """Every attribute the publication carries is constrained by the advertisement (by one of
    its disjuncts) and satisfies it."""
    if adv.alternatives:
        return any(conforms(publication, d) for d in adv.alternatives)
    constrained = adv.by_attribute
    for attr, value in publication.items:
        if attr not in constrained:
            return False
        if not all(satisfies(value, p.op, p.value) for p in constrained[attr]):
            return False
    return True


# ---------------------------------------------------------------------------- normal form


def prefix_successor(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (None: unbounded)."""
    while prefix and ord(prefix[-1]) == 0x10FFFF:
        prefix = prefix[:-1]
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


@dataclass(slots=True)
class Constraint:
    """All predicates of one filter on one attribute.

    ``lo``/``hi`` are None when unbounded; ``excluded`` holds values strictly inside the
    interval that are ruled out (``<>``, ``neq``); ``postfixes`` and ``substrings`` are the
    residual string conditions. ``prefix`` remembers the tightest prefix for covering.
    """

    type: str
    lo: Value | None = None
    lo_open: bool = False
    hi: Value | None = None
    hi_open: bool = False
    excluded: frozenset = frozenset()
    postfixes: tuple[str, ...] = ()
    substrings: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    empty: bool = False

    __reduce__ = rebuilt_by_constructor

    @property
    def residual(self) -> bool:
        return bool(self.excluded or self.postfixes or self.substrings)

    @property
    def point(self) -> Value | None:
        if self.lo is not None and self.lo == self.hi and not self.lo_open and not self.hi_open:
            return self.lo
        return None

    def raise_lo(self, value: Value, is_open: bool) -> None:
        if self.lo is None or value > self.lo or (value == self.lo and is_open):
            self.lo, self.lo_open = value, is_open

    def lower_hi(self, value: Value, is_open: bool) -> None:
        if self.hi is None or value < self.hi or (value == self.hi and is_open):
            self.hi, self.hi_open = value, is_open

    def contains(self, value: Value) -> bool:
        """Is ``value`` inside the interval (ignoring residual conditions)?"""
        if self.lo is not None and (value < self.lo or (value == self.lo and self.lo_open)):
            return False
        if self.hi is not None and (value > self.hi or (value == self.hi and self.hi_open)):
            return False
        return True


def _normalise(f: Filter) -> dict[str, Constraint]:
    constraints: dict[str, Constraint] = {}
    excluded: dict[str, set] = {}
    for p in f.predicates:
        c = constraints.setdefault(p.attr, Constraint(p.type))
        excluded.setdefault(p.attr, set())
        _apply(c, excluded[p.attr], p)
    for attr, c in constraints.items():
        _settle(c, excluded[attr])
    return constraints


def _apply(c: Constraint, excluded: set, p: Predicate) -> None:
    op, v = p.op, p.value
    if op in ("<", "str-lt"):
        c.lower_hi(v, True)
    elif op in ("<=", "str-le"):
        c.lower_hi(v, False)
    elif op in (">", "str-gt"):
        c.raise_lo(v, True)
    elif op in (">=", "str-ge"):
        c.raise_lo(v, False)
    elif op in ("=", "eq"):
        c.raise_lo(v, False)
        c.lower_hi(v, False)
    elif op in ("<>", "neq"):
        excluded.add(v)
    elif op == "str-prefix":
        c.prefixes += (v,)
        c.raise_lo(v, False)
        successor = prefix_successor(v)
        if successor is not None:
            c.lower_hi(successor, True)
    elif op == "str-postfix":
        c.postfixes += (v,)
    elif op == "str-contains":
        c.substrings += (v,)


def _settle(c: Constraint, excluded: set) -> None:
    """Drop exclusions outside the interval, turn excluded end points into open ends."""
    if excluded:
        inside = {x for x in excluded if c.contains(x)}
        if c.lo is not None and c.lo in inside and not c.lo_open:
            c.lo_open = True
            inside.discard(c.lo)
        if c.hi is not None and c.hi in inside and not c.hi_open:
            c.hi_open = True
            inside.discard(c.hi)
        c.excluded = frozenset(inside)
    if c.postfixes:
        c.postfixes = tuple(sorted(set(c.postfixes)))
    if c.substrings:
        c.substrings = tuple(sorted(set(s for s in c.substrings if s)))
    if c.lo is not None and c.hi is not None:
        if c.lo > c.hi or (c.lo == c.hi and (c.lo_open or c.hi_open)):
            c.empty = True
    point = c.point
    if point is not None and (c.postfixes or c.substrings) and not residual_holds(c, point):
        c.empty = True


def residual_holds(c: Constraint, value: Value) -> bool:
    """Does ``value``, known to lie inside ``c``'s interval, meet its residual conditions?"""
    if value in c.excluded:
        return False
    if c.postfixes and not all(value.endswith(q) for q in c.postfixes):
        return False
    return not c.substrings or all(s in value for s in c.substrings)


def unsatisfiable(f: Filter) -> bool:
    """True when no publication can match ``f`` (decided on the normal form, once a filter)."""
    return f.unsatisfiable


# ---------------------------------------------------------------------------- covering


def interval_within(inner: Constraint, outer: Constraint) -> bool:
    """Is ``inner``'s interval inside ``outer``'s?"""
    if outer.lo is not None:
        if inner.lo is None or inner.lo < outer.lo:
            return False
        if inner.lo == outer.lo and outer.lo_open and not inner.lo_open:
            return False
    if outer.hi is not None:
        if inner.hi is None or inner.hi > outer.hi:
            return False
        if inner.hi == outer.hi and outer.hi_open and not inner.hi_open:
            return False
    return True


def residual_implied(inner: Constraint, outer: Constraint) -> bool:
    """Given inner's interval inside outer's, does inner also satisfy outer's residual conditions?"""
    point = inner.point
    for x in outer.excluded:
        if inner.contains(x) and x not in inner.excluded:
            return False
    for q in outer.postfixes:
        if not (point is not None and point.endswith(q)) and not any(p.endswith(q) for p in inner.postfixes):
            return False
    for s in outer.substrings:
        known = inner.postfixes + inner.substrings + inner.prefixes + ((point,) if point is not None else ())
        if not any(s in k for k in known):
            return False
    return True


def constraint_covers(outer: Constraint, inner: Constraint) -> bool:
    return outer.type == inner.type and interval_within(inner, outer) and residual_implied(inner, outer)


def covers(f1: Filter, f2: Filter) -> bool:
    """Every publication matching f2 matches f1 ("f1 covers f2"); False where undecided."""
    if f1.alternatives or f2.alternatives:
        return all(any(covers(d1, d2) for d1 in f1.disjuncts) for d2 in f2.disjuncts)
    if unsatisfiable(f2):
        return True
    c1, c2 = f1.constraints, f2.constraints
    return all(attr in c2 and constraint_covers(c, c2[attr]) for attr, c in c1.items())


# ---------------------------------------------------------------------------- intersection


def constraints_overlap(a: Constraint, b: Constraint) -> bool:
    """Can one value satisfy both? True when unsure (residual string conditions)."""
    if a.type != b.type or a.empty or b.empty:
        return False
    lo, lo_open = a.lo, a.lo_open
    if b.lo is not None and (lo is None or b.lo > lo or (b.lo == lo and b.lo_open)):
        lo, lo_open = b.lo, b.lo_open
    hi, hi_open = a.hi, a.hi_open
    if b.hi is not None and (hi is None or b.hi < hi or (b.hi == hi and b.hi_open)):
        hi, hi_open = b.hi, b.hi_open
    if lo is not None and hi is not None:
        if lo > hi or (lo == hi and (lo_open or hi_open)):
            return False
        if lo == hi:
            return residual_holds(a, lo) and residual_holds(b, lo)
    return True


def intersects(adv: Filter, sub: Filter) -> bool:
    """Some publication conforming to ``adv`` matches ``sub`` (True when unsure)."""
    if adv.alternatives or sub.alternatives:
        return any(intersects(a, s) for a in adv.disjuncts for s in sub.disjuncts)
    ca, cs = adv.constraints, sub.constraints
    return all(attr in ca and constraints_overlap(ca[attr], c) for attr, c in cs.items())
