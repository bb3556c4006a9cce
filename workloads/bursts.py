"""``covering_degree``: the unsubscription-burst workload of the covering papers (roots that
each cover a set of subscriptions, removed one after another while publications flow)."""
from __future__ import annotations

import math
import random

from .registry import generator, require, rng_for

PROBE_PREFIX = "probe-"  # ids and clients of the delay probes; analysis reads probes by this prefix


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
    probes: int = 0,
    probe_after: float = 600.0,
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

    ``probes`` are the paper's delay probes: the stream's first ``probes`` publications due
    ``probe_after`` seconds or more after the last unsubscription are issued instead as
    quotes priced above every root's range (same times, same publishers), which one subscriber
    at every edge broker receives: brokers match them against the same table as any quote. The
    stream's random draws do not change, so a run with probes is the run without them with those
    publications relabelled and repriced.
    """
    require(("degree", degree, degree >= 1, "at least 1"),
             ("subscriptions", subscriptions, subscriptions >= degree + 1, f"at least degree + 1 ({degree + 1})"),
             ("probes", probes, probes >= 0, "at least 0"))
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
    prices = [rng.uniform(0, match_share * roots * width) for _ in range(publications)]
    chosen = rng.sample(root_ids, min(unsubscriptions, len(root_ids)))
    start = last_subscription + unsubscribe_after
    probe_price = roots * width  # above every root's range: the probes match no subscription of the workload
    probe_start = start + max(len(chosen) - 1, 0) * unsubscribe_interval + probe_after
    first_probe = max(0, math.ceil((probe_start - 0.02) / publish_interval - 1e-9))
    require(("probes", probes, probes == 0 or first_probe + probes <= publications,
             f"at most the {max(publications - first_probe, 0)} publications due {probe_after:g} s after the "
             "last unsubscription"))
    for m, price in enumerate(prices):
        p = m % len(publishers)
        t = 0.02 + m * publish_interval
        if first_probe <= m < first_probe + probes:
            records.append({"t": t, "op": "publish", "client": f"{PROBE_PREFIX}pub{p}",
                            "id": f"{PROBE_PREFIX}{m - first_probe}",
                            "content": f"[class,'STOCK'],[price,{probe_price + width / 2:g}]"})
        else:
            records.append({"t": t, "op": "publish", "client": f"pub{p}", "id": f"M{m}",
                            "content": f"[class,'STOCK'],[price,{price:.2f}]"})
    for u, (root, _) in enumerate(chosen):
        records.append({"t": start + u * unsubscribe_interval, "op": "unsubscribe", "client": f"c-{root}", "id": root})
    if probes:
        records.extend(_probe_clients(graph, brokers, publishers, probe_price))
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return records


def _probe_clients(graph, brokers: list[str], publishers: list[str], price: float) -> list[dict]:
    """The probes' advertisements (one per publisher broker, at t=0) and their subscribers, one
    at every edge broker (every subscriber broker where the overlay marks no roles), for quotes
    priced from ``price``."""
    if graph is None:
        edges = sorted(brokers)
    else:
        edges = sorted(n for n in graph if graph.nodes[n].get("role") == "edge") or _client_brokers(graph, "subscribers")
    probe_filter = f"[class,eq,'STOCK'],[price,>=,{price:g}]"
    records = [{"t": 0.0, "op": "advertise", "client": f"{PROBE_PREFIX}pub{p}", "broker": broker,
                "id": f"{PROBE_PREFIX}A{p}", "filter": probe_filter} for p, broker in enumerate(publishers)]
    records += [{"t": 0.005, "op": "subscribe", "client": f"{PROBE_PREFIX}{broker}", "broker": broker,
                 "id": f"{PROBE_PREFIX}{broker}", "filter": probe_filter} for broker in edges]
    return records
