"""``random_mix``: a stock-quote workload mixing every operation, the quick start's."""
from __future__ import annotations

import random

from .registry import generator, rng_for

SYMBOLS = ["AAPL", "AMAT", "AMZN", "CSCO", "DELL", "IBM", "INTC", "MSFT", "ORCL", "YHOO"]


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
