"""The multi-tree paper's keyword datasets: ``keywords`` (our model of Localized1, Localized2
and Uniform) and ``keywords_paper`` (as the paper builds them)."""
from __future__ import annotations

import itertools
import math

from .registry import generator, require, rng_for

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
    require(*((name, value, value >= 1, "at least 1") for name, value in (
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
    publisher: str = "anywhere",
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
    ``[k3,isPresent,0]`` (then a group is a keyword, not a broker).

    A third reading of the paper's "we sampled a small subset of nearby nodes ... We also
    randomly selected a publisher node": ``publisher: nearby`` draws each document's publisher
    from the nearby brokers its keywords come from (``anywhere``, the default, from every
    broker)."""
    if dataset not in KEYWORD_DATASETS:
        raise ValueError(f"dataset: expected one of {', '.join(KEYWORD_DATASETS)}, got {dataset!r}")
    require(*((name, value, value >= 1, "at least 1") for name, value in (
        ("keywords", keywords), ("subscribers", subscribers), ("documents", documents), ("nearby", nearby),
        ("keywords_per_document", keywords_per_document))))
    if publishers < 0:
        raise ValueError(f"publishers: expected 0 (every broker) or a count, got {publishers}")
    if subscriptions not in ("per_broker", "per_keyword"):
        raise ValueError(f"subscriptions: expected per_broker or per_keyword, got {subscriptions!r}")
    if publisher not in ("anywhere", "nearby"):
        raise ValueError(f"publisher: expected anywhere or nearby, got {publisher!r}")
    if publisher == "nearby" and publishers:
        raise ValueError("publishers: fixed publisher brokers cannot be combined with publisher: nearby")
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
        holders = list(itertools.islice((b for b in around if b in held), nearby))
        candidates = sorted({k for b in holders for k in held[b]})
        chosen = sorted(rng.sample(candidates, min(rng.randint(1, keywords_per_document), len(candidates))))
        draws.append((rng.choice(holders if publisher == "nearby" else places), chosen))
    every = ",".join(f"[k{k},isPresent,0]" for k in range(keywords))
    for broker in sorted({place for place, _ in draws}):
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
