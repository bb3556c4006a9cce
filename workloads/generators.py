"""Seeded workload generators, registered by name for ``workload.generator`` in a scenario.

Each generator takes the overlay's broker names (sorted), the scenario seed and keyword
parameters, and returns trace records (dicts in the trace format of DESIGN.md section 9), so
a generated workload can be written out and replayed as a trace. A publish record's
``content`` may be a ``Publication`` already parsed, whose ``str()`` is its text.
"""
from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass
from typing import Callable

from protocols.language import Publication

from . import draws

GENERATORS: dict[str, Callable] = {}

SYMBOLS = ["AAPL", "AMAT", "AMZN", "CSCO", "DELL", "IBM", "INTC", "MSFT", "ORCL", "YHOO"]


def generator(name: str):
    def register(fn: Callable) -> Callable:
        GENERATORS[name] = fn
        return fn

    return register


def _require(*conditions: tuple[str, object, bool, str]) -> None:
    """Refuse the first parameter whose condition fails: (name, value, holds, what was expected);
    the message starts with the parameter's name, which the scenario's error names as its key."""
    for name, value, holds, expected in conditions:
        if not holds:
            raise ValueError(f"{name} {value!r}: expected {expected}")


def rng_for(seed: int, name: str) -> random.Random:
    """A generator seeded from the scenario seed and a stable name (never ``hash()``)."""
    return random.Random(f"{seed}/{name}")


def _advertisement(rng: random.Random) -> str:
    parts = ["[class,eq,'STOCK']"]
    choice = rng.random()
    if choice < 0.3:
        parts.append(f"[symbol,eq,'{rng.choice(SYMBOLS)}']")
    elif choice < 0.5:
        parts.append(f"[symbol,str-prefix,'{rng.choice(SYMBOLS)[0]}']")
    else:
        parts.append("[symbol,isPresent,'']")
    low = rng.choice([0, 0, 10, 40])
    parts += [f"[price,>=,{low}]", f"[price,<,{low + rng.choice([50, 100, 200])}]", "[volume,>=,0]"]
    return ",".join(parts)


def _subscription(rng: random.Random) -> str:
    parts = ["[class,eq,'STOCK']"]
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.3:
            parts.append(f"[symbol,eq,'{rng.choice(SYMBOLS)}']")
        elif kind < 0.4:
            parts.append(f"[symbol,str-prefix,'{rng.choice(SYMBOLS)[:rng.randint(1, 2)]}']")
        elif kind < 0.45:
            parts.append(f"[symbol,neq,'{rng.choice(SYMBOLS)}']")
        elif kind < 0.5:
            parts.append(f"[symbol,str-contains,'{rng.choice('AMNO')}']")
        elif kind < 0.75:
            parts.append(f"[price,{rng.choice(['>', '>=', '<', '<='])},{rng.choice([5, 20, 35.5, 60, 120])}]")
        elif kind < 0.8:
            parts.append(f"[price,<>,{rng.choice([20, 60])}]")
        else:
            parts.append(f"[volume,>,{rng.choice([1000, 50000, 200000])}]")
    return ",".join(parts)


def _publication(rng: random.Random, adv: str) -> str:
    """A quote that usually conforms to ``adv`` (about 1 in 20 strays outside it)."""
    symbols = [s for s in SYMBOLS if f"'{s}'" in adv or f"prefix,'{s[0]}'" in adv] or SYMBOLS
    low = float(adv.split("[price,>=,")[1].split("]")[0])
    high = float(adv.split("[price,<,")[1].split("]")[0])
    price = round(rng.uniform(low, high), 2)
    if rng.random() < 0.05:
        price = high + 1
    volume = rng.choice([500, 20000, 100000, 1000000])
    return f"[class,'STOCK'],[symbol,'{rng.choice(symbols)}'],[price,{price}],[volume,{volume}]"


@generator("random_mix")
def random_mix(
    brokers: list[str],
    seed: int = 0,
    publishers: int = 4,
    subscribers: int = 12,
    operations: int = 400,
    spacing: float = 0.05,
    moves: bool = True,
    disjunctions: float = 0.0,
) -> list[dict]:
    """A stock-quote workload mixing every operation: advertise, subscribe, publish,
    unsubscribe, unadvertise and move, one operation every ``spacing`` seconds. A fraction
    ``disjunctions`` of the subscriptions are disjunctions of two or three.

    Used by the quick start and, with wide spacing, by the delivery-oracle tests.
    """
    if not 0 <= disjunctions <= 1:
        raise ValueError(f"disjunctions: expected a fraction between 0 and 1, got {disjunctions!r}")
    rng = rng_for(seed, "random_mix")
    records: list[dict] = []
    clock = [0.0]
    counter = [0]

    def emit(op: str, client: str, **fields) -> None:
        records.append({"t": round(clock[0], 6), "op": op, "client": client, **fields})
        clock[0] += spacing

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    located = {f"P{i}": rng.choice(brokers) for i in range(publishers)}
    located.update({f"S{i}": rng.choice(brokers) for i in range(subscribers)})
    advs: dict[str, dict[str, str]] = {p: {} for p in located if p.startswith("P")}
    subs: dict[str, list[str]] = {s: [] for s in located if s.startswith("S")}
    for publisher in advs:
        adv_id, text = fresh("A"), _advertisement(rng)
        advs[publisher][adv_id] = text
        emit("advertise", publisher, broker=located[publisher], id=adv_id, filter=text)
    weights = {"subscribe": 30, "publish": 45, "unsubscribe": 10, "advertise": 4, "unadvertise": 3,
               "move": 8 if moves else 0}
    for _ in range(operations):
        op = rng.choices(list(weights), list(weights.values()))[0]
        if op == "subscribe":
            client = rng.choice(sorted(subs))
            sub_id = fresh("S")
            subs[client].append(sub_id)
            disjuncts = rng.randint(2, 3) if disjunctions and rng.random() < disjunctions else 1
            text = " || ".join(_subscription(rng) for _ in range(disjuncts))
            emit("subscribe", client, broker=located[client], id=sub_id, filter=text)
        elif op == "publish":
            publisher = rng.choice(sorted(advs))
            if advs[publisher]:
                adv = advs[publisher][rng.choice(sorted(advs[publisher]))]
                emit("publish", publisher, id=fresh("M"), content=_publication(rng, adv))
        elif op == "unsubscribe":
            client = rng.choice(sorted(subs))
            if subs[client]:
                emit("unsubscribe", client, id=subs[client].pop(rng.randrange(len(subs[client]))))
        elif op == "advertise":
            publisher = rng.choice(sorted(advs))
            adv_id, text = fresh("A"), _advertisement(rng)
            advs[publisher][adv_id] = text
            emit("advertise", publisher, broker=located[publisher], id=adv_id, filter=text)
        elif op == "unadvertise":
            publisher = rng.choice(sorted(advs))
            if len(advs[publisher]) > 1:
                adv_id = rng.choice(sorted(advs[publisher]))
                del advs[publisher][adv_id]
                emit("unadvertise", publisher, id=adv_id)
        else:
            client = rng.choice(sorted(located))
            located[client] = rng.choice(brokers)
            emit("move", client, broker=located[client])
    return records


class SienaVocabulary:
    """The SIENA-style synthetic language: attribute names drawn from 1,000 words by a Zipf
    law, values among 100 numbers; subscriptions with 1-10 predicates (60% equality, 20% <,
    20% >), publications with 1-19 attributes.

    Weighted draws are ``random.choices`` written out (one ``rng.random()`` and a bisection
    each): the same draws from the same generator, without a list built per draw. The mobile
    rush hour makes tens of millions of them."""

    MAX_ATTRIBUTES = 19  # of a publication
    OPERATORS = ("=", "<", ">")
    OPERATOR_SHARES = (60, 80, 100)  # cumulative: 60% =, 20% <, 20% >

    def __init__(self, words: int = 1000, values: int = 100) -> None:
        self.words = [f"w{i}" for i in range(words)]
        self.cumulative = list(itertools.accumulate(1.0 / (i + 1) for i in range(words)))  # Zipf, summed once
        self.values = list(range(values))
        self._value_bits = len(self.values).bit_length()

    def _attributes(self, rng: random.Random, count: int) -> list[str]:
        words, cumulative = self.words, self.cumulative
        total, last, draw = cumulative[-1] + 0.0, len(words) - 1, rng.random
        chosen: list[str] = []
        while len(chosen) < count:
            word = words[bisect.bisect(cumulative, draw() * total, 0, last)]
            if word not in chosen:
                chosen.append(word)
        return chosen

    def _value(self, rng: random.Random) -> int:
        """``rng.choice(self.values)`` written out as ``random.Random`` draws it: bits of the
        count's length until they name a value."""
        values, bits, draw = self.values, self._value_bits, rng.getrandbits
        index = draw(bits)
        while index >= len(values):
            index = draw(bits)
        return values[index]

    def _operator(self, rng: random.Random) -> str:
        return self.OPERATORS[bisect.bisect(self.OPERATOR_SHARES, rng.random() * 100.0, 0, 2)]

    def subscription(self, rng: random.Random) -> str:
        predicates = []
        for attr in self._attributes(rng, rng.randint(1, 10)):
            predicates.append(f"[{attr},{self._operator(rng)},{self._value(rng)}]")
        return ",".join(predicates)

    def owned_subscriptions(self, rng: random.Random, count: int, roots: int, under: int = 1) -> list[str]:
        """``count`` subscriptions of which ``roots`` are roots that each own their covered set:
        every other subscription is one root's predicates, its bounds tightened, plus at least
        one more predicate (1-10 in all), and no other root covers it. Each root holds an
        equality on an (attribute, value) pair of its own, its key, and no subscription
        states another root's key, so only its own root covers it. The attributes, operators and
        values are drawn as ``subscription`` draws them. ``under`` (2 or 3): every other
        subscription takes the predicates of that many roots on distinct attributes instead,
        so it stays covered until all of them are gone (nested, overlapping sets)."""
        if not 1 <= roots <= count:
            raise ValueError(f"roots {roots}: expected 1 <= roots <= subscriptions ({count})")
        if not 1 <= under <= min(3, roots):
            raise ValueError(f"under {under}: expected 1 to 3 roots per subscription, and at most roots ({roots})")
        keys: dict[tuple[str, int], None] = {}  # an ordered set
        while len(keys) < roots:
            keys[(self._attributes(rng, 1)[0], self._value(rng))] = None
        root_predicates = []
        for attr, value in keys:
            root = [(attr, "=", value)]
            for other in self._other_attributes(rng, {attr}, rng.randint(0, 2)):
                root.append(self._keyless_predicate(rng, other, keys))
            root_predicates.append(root)
        texts = [_predicates_text(p) for p in root_predicates]
        for _ in range(count - roots):
            parents = [root_predicates[rng.randrange(roots)]] if under == 1 else _disjoint(rng, root_predicates, under)
            child = [(a, op, self._tightened(rng, op, v)) for root in parents for a, op, v in root]
            more = rng.randint(1, 10 - len(child))
            for attr in self._other_attributes(rng, {a for a, _, _ in child}, more):
                child.append(self._keyless_predicate(rng, attr, keys))
            texts.append(_predicates_text(child))
        return texts

    def _keyless_predicate(self, rng: random.Random, attr: str, keys) -> tuple[str, str, int]:
        """A predicate on ``attr`` that is no root's key (an equality on a key's value is drawn again)."""
        op, value = self._operator(rng), self._value(rng)
        while op == "=" and (attr, value) in keys:
            value = self._value(rng)
        return attr, op, value

    def _other_attributes(self, rng: random.Random, taken: set[str], count: int) -> list[str]:
        """``count`` more attributes drawn as ``_attributes`` draws them, none in ``taken``."""
        chosen: list[str] = []
        while len(chosen) < count:
            attr = self._attributes(rng, 1)[0]
            if attr not in taken and attr not in chosen:
                chosen.append(attr)
        return chosen

    def _tightened(self, rng: random.Random, op: str, value: int) -> int:
        """A bound at least as strict as ``op value``: ``<`` lower, ``>`` higher, ``=`` kept."""
        if op == "<":
            return rng.randint(self.values[0], value)
        if op == ">":
            return rng.randint(value, self.values[-1])
        return value

    def publication(self, rng: random.Random) -> Publication:
        """A publication, handed over parsed (``str()`` gives its text): the mobile rush hour
        makes a million, and formatting each to parse it again was a third of building it."""
        value = self._value
        return Publication(tuple((a, value(rng)) for a in self._attributes(rng, rng.randint(1, self.MAX_ATTRIBUTES))))

    def periodic_publications(self, rng: random.Random, publishers: int, begin: float, duration: float,
                              period_min: float, period_max: float):
        """(publisher, t, publication) of ``publishers`` publishers that each publish every
        ``rng.uniform(period_min, period_max)`` seconds from a random phase after ``begin``
        until ``duration``, publisher by publisher: the draws and publications of that loop
        written with ``publication``, made by a compiled kernel (``workloads.draws``)."""
        pairs = [(word, value) for word in self.words for value in self.values]
        for publisher, times, counts, codes in draws.periodic_publications(
                rng, self.cumulative, len(self.values), self.MAX_ATTRIBUTES, publishers, begin, duration,
                period_min, period_max):
            items = list(map(pairs.__getitem__, codes.tolist()))
            start = 0
            for p, t, count in zip(publisher.tolist(), times.tolist(), counts.tolist()):
                yield p, t, Publication(tuple(items[start:start + count]))
                start += count


def _disjoint(rng: random.Random, roots: list[list[tuple]], count: int) -> list[list[tuple]]:
    """``count`` distinct roots (predicate lists) drawn at random whose attributes do not meet."""
    for _ in range(1000):
        chosen = [roots[i] for i in rng.sample(range(len(roots)), count)]
        attributes = [a for root in chosen for a, _, _ in root]
        if len(attributes) == len(set(attributes)):
            return chosen
    raise ValueError(f"under {count}: no {count} roots with distinct attributes found in 1,000 draws")


def _predicates_text(predicates: list[tuple[str, str, int]]) -> str:
    return ",".join(f"[{a},{op},{v}]" for a, op, v in predicates)


def _client_brokers(graph, kind: str) -> list[str]:
    """Brokers whose ``clients`` attribute is ``kind``; every broker when none is marked."""
    marked = sorted(n for n in graph if graph.nodes[n].get("clients") == kind)
    return marked or sorted(graph)


def _edge_clusters(graph, brokers: list[str], rng: random.Random) -> dict[str, list[str]]:
    """Each subscriber broker's cluster: the 2-4 subscriber brokers sharing its parent (or
    chosen next to it in name order when they have no common parent)."""
    clusters = {}
    for broker in brokers:
        parents = set(graph.neighbors(broker))
        siblings = sorted(b for b in brokers if set(graph.neighbors(b)) & parents)
        if len(siblings) < 2:
            i = brokers.index(broker)
            siblings = brokers[max(0, i - 1): i + rng.randint(2, 3)]
        clusters[broker] = siblings[:4]
    return clusters


@generator("covering_degree")
def covering_degree(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    subscriptions: int = 30000,
    degree: int = 30,
    subscribe_interval: float = 1.5,
    publications: int = 21000,
    publish_interval: float = 0.4,
    unsubscriptions: int = 300,
    unsubscribe_interval: float = 0.5,
    unsubscribe_after: float = 60.0,
    match_share: float = 0.5,
    clustered: bool = False,
) -> list[dict]:
    """The unsubscription-burst workload ("Congestion Avoidance with Selective Filter
    Aggregation in Content-Based Routing Networks"): root subscriptions over disjoint price
    ranges, each covering exactly ``degree`` disjoint narrower ones, so removing a root
    uncovers ``degree`` subscriptions (the covering degree). Subscriber brokers issue their
    subscriptions ``subscribe_interval`` apart, roots first; publishers on the publisher
    brokers send one quote every ``publish_interval`` with prices over ``match_share`` of the
    roots' ranges; ``unsubscriptions`` roots are removed ``unsubscribe_interval`` apart,
    starting ``unsubscribe_after`` seconds after the last subscription. ``clustered`` keeps
    each root's subscriptions within its broker's cluster of 2-4 adjacent edge brokers.
    """
    _require(("degree", degree, degree >= 1, "at least 1"),
             ("subscriptions", subscriptions, subscriptions >= degree + 1, f"at least degree + 1 ({degree + 1})"))
    rng = rng_for(seed, "covering_degree")
    subscribers = _client_brokers(graph, "subscribers") if graph is not None else sorted(brokers)
    publishers = _client_brokers(graph, "publishers") if graph is not None else sorted(brokers)[:1]
    clusters = _edge_clusters(graph, subscribers, rng) if clustered and graph is not None else None
    roots = subscriptions // (degree + 1)
    width = 100.0  # each root owns [i * width, (i + 1) * width); its children split that range

    def range_filter(low: float, high: float) -> str:
        return f"[class,eq,'STOCK'],[price,>=,{low:g}],[price,<,{high:g}]"

    per_broker: dict[str, list[tuple[str, str]]] = {b: [] for b in subscribers}
    root_ids = []
    order = subscribers[:]
    rng.shuffle(order)
    for i in range(roots):
        home = order[i % len(order)]
        root_ids.append((f"R{i}", home))
        per_broker[home].insert(len([s for s in per_broker[home] if s[0].startswith("R")]),
                                (f"R{i}", range_filter(i * width, (i + 1) * width)))
        step = width / degree
        for j in range(degree):
            where = rng.choice(clusters[home]) if clusters else rng.choice(subscribers)
            per_broker[where].append((f"R{i}.{j}", range_filter(i * width + j * step, i * width + (j + 1) * step)))
    records = []
    for p, broker in enumerate(publishers):
        records.append({"t": 0.0, "op": "advertise", "client": f"pub{p}", "broker": broker, "id": f"A{p}",
                        "filter": range_filter(0, roots * width)})
    last_subscription = 0.0
    for broker in subscribers:
        for k, (sub_id, text) in enumerate(per_broker[broker]):
            t = 0.01 + k * subscribe_interval
            last_subscription = max(last_subscription, t)
            records.append({"t": t, "op": "subscribe", "client": f"c-{sub_id}", "broker": broker, "id": sub_id,
                            "filter": text})
    for m in range(publications):
        price = rng.uniform(0, match_share * roots * width)
        records.append({"t": 0.02 + m * publish_interval, "op": "publish", "client": f"pub{m % len(publishers)}",
                        "id": f"M{m}", "content": f"[class,'STOCK'],[price,{price:.2f}]"})
    chosen = rng.sample(root_ids, min(unsubscriptions, len(root_ids)))
    start = last_subscription + unsubscribe_after
    for u, (root, _) in enumerate(chosen):
        records.append({"t": start + u * unsubscribe_interval, "op": "unsubscribe", "client": f"c-{root}", "id": root})
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return records


@generator("siena")
def siena(
    brokers: list[str],
    seed: int = 0,
    subscriptions: int = 1000,
    publications: int = 1000,
    interval: float = 0.01,
) -> list[dict]:
    """SIENA-style synthetic workload (see ``SienaVocabulary``): one publisher per broker
    advertising every attribute, subscriptions then publications ``interval`` apart."""
    rng = rng_for(seed, "siena")
    language = SienaVocabulary()
    advertisement = ",".join(f"[{w},isPresent,0]" for w in language.words)
    records = [{"t": 0.0, "op": "advertise", "client": f"pub-{b}", "broker": b, "id": f"A-{b}",
                "filter": advertisement} for b in brokers]
    t = 0.0
    for i in range(subscriptions):
        t += interval
        records.append({"t": round(t, 6), "op": "subscribe", "client": f"sub{i}", "broker": rng.choice(brokers),
                        "id": f"S{i}", "filter": language.subscription(rng)})
    for i in range(publications):
        t += interval
        records.append({"t": round(t, 6), "op": "publish", "client": f"pub-{rng.choice(brokers)}", "id": f"M{i}",
                        "content": language.publication(rng)})
    return records


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
    _require(("commuters", commuters, 0 <= commuters <= 1, "a share in [0, 1]"),
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


@generator("workflow")
def workflow(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    engines_per_domain: int = 6,
    small: int = 80,
    medium: int = 80,
    large: int = 40,
    small_activities: int = 3,
    medium_activities: int = 10,
    large_activities: int = 26,
    monitored: float = 0.3,
    auditors: int = 4,
    trigger_min: float = 60.0,
    trigger_max: float = 180.0,
    activity_min: float = 0.5,
    activity_max: float = 2.0,
    audit_interval: float = 600.0,
    audit_length: float = 60.0,
    duration: float = 3600.0,
    subscriptions: str = "per_instance",
) -> list[dict]:
    """The distributed-workflow workload of the incremental-pruning paper, on an overlay of
    domains (the ``regions`` topology: its regions are the domains, ``engines_per_domain``
    execution engines on each domain's edge brokers, e.g. ``regions: 4, inner_per_region: 3,
    edges_per_inner: 2`` for four domains of ten brokers in three levels).

    Processes: ``small`` of ``small_activities`` activities on one engine, ``medium`` of
    ``medium_activities`` on engines of one domain, ``large`` of ``large_activities`` on
    engines anywhere. Each is deployed at the start: a trigger source (at its domain's core) advertises
    its triggers, its first activity's engine subscribes to them, and every engine advertises
    activity completions. Each process is triggered with its own period (``trigger_min`` to
    ``trigger_max`` s, a random phase); an instance's activities run one after another
    (``activity_min`` to ``activity_max`` s each): when it is triggered, the engine of every
    later activity subscribes to its predecessor's completion in this instance, and drops that
    subscription once its own activity has completed. A share ``monitored`` of the processes
    has a monitor client subscribing to all of its completions; ``auditors`` clients (one per
    domain in turn) subscribe to every trigger for ``audit_length`` s every
    ``audit_interval`` s (each with its own phase). This is ``subscriptions: per_instance``,
    the model earlier results use (bench/RESULTS.md).

    ``subscriptions: per_activity`` is the workflow as the paper's platform runs it: every
    control-flow message is a trigger, and each activity's engine subscribes once, at
    deployment, to the trigger that starts it (``[class,eq,'TRIGGER'],[process,eq,'Pp'],
    [activity,=,a]``) and keeps it (the paper does not say; PADRES's process engine deploys an
    agent per activity that subscribes to its predecessors' completions for the life of the
    process). An instance starts with the process's trigger for activity 0 (from its source
    at the domain's core); each activity, when done, publishes the trigger of the next one
    (the last one's, for activity n, reaches only monitors and auditors). A monitor subscribes
    to all of its process's triggers. An auditor's filter on every trigger then covers every
    activity subscription of the processes without a monitor and every monitor's: active
    covering withholds them while an auditor is there and forwards them all again when it
    leaves (the paper's burst)."""
    _check_workflow(monitored, (small, medium, large), (small_activities, medium_activities, large_activities),
                    (trigger_min, trigger_max), (activity_min, activity_max), audit_interval, audit_length)
    if subscriptions not in WORKFLOW_SUBSCRIPTIONS:
        raise ValueError(f"subscriptions: expected one of {', '.join(WORKFLOW_SUBSCRIPTIONS)}, got {subscriptions!r}")
    per_activity = subscriptions == "per_activity"
    rng = rng_for(seed, "workflow")
    domains = _workflow_domains(graph, brokers)
    engines = _workflow_engines(domains, engines_per_domain)
    published = "[class,eq,'TRIGGER'],[process,str-prefix,'P'],[instance,>=,0],[activity,>=,1]" if per_activity \
        else "[class,eq,'ACTIVITY'],[process,str-prefix,'P'],[instance,>=,0],[activity,>=,0]"
    records = [{"t": 0.0, "op": "advertise", "client": name, "broker": broker, "id": f"ADV-{name}", "filter": published}
               for name, broker in engines.everywhere]
    process_records = _per_activity_process if per_activity else _per_instance_process
    for p, domain, steps in _workflow_processes(rng, domains, engines, (small, medium, large),
                                                (small_activities, medium_activities, large_activities)):
        records += process_records(rng, p, steps, domains[domain][0], rng.random() < monitored, brokers,
                                   (trigger_min, trigger_max), (activity_min, activity_max), duration)
    records += _auditors(rng, domains, auditors, audit_interval, audit_length, duration)
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return records


WORKFLOW_SUBSCRIPTIONS = ("per_instance", "per_activity")


def _check_workflow(monitored: float, counts: tuple, activities: tuple, trigger_period: tuple,
                    activity_time: tuple, audit_interval: float, audit_length: float) -> None:
    if not 0 <= monitored <= 1:
        raise ValueError(f"monitored: expected a share in [0, 1], got {monitored!r}")
    sizes = ("small", "medium", "large")
    _require(*((size, count, count >= 0, "0 or more processes") for size, count in zip(sizes, counts)),
             *((f"{size}_activities", n, n >= 1, "at least 1") for size, n in zip(sizes, activities)),
             ("trigger_min", trigger_period[0], trigger_period[0] > 0, "a positive number of seconds"),
             ("trigger_max", trigger_period[1], trigger_period[1] >= trigger_period[0],
              f"at least trigger_min ({trigger_period[0]})"),
             ("activity_min", activity_time[0], activity_time[0] > 0, "a positive number of seconds"),
             ("activity_max", activity_time[1], activity_time[1] >= activity_time[0],
              f"at least activity_min ({activity_time[0]})"),
             ("audit_length", audit_length, 0 < audit_length <= audit_interval,
              f"a positive number of seconds, at most audit_interval ({audit_interval})"))


@dataclass(frozen=True)
class _Engines:
    per_domain: dict[int, list[tuple[str, str]]]  # domain -> its engines' (client, broker)
    everywhere: list[tuple[str, str]]


def _workflow_engines(domains: dict, engines_per_domain: int) -> _Engines:
    """``engines_per_domain`` engines on each domain's edge brokers in turn."""
    per_domain = {d: [(f"eng-{d}-{e}", edges[e % len(edges)]) for e in range(engines_per_domain)]
                  for d, (_, edges) in domains.items()}
    return _Engines(per_domain, [engine for d in sorted(per_domain) for engine in per_domain[d]])


def _workflow_processes(rng, domains: dict, engines: _Engines, counts: tuple, activities: tuple):
    """Per process, in turn: its number, domain and the (engine, broker) of its activities in
    order; ``counts`` small, medium and large processes of ``activities`` activities: a small
    one on one engine, a medium one on engines of its domain, a large one on engines anywhere.
    Drawn as the caller consumes them (the caller's own draws for a process come between)."""
    sizes = [(kind, length) for kind, (count, length) in enumerate(zip(counts, activities)) for _ in range(count)]
    for p, (kind, length) in enumerate(sizes):
        domain = rng.choice(sorted(domains))
        if kind == 0:
            steps = [rng.choice(engines.per_domain[domain])] * length
        else:
            pool = engines.per_domain[domain] if kind == 1 else engines.everywhere
            steps = [rng.choice(pool) for _ in range(length)]
        yield p, domain, steps


def _auditors(rng, domains: dict, auditors: int, audit_interval: float, audit_length: float,
              duration: float) -> list[dict]:
    """``auditors`` clients (at each domain's core in turn) subscribing to every trigger
    message for ``audit_length`` s every ``audit_interval`` s, each with its own phase."""
    cores = [core for core, _ in domains.values()]
    records = []
    for a in range(auditors):
        phase = rng.uniform(0, audit_interval)
        for r, t in enumerate(_periodic(phase, audit_interval, duration - audit_length)):
            fields = {"client": f"auditor{a}", "id": f"AUD{a}.{r}"}
            records.append({"t": round(t, 6), "op": "subscribe", "broker": cores[a % len(cores)],
                            "filter": "[class,eq,'TRIGGER']", **fields})
            records.append({"t": round(t + audit_length, 6), "op": "unsubscribe", **fields})
    return records


def _workflow_domains(graph, brokers: list[str]) -> dict[int, tuple[str, list[str]]]:
    """Per domain (the overlay's ``region``), its core and its edge brokers (without regions:
    one domain, the first broker as core and every broker as an edge)."""
    roles = {n: graph.nodes[n] for n in sorted(graph)} if graph is not None else {}
    if not any("region" in attrs for attrs in roles.values()):
        return {1: (sorted(brokers)[0], sorted(brokers))}
    cores = {attrs["region"]: name for name, attrs in roles.items() if attrs.get("role") == "core"}
    edges: dict[int, list[str]] = {}
    for name, attrs in roles.items():
        if attrs.get("role") == "edge":
            edges.setdefault(attrs["region"], []).append(name)
    return {domain: (cores[domain], edges[domain]) for domain in sorted(cores)}


def _periodic(phase: float, period: float, until: float) -> list[float]:
    return [phase + k * period for k in range(max(0, math.ceil((until - phase) / period)))]


def _per_instance_process(rng, p: int, steps: list, core: str, monitored: bool, brokers: list[str],
                          trigger_period: tuple, activity_time: tuple, duration: float) -> list[dict]:
    """The records of process ``P<p>``: its deployment and every instance that completes by
    ``duration``; ``steps`` are the (engine, broker) of its activities in order."""
    source, first = f"trg-P{p}", steps[0]
    records = [
        {"t": 0.0, "op": "advertise", "client": source, "broker": core, "id": f"ADV-{source}",
         "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[instance,>=,0]"},
        {"t": 0.5, "op": "subscribe", "client": first[0], "broker": first[1], "id": f"TRG-P{p}",
         "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}']"},
    ]
    if monitored:
        records.append({"t": 0.5, "op": "subscribe", "client": f"mon-P{p}", "broker": rng.choice(brokers),
                        "id": f"MON-P{p}", "filter": f"[class,eq,'ACTIVITY'],[process,eq,'P{p}']"})
    for instance, t, done in _instances(rng, len(steps), trigger_period, activity_time, duration):
        records.append({"t": round(t, 6), "op": "publish", "client": source, "id": f"T{p}.{instance}",
                        "content": f"[class,'TRIGGER'],[process,'P{p}'],[instance,{instance}]"})
        for a, (engine, _) in enumerate(steps):
            if a > 0:
                wait = {"client": engine, "id": f"W{p}.{instance}.{a}"}
                records.append({"t": round(t + 0.1, 6), "op": "subscribe", **wait, "filter": (
                    f"[class,eq,'ACTIVITY'],[process,eq,'P{p}'],[instance,=,{instance}],[activity,=,{a - 1}]")})
                records.append({"t": round(t + done[a], 6), "op": "unsubscribe", **wait})
            records.append({"t": round(t + done[a], 6), "op": "publish", "client": engine,
                            "id": f"E{p}.{instance}.{a}",
                            "content": f"[class,'ACTIVITY'],[process,'P{p}'],[instance,{instance}],[activity,{a}]"})
    return records


def _instances(rng, activities: int, trigger_period: tuple, activity_time: tuple, duration: float):
    """A process's instances that complete by ``duration``: (instance, trigger time, when each
    activity is done after it); the process's period and phase are drawn first."""
    period = rng.uniform(*trigger_period)
    t = 1.0 + rng.uniform(0, period)
    instance = 0
    while True:
        done = list(itertools.accumulate(rng.uniform(*activity_time) for _ in range(activities)))
        if t + done[-1] >= duration:
            return
        yield instance, t, done
        t += period
        instance += 1


def _per_activity_process(rng, p: int, steps: list, core: str, monitored: bool, brokers: list[str],
                          trigger_period: tuple, activity_time: tuple, duration: float) -> list[dict]:
    """The records of process ``P<p>`` with ``subscriptions: per_activity``: its deployment
    (advertisement, one subscription per activity, the monitor's) and every instance that
    completes by ``duration``; ``steps`` are the (engine, broker) of its activities in order."""
    source = f"trg-P{p}"
    records = [{"t": 0.0, "op": "advertise", "client": source, "broker": core, "id": f"ADV-{source}",
                "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[instance,>=,0],[activity,=,0]"}]
    for a, (engine, broker) in enumerate(steps):
        records.append({"t": 0.5, "op": "subscribe", "client": engine, "broker": broker, "id": f"ACT-P{p}.{a}",
                        "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[activity,=,{a}]"})
    if monitored:
        records.append({"t": 0.5, "op": "subscribe", "client": f"mon-P{p}", "broker": rng.choice(brokers),
                        "id": f"MON-P{p}", "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}']"})
    for instance, t, done in _instances(rng, len(steps), trigger_period, activity_time, duration):
        records.append(_trigger(t, source, p, instance, 0))
        for a, (engine, _) in enumerate(steps):
            records.append(_trigger(t + done[a], engine, p, instance, a + 1))
    return records


def _trigger(t: float, client: str, p: int, instance: int, activity: int) -> dict:
    return {"t": round(t, 6), "op": "publish", "client": client, "id": f"T{p}.{instance}.{activity}",
            "content": f"[class,'TRIGGER'],[process,'P{p}'],[instance,{instance}],[activity,{activity}]"}


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
    way a range is as wide, so the matching share is the same."""
    _require(("match_share", match_share, 0 < match_share <= 1, "a share in (0, 1]"),
             ("groups", groups, groups >= 1, "at least 1"),
             ("publishers", publishers, publishers >= groups, f"at least groups ({groups})"),
             ("attributes", attributes, attributes >= 1, "at least 1"))
    if clients not in ("all", "leaves"):
        raise ValueError(f"clients: expected 'all' or 'leaves', got {clients!r}")
    _require(("publish_interval", publish_interval, publish_interval > 0, "a positive number of seconds"),
             ("high_rate_interval", high_rate_interval, high_rate_interval > 0, "a positive number of seconds"))
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
    for i in range(subscriptions):
        g = rng.choices(range(groups), popularity)[0]
        if interested is None:
            low, attr = rng.uniform(0, 100 - width), rng.randrange(attributes)  # in the draw order of old runs
            broker = rng.choice(brokers)
        else:
            broker, (attr, start) = rng.choice(interested[g])
            low = min(max(start + rng.uniform(-spread, spread) * width, 0.0), 100 - width)
        low = round(low, 2)
        records.append({"t": round(t, 6), "op": "subscribe", "client": f"S{i}", "broker": broker, "id": f"S{i}",
                        "filter": f"[class,eq,'G{g}'],[a{attr},>=,{low}],[a{attr},<,{round(low + width, 2)}]"})
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


KEYWORD_DATASETS = {"Localized1": 2.0, "Localized2": 15.0, "Uniform": 100.0}


@generator("keywords")
def keywords(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    dataset: str = "Localized1",
    keywords: int = 1000,
    subscribers: int = 10,
    publishers: int = 100,
    documents: int = 2000,
    keywords_per_document: int = 3,
    subscribe_interval: float = 0.001,
    publish_interval: float = 0.05,
    keywords_per_subscription: int = 1,
) -> list[dict]:
    """The content-aware multi-tree paper's keyword workload: per keyword a neighbourhood of x%
    of the brokers around a random root (the ``dataset``: Localized1 x = 2, Localized2 x = 15,
    Uniform x = 100; breadth first, neighbours in name order), 1 to ``subscribers``
    subscriptions ``[k<i>,isPresent,0]`` at brokers drawn from it. Each document comes from a
    random one of ``publishers`` publisher brokers and names 1 to ``keywords_per_document``
    keywords drawn from those whose neighbourhood holds its publisher (the keywords of nearby
    subscribers; any keyword where none does). Subscriptions come first, then documents.
    With ``keywords_per_subscription`` above 1, a subscription is a disjunction of its keyword
    and up to that many minus one others whose neighbourhood holds its broker
    (``[k3,isPresent,0] || [k8,isPresent,0]``)."""
    if dataset not in KEYWORD_DATASETS:
        raise ValueError(f"dataset: expected one of {', '.join(KEYWORD_DATASETS)}, got {dataset!r}")
    _require(*((name, value, value >= 1, "at least 1") for name, value in (
        ("keywords", keywords), ("subscribers", subscribers), ("publishers", publishers), ("documents", documents),
        ("keywords_per_document", keywords_per_document), ("keywords_per_subscription", keywords_per_subscription))))
    rng = rng_for(seed, "keywords")
    size = max(1, math.ceil(len(brokers) * KEYWORD_DATASETS[dataset] / 100))
    near: dict[str, list[int]] = {b: [] for b in brokers}
    records, keyword_of = [], []  # keyword_of: each subscription's keyword
    t = 0.0
    for k in range(keywords):
        hood = _neighbourhood(graph, brokers, rng.choice(brokers), size)
        for b in hood:
            near[b].append(k)
        for j, broker in enumerate(rng.sample(hood, min(rng.randint(1, subscribers), len(hood)))):
            records.append({"t": round(t, 6), "op": "subscribe", "client": f"S{k}-{j}", "broker": broker,
                            "id": f"K{k}-{j}", "filter": f"[k{k},isPresent,0]"})
            keyword_of.append(k)
            t += subscribe_interval
    if keywords_per_subscription > 1:
        widen = rng_for(seed, "keywords/disjunctions")  # a generator of its own: the rest stays as it is
        for record, k in zip(records, keyword_of):
            others = [other for other in near[record["broker"]] if other != k]
            extra = widen.sample(others, min(widen.randint(0, keywords_per_subscription - 1), len(others)))
            record["filter"] = " || ".join(f"[k{i},isPresent,0]" for i in [k, *sorted(extra)])
    every = ",".join(f"[k{k},isPresent,0]" for k in range(keywords))
    places = sorted(rng.sample(brokers, min(publishers, len(brokers))))
    for i, broker in enumerate(places):
        records.append({"t": round(t, 6), "op": "advertise", "client": f"P{i}", "broker": broker, "id": f"A{i}",
                        "filter": every})
    t += 1.0
    for m in range(documents):
        i = rng.randrange(len(places))
        candidates = near[places[i]] or list(range(keywords))
        chosen = sorted(rng.sample(candidates, min(rng.randint(1, keywords_per_document), len(candidates))))
        records.append({"t": round(t, 6), "op": "publish", "client": f"P{i}", "id": f"D{m}",
                        "content": ",".join(f"[k{k},1]" for k in chosen)})
        t += publish_interval
    return records


@generator("keywords_paper")
def keywords_paper(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    dataset: str = "Localized1",
    keywords: int = 1000,
    subscribers: int = 10,
    documents: int = 10000,
    nearby: int = 3,
    keywords_per_document: int = 3,
    subscribe_interval: float = 0.001,
    publish_interval: float = 0.05,
    publishers: int = 0,
    subscriptions: str = "per_broker",
) -> list[dict]:
    """The multi-tree paper's datasets as its text gives them (SETUPS.md, paper 003): per
    keyword a random root and its closest x% of the brokers (breadth first, neighbours in name
    order; x as in ``keywords``), of which min(``subscribers``, x% of the brokers) drawn at
    random get the keyword (the paper's "at most 10", read as its stated average of about ten
    subscribers per keyword). Every broker holding a keyword has one subscription, the
    disjunction of its keywords (``[k3,isPresent,0] || [k8,isPresent,0]``), so a subscription
    group is a broker. Each of ``documents`` documents names 1 to ``keywords_per_document``
    keywords drawn from the subscriptions of the ``nearby`` brokers with a subscription
    closest to a random broker (breadth first), and comes from a publisher broker drawn at
    random on its own (not from those brokers). The paper states neither size, and its "about 5
    documents per keyword" cannot hold with 10,000 documents and 1,000 keywords (it would take
    half a keyword per document): ours have about 20.

    Two variants that are not the paper's, to tell what its results depend on:
    ``publishers: N`` draws each document's publisher from N fixed brokers instead of all, and
    ``subscriptions: per_keyword`` gives every (keyword, broker) its own subscription
    ``[k3,isPresent,0]`` (then a group is a keyword, not a broker)."""
    if dataset not in KEYWORD_DATASETS:
        raise ValueError(f"dataset: expected one of {', '.join(KEYWORD_DATASETS)}, got {dataset!r}")
    _require(*((name, value, value >= 1, "at least 1") for name, value in (
        ("keywords", keywords), ("subscribers", subscribers), ("documents", documents), ("nearby", nearby),
        ("keywords_per_document", keywords_per_document))))
    if publishers < 0:
        raise ValueError(f"publishers: expected 0 (every broker) or a count, got {publishers}")
    if subscriptions not in ("per_broker", "per_keyword"):
        raise ValueError(f"subscriptions: expected per_broker or per_keyword, got {subscriptions!r}")
    rng = rng_for(seed, "keywords_paper")
    size = max(1, math.ceil(len(brokers) * KEYWORD_DATASETS[dataset] / 100))
    held: dict[str, list[int]] = {}
    for k in range(keywords):
        hood = _neighbourhood(graph, brokers, rng.choice(brokers), size)
        for broker in rng.sample(hood, min(subscribers, len(hood))):
            held.setdefault(broker, []).append(k)
    records, t = [], 0.0
    for broker in sorted(held):
        filters = [" || ".join(f"[k{k},isPresent,0]" for k in held[broker])]
        if subscriptions == "per_keyword":
            filters = [f"[k{k},isPresent,0]" for k in held[broker]]
        for i, text in enumerate(filters):
            name = f"S-{broker}" if len(filters) == 1 else f"S-{broker}-{i}"
            records.append({"t": round(t, 6), "op": "subscribe", "client": name, "broker": broker, "id": name,
                            "filter": text})
            t += subscribe_interval
    places = sorted(rng.sample(brokers, min(publishers, len(brokers)))) if publishers else brokers
    draws = []
    for _ in range(documents):
        origin = rng.choice(brokers)
        around = _breadth_first(graph, origin) if graph is not None else iter(sorted(brokers))
        holders = itertools.islice((b for b in around if b in held), nearby)
        candidates = sorted({k for b in holders for k in held[b]})
        chosen = sorted(rng.sample(candidates, min(rng.randint(1, keywords_per_document), len(candidates))))
        draws.append((rng.choice(places), chosen))
    every = ",".join(f"[k{k},isPresent,0]" for k in range(keywords))
    for broker in sorted({publisher for publisher, _ in draws}):
        records.append({"t": round(t, 6), "op": "advertise", "client": f"P-{broker}", "broker": broker,
                        "id": f"A-{broker}", "filter": every})
    t += 1.0
    for m, (publisher, chosen) in enumerate(draws):
        records.append({"t": round(t, 6), "op": "publish", "client": f"P-{publisher}", "id": f"D{m}",
                        "content": ",".join(f"[k{k},1]" for k in chosen)})
        t += publish_interval
    return records


def _neighbourhood(graph, brokers: list[str], root: str, size: int) -> list[str]:
    """The first ``size`` brokers breadth first from ``root`` (all brokers, in name order,
    without a graph)."""
    if graph is None:
        return sorted(brokers)[:size]
    return list(itertools.islice(_breadth_first(graph, root), size))


def _breadth_first(graph, root: str):
    """The brokers in breadth-first order from ``root``, neighbours in name order."""
    seen, frontier = {root}, [root]
    yield root
    while frontier:
        following = []
        for node in frontier:
            for other in sorted(graph.neighbors(node)):
                if other not in seen:
                    seen.add(other)
                    following.append(other)
                    yield other
        frontier = following


from . import stockquotes  # noqa: E402,F401  (registers stock_quotes)
