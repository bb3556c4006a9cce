"""Fitting the ``padres`` cost profile to PADRES's measured per-message processing times.

The original system measured, with 49 brokers, 42,000 subscriptions and 200,000 publications
(no unsubscriptions), these average times per message in ms (active / lazy / no covering):
subscription matching 0.81 / 1.6 / 1.6, subscription covering 12 / 27 / 0, unsubscription
1.4 / - / -, publication 3.0 / 6.2 / 7.9. ``reference_work`` replays that workload (the
covering-degree workload on the 49-broker enterprise overlay) through the real brokers, in
process and without time, and averages the index's work counters per message kind; ``fit``
then chooses base costs and coefficients so that base + coefficients x average work meets
the targets. Because cost grows with the work counted (table sizes, comparisons), the same
profile makes bigger tables slower, as in the papers. Covering a subscription is charged by
the cells covering queries compare (``cover_predicates``); matching it, by the entries
already in the tables it joins (``insert_entries``): PADRES keeps its routing tables in a
Rete network, where adding a subscription costs more as tables grow, which is why its
subscription matching took 0.81 ms with active covering (small tables) and 1.6 ms without.
Matching a subscription against the advertisements compares the same few cells in every
mode, so it cannot tell the modes apart.
"""
from __future__ import annotations

import numpy as np

import topologies
from actors.pump import SyncPump
from protocols.index import Work
from protocols.stack import make_broker
from workloads.generators import covering_degree

MODES = ("active", "lazy", "none")
TARGETS_MS = {
    "active": {"sub matching": 0.81, "sub covering": 12.0, "unsub": 1.4, "pub": 3.0},
    "lazy": {"sub matching": 1.6, "sub covering": 27.0, "unsub": None, "pub": 6.2},
    "none": {"sub matching": 1.6, "sub covering": 0.0, "unsub": None, "pub": 7.9},
}
MATCH = "match_predicates"  # cells compared by matching queries
COVER = "cover_predicates"  # cells compared by covering queries
INSERT = "insert_entries"  # entries already in the tables that new entries join


class _Replay(SyncPump):
    """Records, per handled message, its kind and the work counters it cost."""

    def __init__(self, brokers: dict) -> None:
        super().__init__(brokers)
        self.work: dict[str, list[dict]] = {}

    def handle(self, destination, sender, message) -> None:
        work = self.brokers[destination].work
        work.reset()
        super().handle(destination, sender, message)
        self.work.setdefault(message.kind, []).append(work.as_dict())


def reference_records(subscriptions: int = 42_000, publications: int = 8_000, seed: int = 0):
    graph = topologies.enterprise49()
    records = covering_degree(sorted(graph), graph, seed=seed, subscriptions=subscriptions,
                              publications=publications, unsubscriptions=0)
    return graph, records


def reference_work(covering: str, subscriptions: int = 42_000, publications: int = 8_000,
                   seed: int = 0) -> dict[str, dict[str, float]]:
    """Average work counters per handled message, per kind, for one covering mode."""
    graph, records = reference_records(subscriptions, publications, seed)
    brokers = {n: make_broker(n, graph.neighbors(n), {"covering": covering}) for n in sorted(graph)}
    replay = _Replay(brokers).run(records, "reference")
    counters = list(Work().as_dict())
    return {kind: {c: float(np.mean([w[c] for w in rows])) for c in counters} | {"messages": len(rows)}
            for kind, rows in sorted(replay.work.items())}


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Non-negative (intercept, slope) of the line through (xs, ys) with the least squared
    relative errors (a target of 0.8 ms counts as much as one of 8 ms)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    weights = 1 / ys
    if np.ptp(xs) > 0:
        slope, intercept = np.polyfit(xs, ys, 1, w=weights)
        if slope >= 0 and intercept >= 0:
            return float(intercept), float(slope)
        if slope >= 0:
            return 0.0, _slope(xs, ys)
    return float(weights.sum() / (weights ** 2).sum()), 0.0


def _slope(xs: np.ndarray, ys: np.ndarray) -> float:
    """The slope through the origin with the least squared relative errors."""
    return float((xs / ys).sum() / ((xs / ys) ** 2).sum())


def fit(work: dict[str, dict[str, dict[str, float]]]) -> dict:
    """A profile (``base``/``per`` in microseconds) from ``reference_work`` of every mode."""
    us = {mode: {row: (v * 1000 if v is not None else None) for row, v in t.items()} for mode, t in TARGETS_MS.items()}
    sub_base, sub_insert = _line([work[m]["sub"][INSERT] for m in MODES], [us[m]["sub matching"] for m in MODES])
    pub_base, pub_match = _line([work[m]["pub"][MATCH] for m in MODES], [us[m]["pub"] for m in MODES])
    covered = [m for m in MODES if us[m]["sub covering"]]
    cover = _slope(np.array([work[m]["sub"][COVER] for m in covered]), np.array([us[m]["sub covering"] for m in covered]))
    unsub_cover = cover * work["active"].get("unsub", {}).get(COVER, 0.0)
    return {
        "name": "padres",
        "base": {"default": 200, "adv": 800, "unadv": 800, "attach": 800, "detach": 700,
                 "sub": round(sub_base, 1), "pub": round(pub_base, 1),
                 "unsub": round(max(0.0, us["active"]["unsub"] - unsub_cover), 1)},
        "per": {
            "default": {COVER: round(cover, 6), "residual_checks": 2.0},
            "sub": {INSERT: round(sub_insert, 6), COVER: round(cover, 6)},
            "unsub": {COVER: round(cover, 6)},
            "pub": {MATCH: round(pub_match, 6)},
        },
    }


def predicted_ms(profile: dict, work: dict[str, dict[str, float]]) -> dict[str, float]:
    """Per-message averages (ms) that ``profile`` gives one mode's reference work, by target row."""
    def cost(kind: str, counters) -> float:
        per = {**profile["per"].get("default", {}), **profile["per"].get(kind, {})}
        return sum(per.get(c, 0.0) * work.get(kind, {}).get(c, 0.0) for c in counters)

    base = profile["base"]
    return {
        "sub matching": (base["sub"] + cost("sub", [MATCH, INSERT, "residual_checks"])) / 1000,
        "sub covering": cost("sub", [COVER]) / 1000,
        "unsub": (base["unsub"] + cost("unsub", [MATCH, COVER, "residual_checks"])) / 1000 if "unsub" in work else None,
        "pub": (base["pub"] + cost("pub", [MATCH, "residual_checks"])) / 1000,
    }
