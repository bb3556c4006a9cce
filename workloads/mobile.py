"""The mobile workloads of the covering papers: ``mobile_monitors`` (monitors that match
everything move between regions) and ``mobile_rush_hour`` (commuters in rush hours)."""
from __future__ import annotations

import random

from .registry import generator, require, rng_for
from .siena import SienaVocabulary


def _move_within_region(rng, client: str, where: dict, region: dict, by_region: dict, t: float) -> dict:
    """Move ``client`` to another broker of its region (updating ``where``)."""
    here = where[client]
    where[client] = rng.choice([b for b in by_region[region[here]] if b != here] or [here])
    return {"t": t, "op": "move", "client": client, "broker": where[client]}


@generator("mobile_monitors")
def mobile_monitors(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    subscribers: int = 5000,
    publishers: int = 40,
    publish_interval: float = 20.0,
    subscribe_interval: float = 0.01,
    monitor_move_interval: float = 120.0,
    moves_per_minute: float = 0.0,
    duration: float = 21600.0,
) -> list[dict]:
    """The mobile-monitor workload ("Congestion Avoidance with Selective Filter Aggregation..."):
    ``publishers`` and ``subscribers`` at random edge brokers (price ranges 10-100 wide), one
    monitor per region subscribing to every quote and moving to another edge broker of its
    region every ``monitor_move_interval`` seconds until ``duration``; ``moves_per_minute``
    other subscribers move too, within their region. Each publisher quotes every
    ``publish_interval`` seconds (staggered)."""
    rng = rng_for(seed, "mobile_monitors")
    edges = sorted(n for n in graph if graph.nodes[n].get("role") == "edge") if graph is not None else sorted(brokers)
    region = {b: (graph.nodes[b].get("region", 0) if graph is not None else 0) for b in edges}
    by_region: dict[int, list[str]] = {}
    for broker in edges:
        by_region.setdefault(region[broker], []).append(broker)
    records = []
    for p in range(publishers):
        records.append({"t": 0.0, "op": "advertise", "client": f"pub{p}", "broker": rng.choice(edges),
                        "id": f"A{p}", "filter": "[class,eq,'STOCK'],[price,>=,0],[price,<,1000]"})
    home = {}
    for s in range(subscribers):
        low = rng.uniform(0, 900)
        home[f"c-S{s}"] = rng.choice(edges)
        records.append({"t": 0.01 + s * subscribe_interval, "op": "subscribe", "client": f"c-S{s}",
                        "broker": home[f"c-S{s}"], "id": f"S{s}",
                        "filter": f"[class,eq,'STOCK'],[price,>=,{low:.1f}],[price,<,{low + rng.uniform(10, 100):.1f}]"})
    start = 0.02 + subscribers * subscribe_interval
    monitors = {r: rng.choice(members) for r, members in sorted(by_region.items())}
    for r, broker in monitors.items():
        records.append({"t": start, "op": "subscribe", "client": f"monitor{r}", "broker": broker, "id": f"MON{r}",
                        "filter": "[class,eq,'STOCK']"})
    moving = {f"monitor{r}": broker for r, broker in monitors.items()}
    t = start + monitor_move_interval
    while t < duration:
        records += [_move_within_region(rng, client, moving, region, by_region, t) for client in sorted(moving)]
        t += monitor_move_interval
    if moves_per_minute > 0:
        t, clients = start, sorted(home)
        while (t := t + 60.0 / moves_per_minute) < duration:
            records.append(_move_within_region(rng, rng.choice(clients), home, region, by_region, t))
    for m in range(int(duration / publish_interval * publishers)):
        records.append({"t": start + m * publish_interval / publishers, "op": "publish", "client": f"pub{m % publishers}",
                        "id": f"M{m}", "content": f"[class,'STOCK'],[price,{rng.uniform(0, 1000):.2f}]"})
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return [r for r in records if r["t"] < duration]


MOBILE_SUBSCRIPTIONS = ("independent", "owned")


MOBILE_MOVES = ("handoff", "resubscribe")


@generator("mobile_rush_hour")
def mobile_rush_hour(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    publishers: int = 2000,
    subscribers: int = 200_000,
    publish_min: float = 1.0,
    publish_max: float = 15.0,
    subscribe_interval: float = 0.0005,
    morning_start: float = 900.0,
    morning_end: float = 1500.0,
    afternoon_start: float | None = 2400.0,
    afternoon_end: float | None = 3000.0,
    duration: float = 3600.0,
    commuters: float = 0.6,
    stayers: float = 0.2,
    subscriptions: str = "independent",
    roots: int = 1600,
    under: int = 1,
    moves: str = "handoff",
    travel: float = 0.0,
) -> list[dict]:
    """The mobile rush-hour workload of the incremental-pruning paper: ``publishers`` and
    ``subscribers`` at the overlay's leaves (every broker where there are none; the paper's is
    a star of 17), SIENA-style subscriptions (see ``SienaVocabulary``), each publisher
    advertising the whole vocabulary and publishing every 1-15 s (``publish_min`` to
    ``publish_max``: its own period, a random phase) once the subscriptions are in. In each
    rush hour (``morning_start`` to ``morning_end``, ``afternoon_start`` to ``afternoon_end``,
    in seconds; no afternoon rush when its bounds are null) every subscriber moves once, at a
    random moment (the paper does not say when within the rush; uniform here):
    ``commuters`` of them from home (where they subscribed) to their office in the morning and
    back in the afternoon, ``stayers`` never, the rest each time to a random other leaf.

    ``subscriptions: independent`` draws every subscription on its own, as the paper describes
    its SIENA model. ``subscriptions: owned`` is the variant that shows what the paper's burst
    needs: ``roots`` root subscriptions that each own their covered set
    (``SienaVocabulary.owned_subscriptions``), so a root's removal exposes its whole set;
    ``under: 2`` or ``3`` puts every other subscription under that many roots, so a set is
    exposed only where all its roots are gone (how much overlap the burst survives).

    ``moves: handoff`` moves a subscriber with its subscriptions (a ``move`` record: the
    old broker hands them to the new one, nothing lost or delivered twice).
    ``moves: resubscribe`` is a move as the paper's setup reads (it is not explicit): the
    subscriber unsubscribes where it is, moves, and subscribes anew (the same filter, a new id
    ``S<n>.<k>`` for its k-th move), so every broker on the way withdraws the subscription and
    installs it again; ``travel`` seconds after the unsubscription (a commuter is away while it
    travels; the paper does not say for how long)."""
    for name, value, known in (("subscriptions", subscriptions, MOBILE_SUBSCRIPTIONS), ("moves", moves, MOBILE_MOVES)):
        if value not in known:
            raise ValueError(f"{name} {value!r}: expected one of {', '.join(known)}")
    if under != 1 and subscriptions != "owned":
        raise ValueError(f"under {under}: only with subscriptions: owned")
    require(("commuters", commuters, 0 <= commuters <= 1, "a share in [0, 1]"),
             ("stayers", stayers, 0 <= stayers <= 1 - commuters, f"a share in [0, 1 - commuters ({1 - commuters:g})]"),
             ("publish_min", publish_min, publish_min > 0, "a positive number of seconds"),
             ("publish_max", publish_max, publish_max >= publish_min, f"at least publish_min ({publish_min})"))
    begin = 0.02 + subscribers * subscribe_interval  # every subscription is in
    rushes = _rush_hours(begin, (morning_start, morning_end), (afternoon_start, afternoon_end), duration)
    if travel < 0 or (travel and moves != "resubscribe"):
        raise ValueError(f"travel {travel}: expected seconds >= 0, and only with moves: resubscribe")
    if len(rushes) > 1 and travel > rushes[1][0] - rushes[0][1]:
        raise ValueError(f"travel {travel}: longer than the gap between the rush hours")
    rng = rng_for(seed, "mobile_rush_hour")
    leaves = sorted(n for n in graph if graph.degree(n) == 1) if graph is not None else []
    leaves = leaves or sorted(brokers)
    language = SienaVocabulary()
    vocabulary = ",".join(f"[{w},isPresent,0]" for w in language.words)
    records = [{"t": 0.0, "op": "advertise", "client": f"pub{p}", "broker": rng.choice(leaves), "id": f"A{p}",
                "filter": vocabulary} for p in range(publishers)]
    if subscriptions == "owned":
        owned = language.owned_subscriptions(rng, subscribers, roots, under)
        rng.shuffle(owned)
        next_filter = iter(owned).__next__
    else:
        next_filter = lambda: language.subscription(rng)  # noqa: E731
    home, filters = {}, {}
    for s in range(subscribers):
        home[s], filters[s] = rng.choice(leaves), next_filter()
        records.append({"t": round(0.01 + s * subscribe_interval, 6), "op": "subscribe", "client": f"c-S{s}",
                        "broker": home[s], "id": f"S{s}", "filter": filters[s]})
    relocations = _rush_hour_moves(rng, leaves, home, rushes, commuters, stayers)
    if moves == "resubscribe":
        records += _resubscriptions(relocations, filters, travel)
    else:
        records += [{"t": t, "op": "move", "client": f"c-S{s}", "broker": broker} for s, t, broker in relocations]
    publications = language.periodic_publications(rng, publishers, begin, duration, publish_min, publish_max)
    records += [{"t": round(t, 6), "op": "publish", "client": f"pub{p}", "id": f"M{message}", "content": publication}
                for message, (p, t, publication) in enumerate(publications)]
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return records


def _resubscriptions(relocations: list[tuple[int, float, str]], filters: dict[int, str],
                     travel: float) -> list[dict]:
    """Each move of subscriber ``s`` as an unsubscription, the move, and ``travel`` seconds
    later a new subscription with the same filter."""
    moved: dict[int, int] = {}
    records = []
    for s, t, broker in relocations:
        old_id = f"S{s}.{moved[s]}" if s in moved else f"S{s}"
        moved[s] = moved.get(s, 0) + 1
        client = f"c-S{s}"
        records += [{"t": t, "op": "unsubscribe", "client": client, "id": old_id},
                    {"t": t, "op": "move", "client": client, "broker": broker},
                    {"t": round(t + travel, 6), "op": "subscribe", "client": client, "broker": broker,
                     "id": f"S{s}.{moved[s]}", "filter": filters[s]}]
    return records


def _rush_hours(begin: float, morning: tuple, afternoon: tuple, duration: float) -> list[tuple[float, float]]:
    """The rush hours, checked to come after every subscription is in (at ``begin``) and in order."""
    if (afternoon[0] is None) != (afternoon[1] is None):
        raise ValueError("afternoon_start and afternoon_end: give both, or neither (null) for no afternoon rush")
    rushes = [morning] + ([afternoon] if afternoon[0] is not None else [])
    bounds = [begin, *(t for rush in rushes for t in rush), duration]
    if bounds != sorted(bounds):
        shown = " and ".join(f"({start:g}, {end:g})" for start, end in rushes)
        raise ValueError(f"expected the subscriptions in ({begin:g} s), the rush hours {shown} and the end "
                         f"({duration:g} s) in that order")
    return rushes


def _rush_hour_moves(rng: random.Random, leaves: list[str], home: dict, rushes: list, commuters: float,
                     stayers: float) -> list[tuple[int, float, str]]:
    """One move, (subscriber, time, broker), per rush hour for every subscriber but the
    stayers: commuters to their office and (in a second rush) home again, the others each time
    to a random other leaf."""
    subscribers = len(home)
    order = list(range(subscribers))
    rng.shuffle(order)
    commuting = set(order[:round(commuters * subscribers)])
    staying = set(order[len(commuting):len(commuting) + round(stayers * subscribers)])
    others = lambda broker: [b for b in leaves if b != broker] or [broker]  # noqa: E731
    moves = []
    for s in range(subscribers):
        if s in staying:
            continue
        office = rng.choice(others(home[s]))
        morning_to = office if s in commuting else rng.choice(others(home[s]))
        afternoon_to = home[s] if s in commuting else rng.choice(others(morning_to))
        for (start, end), broker in zip(rushes, (morning_to, afternoon_to)):
            moves.append((s, round(rng.uniform(start, end), 6), broker))
    return moves
