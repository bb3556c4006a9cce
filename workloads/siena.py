"""SIENA-style subscriptions over a shared vocabulary (independent, or roots that own their
covered sets), and the ``siena`` generator."""
from __future__ import annotations

import bisect
import itertools
import random

from protocols.language import Publication

from . import draws
from .registry import generator, rng_for


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
