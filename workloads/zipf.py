"""``zipf_groups``: the soft-link paper's datasets (publisher groups of Zipf popularity,
subscriptions matching a set share of publications)."""
from __future__ import annotations

import itertools
import math
import random

from .registry import generator, require, rng_for


@generator("zipf_groups")
def zipf_groups(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    clients: str = "all",
    publishers: int = 40,
    groups: int = 10,
    zipf: float = 1.0,
    attributes: int = 4,
    subscriptions: int = 1000,
    match_share: float = 0.08,
    interest: str = "any",
    spread: float = 0.25,
    subscribe_interval: float = 0.002,
    publications: int = 2000,
    publish_interval: float = 0.01,
    high_rate_from: float | None = None,
    high_rate_interval: float = 0.001,
    refine: float = 0.0,
) -> list[dict]:
    """The soft-link paper's Zipf datasets: publishers in ``groups`` (group g publishes class
    ``G<g>`` with ``attributes`` numeric attributes uniform in [0, 100)); groups ranked by
    popularity, the rank-r group drawing a share of subscriptions and publications
    proportional to 1 / r ** ``zipf``. A subscription names its group and a range over one of
    the attributes, as wide as makes ``match_share`` of the subscriptions match a
    publication on average: about 0.08 is the paper's sparse dataset, 0.5 its dense one
    (reachable with few groups, e.g. 2). Subscriptions come first, ``subscribe_interval``
    apart, then publications ``publish_interval`` apart (``high_rate_interval`` apart from
    ``high_rate_from`` seconds on: a run that measures throughput at a rate that saturates
    brokers after a warm-up at a low one). ``clients: leaves`` attaches every
    client to a leaf of the overlay, so inner brokers only forward (``all``: any broker).

    ``interest`` says where a group's subscriptions sit. ``any``: each on a broker drawn
    uniformly. ``broker`` (the paper's datasets, whose brokers originate the subscriptions):
    each broker subscribes within one group (brokers apportioned to groups by popularity) and
    on one attribute, its ranges starting within ``spread`` range widths of a point of its
    own. The paper leaves placement unstated; with ``any`` every broker holds 50-160
    subscriptions of every popular group, so nearly every broker matches nearly every
    publication and none only forwards, which the paper's pure forwarders rule out. Either
    way a range is as wide, so the matching share is the same.

    ``refine`` (dataset DT-C's covering relations, whose structure the paper leaves unstated):
    the share of subscriptions that refine an earlier subscription of their group, drawn
    uniformly: each of its ranges narrowed to between half and all of its width, inside it,
    and a range of the usual width over one more attribute while one is left. So the earlier
    subscription covers it, and it has more predicates (covered subscriptions "are more
    specific and contain more predicates"). ``match_share`` then holds for the subscriptions
    that refine none; refinements match fewer publications."""
    require(("match_share", match_share, 0 < match_share <= 1, "a share in (0, 1]"),
             ("groups", groups, groups >= 1, "at least 1"),
             ("publishers", publishers, publishers >= groups, f"at least groups ({groups})"),
             ("attributes", attributes, attributes >= 1, "at least 1"))
    if clients not in ("all", "leaves"):
        raise ValueError(f"clients: expected 'all' or 'leaves', got {clients!r}")
    require(("publish_interval", publish_interval, publish_interval > 0, "a positive number of seconds"),
             ("high_rate_interval", high_rate_interval, high_rate_interval > 0, "a positive number of seconds"),
             ("refine", refine, 0 <= refine < 1, "a share in [0, 1)"))
    if interest not in ("any", "broker") or spread < 0:
        raise ValueError(f"interest: expected 'any' or 'broker' (and spread >= 0), got {interest!r}, {spread!r}")
    if clients == "leaves" and graph is not None:
        brokers = sorted(b for b in brokers if graph.degree(b) == 1)
    rng = rng_for(seed, "zipf_groups")
    popularity = [1.0 / (rank + 1) ** zipf for rank in range(groups)]
    total = sum(popularity)
    same_group = sum((p / total) ** 2 for p in popularity)
    width = 100.0 * match_share / same_group
    if width > 100:
        raise ValueError(f"match_share {match_share} is out of reach with {groups} groups of Zipf exponent {zipf} "
                         f"(at most {same_group:.3f}); use fewer groups or a smaller exponent")
    members = {g: [f"P{i}" for i in range(publishers) if i % groups == g] for g in range(groups)}
    records = []
    for i in range(publishers):
        g = i % groups
        ranges = ",".join(f"[a{j},>=,0],[a{j},<,100]" for j in range(attributes))
        records.append({"t": 0.0, "op": "advertise", "client": f"P{i}", "broker": rng.choice(brokers),
                        "id": f"A{i}", "filter": f"[class,eq,'G{g}'],{ranges}"})
    interested = _interests(rng, brokers, popularity, attributes, width) if interest == "broker" else None
    t = 0.5
    earlier: dict[int, list[dict[int, tuple[float, float]]]] = {g: [] for g in range(groups)}
    for i in range(subscriptions):
        g = rng.choices(range(groups), popularity)[0]
        if refine and earlier[g] and rng.random() < refine:
            ranges = _refined(rng, rng.choice(earlier[g]), attributes, width)
            broker = rng.choice(brokers) if interested is None else rng.choice(interested[g])[0]
        else:
            if interested is None:
                low, attr = rng.uniform(0, 100 - width), rng.randrange(attributes)  # in the draw order of old runs
                broker = rng.choice(brokers)
            else:
                broker, (attr, start) = rng.choice(interested[g])
                low = min(max(start + rng.uniform(-spread, spread) * width, 0.0), 100 - width)
            low = round(low, 2)
            ranges = {attr: (low, round(low + width, 2))}
        if refine:
            earlier[g].append(ranges)
        predicates = "".join(f",[a{a},>=,{low}],[a{a},<,{high}]" for a, (low, high) in sorted(ranges.items()))
        records.append({"t": round(t, 6), "op": "subscribe", "client": f"S{i}", "broker": broker, "id": f"S{i}",
                        "filter": f"[class,eq,'G{g}']{predicates}"})
        t += subscribe_interval
    t += 1.0
    for i in range(publications):
        g = rng.choices(range(groups), popularity)[0]
        # a value that rounds to 100 would not conform to the advertisements' [0, 100)
        values = ",".join(f"[a{j},{min(round(rng.uniform(0, 100), 2), 99.99)}]" for j in range(attributes))
        records.append({"t": round(t, 6), "op": "publish", "client": rng.choice(members[g]), "id": f"M{i}",
                        "content": f"[class,'G{g}'],{values}"})
        t += high_rate_interval if high_rate_from is not None and t >= high_rate_from else publish_interval
    return records


def _refined(rng: random.Random, ranges: dict[int, tuple[float, float]], attributes: int,
             width: float) -> dict[int, tuple[float, float]]:
    """A refinement of a subscription's ``ranges`` (attribute -> [low, high)): each narrowed
    inside itself to between half and all of its width (to the hundredth, inward), and one
    more attribute's range of ``width`` while one is left."""
    refined = {}
    for attr, (low, high) in sorted(ranges.items()):
        narrow = (high - low) * rng.uniform(0.5, 1.0)
        start = low + rng.uniform(0, high - low - narrow)
        refined[attr] = (math.ceil(start * 100) / 100, math.floor((start + narrow) * 100) / 100)
    free = [a for a in range(attributes) if a not in ranges]
    if free:
        low = round(rng.uniform(0, 100 - width), 2)
        refined[rng.choice(free)] = (low, round(low + width, 2))
    return refined


def _interests(rng: random.Random, brokers: list[str], popularity: list[float], attributes: int,
               width: float) -> list[list[tuple[str, tuple[int, float]]]]:
    """Per group, its brokers with the attribute and the point their ranges start near: the
    brokers shuffled and dealt to groups in proportion to popularity (largest remainders, at
    least one broker a group, so a group's share of brokers is its share of subscriptions)."""
    if len(brokers) < len(popularity):
        raise ValueError(f"interest: broker needs a broker per group: {len(popularity)} groups, {len(brokers)} brokers")
    total = sum(popularity)
    quotas = [max(1, math.floor(p / total * len(brokers))) for p in popularity]
    remainders = sorted(range(len(popularity)), key=lambda g: -(popularity[g] / total * len(brokers) % 1))
    for g in itertools.islice(itertools.cycle(remainders), max(0, len(brokers) - sum(quotas))):
        quotas[g] += 1
    while sum(quotas) > len(brokers):
        quotas[quotas.index(max(quotas))] -= 1
    dealt = rng.sample(brokers, len(brokers))
    groups, start = [], 0
    for quota in quotas:
        groups.append([(b, (rng.randrange(attributes), rng.uniform(0, 100 - width))) for b in dealt[start:start + quota]])
        start += quota
    return groups
