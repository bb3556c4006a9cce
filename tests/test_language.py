import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.language import (
    Filter,
    conforms,
    covers,
    intersects,
    matches,
    parse_filter,
    parse_publication,
)
from protocols.language import NUMERIC_OPS, OPERATORS, STRING_OPS, _parse_conjunction, _parse_publication_carefully

from .strategies import any_filters, filters, publications

F, P = parse_filter, parse_publication


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("[x,>,1", "unbalanced '[' in predicate 1"),
        ("[x,>,1],[y,<,2", "unbalanced '[' in predicate 2"),
        ("[x,>>,1]", "predicate 1 [x,>>,1] at position 1: unknown operator '>>'"),
        ("[x,>,]", "missing value"),
        ("[x,>]", "got 2 field(s)"),
        ("[x,>,'a']", "operator '>' needs a numeric value"),
        ("[x,str-prefix,3]", "operator 'str-prefix' needs a quoted string value"),
        ("[x,eq,abc]", "neither a number nor a quoted string"),
        ("[x,eq,'abc]", "unterminated string"),
        ("[x,>,1] [y,<,2]", "expected ',' after predicate 1 at position 9"),
        ("[x,>,1],,[y,<,2]", "expected '[' at position 9"),
        ("[x,>,1],[x,eq,'a']", "predicate 2 [x,eq,'a']: attribute 'x' is numeric in predicate 1"),
        ("[,>,1]", "bad attribute name"),
        ("[x,[,1]", "unbalanced '['"),
        ("[x,>,1] ||", "filter disjunct 2: empty"),
        ("|| [x,>,1]", "filter disjunct 1: empty"),
        ("[x,>,1] || [y,<,z]", "filter disjunct 2 predicate 1 [y,<,z] at position 12: value 'z'"),
        ("[x,>,1] || [y,<,1] [z,<,2]", "filter disjunct 2: expected ',' after predicate 1 at position 20"),
        ("[x,>,1] || [y,<,1],[y,eq,'a']", "disjunct 2 predicate 2 [y,eq,'a']: attribute 'y' is numeric"),
    ],
)
def test_malformed_filters_name_the_place(text, message):
    with pytest.raises(ValueError) as info:
        parse_filter(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[x]", "publication term 1 [x] at position 1: expected [attribute,value]"),
        ("[x,1],[x,2]", "term 2 [x,2] at position 7: attribute 'x' appears twice"),
        ("[x,1],[y,'a]", "unterminated string"),
        ("[x,1.2.3]", "neither a number nor a quoted string"),
        ("[x,>,1]", "expected [attribute,value], got 3"),
    ],
)
def test_malformed_publications_name_the_place(text, message):
    with pytest.raises(ValueError) as info:
        parse_publication(text)
    assert message in str(info.value)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "x%y", "volume"]), st.one_of(
    st.integers(-10**16, 10**16), st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 4)),
    st.text("ab ,[]'xy", max_size=4))), min_size=1, max_size=4), st.sampled_from(["", " "]))
def test_plain_publications_parse_as_the_careful_parser_reads_them(terms, space):
    """The fast path for plain publications gives exactly what the careful parser gives, and
    anything else (spaces, duplicates, odd strings) the careful parser's answer or error."""
    text = ",".join(f"[{attr},{space}{value!r}]" if isinstance(value, str) else f"[{attr},{space}{value}]"
                    for attr, value in terms)
    results = []
    for parse in (parse_publication, _parse_publication_carefully):
        try:
            results.append([(a, type(v), v) for a, v in parse(text).items])
        except ValueError as exc:
            results.append(str(exc))
    assert results[0] == results[1]


@st.composite
def predicate_texts(draw):
    """``[attr,op,value]`` mostly with an operator of the value's type, now and then any."""
    value = draw(st.one_of(st.integers(-10**16, 10**16), st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 4)),
                           st.text("ab ,[]'xy", max_size=3)))
    typed = STRING_OPS if isinstance(value, str) else NUMERIC_OPS | {"isPresent"}
    op = draw(st.sampled_from(sorted(typed if draw(st.integers(0, 9)) else OPERATORS)))
    space = draw(st.sampled_from(["", "", " "]))
    return f"[{draw(st.sampled_from(['a', 'b', 'x%y']))},{op},{space}{value!r}]"


@given(st.lists(predicate_texts(), min_size=1, max_size=4))
def test_plain_filters_parse_as_the_careful_parser_reads_them(predicates):
    """The fast path for plain conjunctions gives exactly what the careful parser gives, and
    anything else (spaces, operators that need the other type, attributes of two types, odd
    strings) the careful parser's answer or error."""
    text = ",".join(predicates)
    results = []
    for parse in (parse_filter, lambda t: _parse_conjunction(t, "filter")):
        try:
            results.append([(p.attr, p.op, type(p.value), p.value) for p in parse(text).predicates])
        except ValueError as exc:
            results.append(str(exc))
    assert results[0] == results[1]


def test_padres_examples_and_attribute_names():
    sub = F("[class,eq,'STOCK'],[symbol,eq,'YHOO'],[volume,>,1000000]")
    assert matches(sub, P("[class,'STOCK'],[symbol,'YHOO'],[volume,6200000],[close,18.37]"))
    assert not matches(sub, P("[class,'STOCK'],[symbol,'YHOO'],[volume,6200],[close,18.37]"))
    assert matches(F("[highLow%Diff,>=,0.5]"), P("[highLow%Diff,0.75]"))
    assert F("[s,=,'x']").predicates[0].op == "eq"


def test_strict_bounds_are_exact_and_ranges_allowed():
    sub = F("[x,>,10],[x,<,20]")
    assert not matches(sub, P("[x,10]"))
    assert matches(sub, P("[x,10.5]"))  # PADRES would round x>10 to x>=11
    assert not matches(sub, P("[x,20]"))
    assert matches(F("[x,=,3]"), P("[x,3.0]"))  # integers and decimals compare as numbers


def test_string_operators():
    pub = P("[s,'banana']")
    for text, expected in [
        ("[s,str-prefix,'ban']", True), ("[s,str-postfix,'ana']", True),
        ("[s,str-contains,'nan']", True), ("[s,str-lt,'c']", True), ("[s,str-ge,'bz']", False),
        ("[s,neq,'banana']", False), ("[s,isPresent,'']", True), ("[s,isPresent,0]", False),
    ]:
        assert matches(F(text), pub) is expected, text


@pytest.mark.parametrize(
    "f1, f2, expected",
    [
        ("[x,>,1]", "[x,>,2]", True),
        ("[x,>,1]", "[x,>=,1]", False),
        ("[x,>=,1]", "[x,>,1]", True),
        ("[x,>,1]", "[x,>=,1],[x,<>,1]", True),  # the excluded end point makes it open
        ("[x,<>,5]", "[x,>,5]", True),
        ("[x,<>,5]", "[x,>,4]", False),
        ("[x,>,1]", "[x,>,2],[y,=,3]", True),
        ("[x,>,1],[y,=,3]", "[x,>,2]", False),
        ("[s,str-prefix,'ab']", "[s,eq,'abc']", True),
        ("[s,str-prefix,'ab']", "[s,str-prefix,'abc']", True),
        ("[s,str-prefix,'abc']", "[s,str-prefix,'ab']", False),
        ("[s,neq,'a']", "[s,eq,'b']", True),
        ("[s,str-contains,'b']", "[s,eq,'abc']", True),
        ("[s,str-contains,'b']", "[s,str-prefix,'ab']", True),
        ("[s,str-postfix,'c']", "[s,str-postfix,'bc']", True),
        ("[x,>,5]", "[x,>,3],[x,<,2]", True),  # f2 matches nothing
        ("[x,>,5],[x,<,2]", "[x,>,3]", False),
        ("[x,isPresent,0]", "[x,>,3]", True),
        ("[x,isPresent,'']", "[x,>,3]", False),
        ("[x,>,1] || [s,eq,'a']", "[x,>,5]", True),
        ("[x,>,1] || [s,eq,'a']", "[x,>,5] || [s,eq,'a'],[y,<,2]", True),
        ("[x,>,1] || [s,eq,'a']", "[x,>,5] || [s,eq,'b']", False),
        ("[x,>,5]", "[x,>,6] || [x,>,7]", True),
        ("[x,>,5]", "[x,>,6] || [y,>,7]", False),
        ("[x,>,5] || [x,<,0]", "[x,>,6] || [x,>,3],[x,<,1]", True),  # the second matches nothing
        ("[x,>,1],[x,<,3] || [x,>,2],[x,<,5]", "[x,>,1],[x,<,4]", False),  # covered by the two together
    ],
)
def test_covering_table(f1, f2, expected):
    assert covers(F(f1), F(f2)) is expected


@pytest.mark.parametrize(
    "adv, sub, expected",
    [
        ("[class,eq,'S'],[price,>,0]", "[class,eq,'S'],[price,>,10]", True),
        ("[class,eq,'S'],[price,>,0]", "[class,eq,'S'],[price,<,0]", False),
        ("[class,eq,'S'],[price,>,0]", "[class,eq,'S'],[volume,>,0]", False),
        ("[x,>=,1],[x,<=,1]", "[x,<>,1]", False),
        ("[x,>=,1],[x,<=,2]", "[x,>=,2]", True),
        ("[x,>=,1],[x,<,2]", "[x,>=,2]", False),
        ("[s,str-prefix,'ab']", "[s,eq,'abc']", True),
        ("[s,str-prefix,'ab']", "[s,eq,'b']", False),
        ("[x,<,0] || [y,>,0]", "[y,>,5]", True),
        ("[x,<,0] || [y,>,0]", "[y,<,0] || [x,>,0]", False),
        ("[x,<,0]", "[y,<,0] || [x,<,-3]", True),
    ],
)
def test_intersection_table(adv, sub, expected):
    assert intersects(F(adv), F(sub)) is expected


def test_a_disjunction_matches_when_one_disjunct_does():
    sub = F("[k17,isPresent,0] || [k42,isPresent,0],[s,eq,'a||b']")
    assert [len(d.predicates) for d in sub.disjuncts] == [1, 2] and str(F(str(sub))) == str(sub)
    assert matches(sub, P("[k17,1]")) and matches(sub, P("[k42,1],[s,'a||b']"))
    assert not matches(sub, P("[k42,1]")) and not matches(sub, P("[k5,1]"))
    adv = F("[x,<,0] || [y,>,0]")
    assert conforms(P("[x,-1]"), adv) and conforms(P("[y,1]"), adv)
    assert not conforms(P("[x,-1],[y,1]"), adv)  # each disjunct describes whole publications


def test_conformance_needs_every_publication_attribute_advertised():
    adv = F("[class,eq,'S'],[price,>,0]")
    assert conforms(P("[class,'S'],[price,3]"), adv)
    assert conforms(P("[class,'S']"), adv)
    assert not conforms(P("[class,'S'],[price,3],[volume,1]"), adv)
    assert not conforms(P("[class,'S'],[price,-3]"), adv)
    ranged = F("[price,>,0],[class,eq,'S'],[price,<,5]")  # two predicates on one attribute
    assert conforms(P("[price,4]"), ranged) and not conforms(P("[price,6]"), ranged)


def test_a_filter_pickles_without_its_predicate_grouping():
    """``by_attribute`` (conformance's lookup) is rebuilt where needed rather than carried."""
    adv = F(",".join(f"[w{i},isPresent,0]" for i in range(300)))
    assert conforms(P("[w7,1]"), adv) and "by_attribute" in adv.__dict__ and adv.constraints  # both cached
    copy = pickle.loads(pickle.dumps(adv))
    assert "by_attribute" not in copy.__dict__ and "constraints" in copy.__dict__
    assert str(copy) == str(adv) and conforms(P("[w7,1],[w299,3]"), copy) and not conforms(P("[v,1]"), copy)


@settings(max_examples=3000, deadline=None)
@given(any_filters(), any_filters(), publications())
def test_covers_is_sound(f1: Filter, f2: Filter, pub):
    if covers(f1, f2) and matches(f2, pub):
        assert matches(f1, pub)


@settings(max_examples=3000, deadline=None)
@given(any_filters(), any_filters(), publications())
def test_intersects_never_wrongly_false(adv, sub, pub):
    if conforms(pub, adv) and matches(sub, pub):
        assert intersects(adv, sub)


@settings(max_examples=1000, deadline=None)
@given(any_filters())
def test_round_trip_through_text(f):
    assert parse_filter(str(f)) == f
