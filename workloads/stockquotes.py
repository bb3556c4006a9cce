"""The stock-quote workload of the publisher-relocation paper ("Publisher Placement Algorithms
in Content-based Publish/Subscribe"): one publisher per symbol replaying daily quotes.

Quotes come from a directory of files in the PADRES publication syntax, one per symbol, newest
first (``quotes``: the reference data of ../shared/data/stockquotes is such a directory), or,
when no directory is given, from a seeded random walk per symbol. Each quote gains the
paper's derived attributes ``openClose%Diff`` (|close - open| / open), ``highLow%Diff``
((high - low) / low), ``closeEqualsLow`` and ``closeEqualsHigh`` ('true' or 'false').

Subscribers are rated by the share of their publisher's quotes they receive: low (about 10%:
``highLow%Diff`` above a threshold near the symbol's 90th percentile), medium (about 50%:
``volume`` above a threshold near its median) and high (every quote). ``distribution``:
``random`` rates them 70/25/5 and spreads them over ``subscriber_brokers`` (X) random
brokers (0: every broker); ``enterprise`` rates them 95 low / 5 high and puts every
high-rated subscriber on one broker and, as the paper places them, the low-rated ones on the
other X - 1 (with X = 0, our earlier placement that earlier results use: low-rated ones on
any broker, that one included).
"""
from __future__ import annotations

import math
import random
import re
from pathlib import Path

from protocols.language import Publication

from .registry import generator, rng_for

RATINGS = {"random": (("low", 0.70), ("medium", 0.25), ("high", 0.05)),
           "enterprise": (("low", 0.95), ("high", 0.05))}
_PAIR = re.compile(r"\[([^,\]]+),([^\]]*)\]")
_FIELDS = ("open", "high", "low", "close", "volume")


@generator("stock_quotes")
def stock_quotes(
    brokers: list[str],
    seed: int = 0,
    base=None,
    quotes: str = "",
    symbols: int = 40,
    subscribers: int = 1000,
    distribution: str = "random",
    subscriber_brokers: int = 0,
    publications: int = 200,
    publish_interval: float = 1.0,
    start: float = 5.0,
) -> list[dict]:
    """Advertisements at 0, subscriptions over [0.5, ``start`` - 0.5), then ``publications``
    quotes per publisher, oldest first, ``publish_interval`` apart (each publisher at its own
    seeded phase)."""
    if distribution not in RATINGS:
        raise ValueError(f"distribution: expected one of {', '.join(RATINGS)}, got {distribution!r}")
    if symbols < 1 or subscribers < 0 or publications < 1 or publish_interval <= 0 or start < 1:
        raise ValueError("need symbols >= 1, subscribers >= 0, publications >= 1, publish_interval > 0, start >= 1")
    if not 0 <= subscriber_brokers <= len(brokers):
        raise ValueError(f"subscriber_brokers: expected 0 to {len(brokers)}, got {subscriber_brokers}")
    rng = rng_for(seed, "stock_quotes")
    streams = _streams(quotes, base, symbols, publications, rng)
    places = sorted(rng.sample(brokers, subscriber_brokers)) if subscriber_brokers else list(brokers)
    records = []
    for symbol in streams:
        records.append({"t": 0.0, "op": "advertise", "client": f"P-{symbol}", "broker": rng.choice(brokers),
                        "id": f"A-{symbol}", "filter": _advertisement(symbol)})
    records += _subscriptions(streams, subscribers, distribution, places, rng, start, subscriber_brokers > 1)
    for symbol, stream in streams.items():
        phase = rng.uniform(0, publish_interval)
        for k, quote in enumerate(stream):
            records.append({"t": round(start + phase + k * publish_interval, 6), "op": "publish",
                            "client": f"P-{symbol}", "id": f"{symbol}-{k}", "content": _publication(symbol, quote)})
    return sorted(records, key=lambda r: r["t"])


def _streams(directory: str, base, symbols: int, publications: int, rng: random.Random) -> dict[str, list[dict]]:
    """Per symbol (sorted), ``publications`` quotes oldest first, each with its derived values."""
    if directory:
        path = Path(base or ".") / directory
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else []
        if not files:
            raise ValueError(f"quotes: {path} is not a directory of quote files")
        chosen = sorted(rng.sample(files, min(symbols, len(files))))
        raw = {file.name: _read_quotes(file)[::-1] for file in chosen}
    else:
        raw = {f"S{i:03d}": _random_walk(rng, publications) for i in range(symbols)}
    streams = {}
    for symbol, quotes in sorted(raw.items()):
        if not quotes:
            raise ValueError(f"quotes: no quotes for symbol {symbol}")
        streams[symbol] = [_derived(quotes[k % len(quotes)]) for k in range(publications)]
    return streams


def _read_quotes(file: Path) -> list[dict]:
    quotes = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        values = dict(_PAIR.findall(line))
        try:
            quote = {name: float(values[name]) for name in _FIELDS}
        except (KeyError, ValueError):
            raise ValueError(f"quotes: {file}:{number}: expected open, high, low, close and volume") from None
        quote["date"] = values.get("date", "''").strip("'")
        quotes.append(quote)
    return quotes


def _random_walk(rng: random.Random, days: int) -> list[dict]:
    close = rng.uniform(5, 100)
    quotes = []
    for day in range(days):
        open_ = close * (1 + rng.gauss(0, 0.005))
        close = max(open_ * (1 + rng.gauss(0, 0.02)), 0.5)
        high = max(open_, close) * (1 + abs(rng.gauss(0, 0.01)))
        low = min(open_, close) * (1 - abs(rng.gauss(0, 0.01)))
        volume = round(math.exp(rng.gauss(14, 0.6)))
        quotes.append({"open": round(open_, 2), "high": round(high, 2), "low": round(low, 2),
                       "close": round(close, 2), "volume": volume, "date": f"day{day}"})
    return quotes


def _derived(quote: dict) -> dict:
    quote = dict(quote)
    quote["openClose%Diff"] = round(abs(quote["close"] - quote["open"]) / quote["open"], 4) if quote["open"] else 0.0
    quote["highLow%Diff"] = round((quote["high"] - quote["low"]) / quote["low"], 4) if quote["low"] else 0.0
    quote["closeEqualsLow"] = "true" if quote["close"] == quote["low"] else "false"
    quote["closeEqualsHigh"] = "true" if quote["close"] == quote["high"] else "false"
    return quote


def _advertisement(symbol: str) -> str:
    numbers = ",".join(f"[{name},>=,0]" for name in (*_FIELDS, "openClose%Diff", "highLow%Diff"))
    strings = ",".join(f"[{name},isPresent,'']" for name in ("date", "closeEqualsLow", "closeEqualsHigh"))
    return f"[class,eq,'STOCK'],[symbol,eq,'{symbol}'],{numbers},{strings}"


def _publication(symbol: str, quote: dict) -> Publication:
    """The quote as a parsed publication (handed to the trace as it is: hundreds of thousands
    of quotes are not worth printing and parsing again); its text is ``str()`` of it."""
    numbers = tuple((name, _number(quote[name])) for name in (*_FIELDS, "openClose%Diff", "highLow%Diff"))
    strings = tuple((name, str(quote[name])) for name in ("date", "closeEqualsLow", "closeEqualsHigh"))
    return Publication((("class", "STOCK"), ("symbol", symbol)) + numbers + strings)


def _number(value: float) -> int | float:
    """A whole number as an integer, else the value to six decimals (as quotes are printed)."""
    return int(value) if float(value).is_integer() else float(f"{value:.6f}")


def _subscriptions(streams, count: int, distribution: str, places: list[str], rng: random.Random,
                   start: float, apart: bool) -> list[dict]:
    """``apart``: enterprise's other subscribers avoid the broker of the high-rated ones."""
    ratings, shares = zip(*RATINGS[distribution])
    gathering = rng.choice(places)  # enterprise: where every high-rated subscriber is
    elsewhere = [b for b in places if b != gathering] if distribution == "enterprise" and apart else places
    symbols = list(streams)
    records = []
    for i in range(count):
        symbol, rating = rng.choice(symbols), rng.choices(ratings, shares)[0]
        stream = streams[symbol]
        broker = gathering if distribution == "enterprise" and rating == "high" else rng.choice(elsewhere)
        head = f"[class,=,'STOCK'],[symbol,=,'{symbol}']"
        if rating == "low":
            text = f"{head},[highLow%Diff,>,{_quantile([q['highLow%Diff'] for q in stream], rng.uniform(0.85, 0.95))}]"
        elif rating == "medium":
            text = f"{head},[volume,>,{_quantile([q['volume'] for q in stream], rng.uniform(0.4, 0.6))}]"
        else:
            text = head
        t = 0.5 + (start - 1.0) * i / max(count, 1)
        records.append({"t": round(t, 6), "op": "subscribe", "client": f"S{i}", "broker": broker,
                        "id": f"S{i}", "filter": text})
    return records


def _quantile(values: list[float], q: float) -> str:
    ordered = sorted(values)
    return _number(ordered[min(int(q * len(ordered)), len(ordered) - 1)])
