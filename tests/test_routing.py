"""Routing tables answer the broker's questions exactly as brute force over the oracle would."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.language import NUMERIC, attributes_of, intersects, matches, parse_filter, parse_publication
from protocols.routing import LOCAL, RoutingTable

from .strategies import any_filters, publications

NEIGHBORS = ["B0", "B1", "B2", "B3"]
last_hops = st.integers(LOCAL, len(NEIGHBORS) - 1)


def _table(entries):
    table = RoutingTable(NEIGHBORS)
    for key, (f, hop) in enumerate(entries):
        table.add_route(key, f, hop)
    return table


def _rechecked_disjuncts(f, publication) -> int:
    """The disjuncts of ``f`` whose intervals hold for ``publication`` and that carry
    residual conditions: what the kernel re-checks."""
    return sum(_intervals_hold(d, publication) and any(c.residual for c in d.constraints.values())
               for d in f.disjuncts)


def _intervals_hold(f, publication) -> bool:
    """``matches`` ignoring residual conditions (what the kernel checks before them)."""
    values = publication.as_dict()
    for attr, c in f.constraints.items():
        if attr not in values or isinstance(values[attr], str) != (c.type != NUMERIC):
            return False
        if not c.contains(values[attr]):
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(any_filters(), last_hops), min_size=1, max_size=40),
       st.lists(st.tuples(publications(), last_hops), min_size=1, max_size=5))
def test_publication_gives_next_hops_and_local_subscribers(entries, arrivals):
    table = _table(entries)
    for publication, sender in arrivals:
        checks_before = table.work.residual_checks
        match = table.publication(publication, sender)
        matching = [k for k, (f, _) in enumerate(entries) if matches(f, publication)]
        assert table.keys_of(match.slots) == matching
        assert match.groups == sorted({entries[k][1] for k in matching} - {LOCAL, sender})
        assert [table.key(s) for s in match.local.tolist()] == [k for k in matching if entries[k][1] == LOCAL]
        rechecked = sum(_rechecked_disjuncts(f, publication) for f, _ in entries)
        assert table.work.residual_checks - checks_before == rechecked


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(any_filters(), last_hops), min_size=1, max_size=30),
       st.lists(st.tuples(st.booleans(), any_filters(), st.integers(0, len(NEIGHBORS) - 1)), min_size=1, max_size=12),
       st.sets(st.tuples(st.integers(0, 29), st.integers(0, len(NEIGHBORS) - 1))))
def test_advertisements_keep_toward_counts_and_name_routing_changes(subs, adv_ops, routed):
    table = _table(subs)
    for slot, hop in routed:
        if slot < len(subs):
            table.routed[table.slot(slot), hop] = True
    live: list[tuple] = []  # advertisements in force: (filter, hop)
    for withdraw, adv, hop in adv_ops:
        intersected = [k for k, (f, _) in enumerate(subs) if intersects(adv, f)]
        if withdraw and live:
            adv, hop = live.pop(0)
            intersected = [k for k, (f, _) in enumerate(subs) if intersects(adv, f)]
            changed = table.unadvertised(adv, hop)
            count = {k: sum(intersects(a, subs[k][0]) for a, h in live if h == hop) for k in intersected}
            expected = [k for k in intersected if count[k] == 0 and table.routed[table.slot(k), hop]]
        else:
            live.append((adv, hop))
            changed = table.advertised(adv, hop)
            expected = [k for k in intersected if not table.routed[table.slot(k), hop] and subs[k][1] != hop]
        assert table.keys_of(changed) == expected
        for k, (f, _) in enumerate(subs):
            for n in range(len(NEIGHBORS)):
                assert table.toward[table.slot(k), n] == sum(intersects(a, f) for a, h in live if h == n)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(any_filters(), last_hops), min_size=1, max_size=30), st.lists(any_filters(), min_size=1, max_size=5))
def test_hop_counts_count_intersecting_advertisements_per_last_hop(advs, subs):
    table = _table(advs)
    for sub in subs:
        expected = [sum(1 for f, hop in advs if hop == n and intersects(f, sub)) for n in range(len(NEIGHBORS))]
        assert table.hop_counts(sub).tolist() == expected


def test_a_reused_slot_starts_with_no_routing_state():
    table = RoutingTable(NEIGHBORS)
    table.add_route("A", parse_filter("[x,>,1]"), 2)
    slot = table.slot("A")
    table.toward[slot, 1] = 3
    table.routed[slot, 0] = True
    table.remove("A")
    assert table.add_route("B", parse_filter("[x,<,1]"), LOCAL) == slot
    assert table.toward[slot].tolist() == [0] * len(NEIGHBORS) and not table.routed[slot].any()
    assert table.last_hop(slot) == LOCAL and table.routed_hops(slot) == []


def test_a_clients_local_entries_follow_adds_repointing_and_removes():
    table = RoutingTable(NEIGHBORS)
    f = parse_filter("[x,>,1]")
    table.add_route(("A1", 0), f, LOCAL, "P")
    table.add_route(("A2", 0), f, 1, "P")  # P's, but it came from a neighbour
    table.add_route(("A3", 0), f, LOCAL, "P")
    table.add_route(("B1", 0), f, LOCAL, "Q")
    assert table.local_keys_of("P") == [("A1", 0), ("A3", 0)] and table.local_keys_of("R") == []
    table.set_last_hop(table.slot(("A2", 0)), LOCAL)  # a migrated advertisement arrives
    table.set_last_hop(table.slot(("A1", 0)), 0)  # one leaves
    assert table.local_keys_of("P") == [("A3", 0), ("A2", 0)]
    table.remove(("A3", 0))
    table.remove(("A2", 0))
    table.remove(("B1", 0))
    assert table.local_keys_of("P") == [] and table.local_keys_of("Q") == [] and not table._local_of_client
    table.add_route(("C1", 0), f, LOCAL, "Q")  # into a freed slot
    assert table.local_keys_of("Q") == [("C1", 0)]


def test_entries_ids_and_clients_follow_their_slots_also_in_a_table_pickled_before_ids_were_kept():
    table = RoutingTable(NEIGHBORS)
    f = parse_filter("[x,>,1]")
    for key, client in ((("S1", 0), "P"), (("S2", 3), None), (("S3", 1), "Q")):
        table.add_route(key, f, LOCAL, client)
    table.remove(("S2", 3))
    table.add_route(("S4", 2), f, LOCAL, "R")  # into S2's slot
    slots = np.array([table.slot(k) for k in (("S4", 2), ("S1", 0), ("S3", 1))])
    assert table.ids_of(slots).tolist() == ["S4", "S1", "S3"] and table.clients_of(slots).tolist() == ["R", "P", "Q"]
    state = attributes_of(table)
    del state["_ids"]
    restored = RoutingTable(table.neighbors)
    restored.__setstate__(state)
    assert restored.ids_of(slots).tolist() == ["S4", "S1", "S3"] and len(restored._ids) == len(table._ids)


def test_a_rewired_table_names_its_next_hops_by_the_new_neighbours_at_once():
    """``set_neighbors`` renumbers the last hops in place and replaces the per-neighbour scratch
    of matching: the next publication, with no entry added in between, is grouped by the new
    numbers (the kernels' struct is made again after a rewiring, not only after an add)."""
    table = RoutingTable(["B1", "B2"])
    f = parse_filter("[x,>,0]")
    table.add_route("from B1", f, 0)
    table.add_route("from B2", f, 1)
    publication = parse_publication("[x,5]")
    assert table.publication(publication, LOCAL).groups == [0, 1]
    table.set_neighbors(["B0", "B1", "B2"])
    assert table.publication(publication, LOCAL).groups == [1, 2]
    assert table.publication(publication, 1).groups == [2]
