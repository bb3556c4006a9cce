"""The covering structure a workload builds, measured before it runs.

The covering papers describe their workloads by it: root subscriptions (covered by no other
subscription) and the subscriptions each covers. "Congestion Avoidance with Selective Filter
Aggregation in Content-Based Routing Networks" defines the covering degree as the mean, over
roots, of the subscriptions a root's removal exposes (its NRS: those that become roots, the
new covering set PADRES's covering tree then forwards);
"... with Incremental Filter Aggregation ..." describes its mobile workload as about 1,600
roots among 200,000 subscriptions, each covering more than 2,000. The soft-link paper describes
its datasets by their matching share: the fraction of the subscriptions a publication matches
(``matching_shares``). Questions are answered by the routing tables' own index
(``protocols.index.FilterIndex``), which the property tests hold to the scalar oracle.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from protocols.index import FilterIndex
from protocols.language import Filter

from .bursts import PROBE_PREFIX


@dataclass(frozen=True)
class CoveringStructure:
    subscriptions: int  # distinct subscriptions (a subscriber that moves subscribes again: counted once)
    roots: int
    covered: int  # subscriptions some root covers
    per_root: np.ndarray  # per root: the subscriptions it covers
    exposed: np.ndarray  # per root: the subscriptions its removal makes roots (its NRS)

    @property
    def degree(self) -> float:
        """The covering degree: subscriptions a root's removal makes roots (what active
        covering then forwards), mean over roots."""
        return float(self.exposed.mean()) if self.roots else 0.0

    def lines(self, prefix: str = "covering") -> list[str]:
        if not self.roots:
            return [f"{prefix}: no subscriptions"]
        covers = self.per_root
        return [
            f"{prefix}: {self.subscriptions:,} subscriptions, {self.roots:,} roots (covered by no other), "
            f"{self.covered:,} covered by a root",
            f"{prefix}: a root covers {covers.mean():,.1f} on average (median {np.median(covers):,.0f}, "
            f"largest {covers.max():,}); {int((covers >= 1000).sum()):,} roots cover 1,000 or more",
            f"{prefix}: covering degree (subscriptions a root's removal makes roots, mean per root) "
            f"{self.degree:,.1f}",
        ]


def without_probes(injections) -> tuple[list, int, int]:
    """The injections but the delay probes' (``workloads.bursts``: ids starting ``probe-``), which
    would count as a root of their own; and how many probe publications and subscriptions there were."""
    kept, probes = [], Counter()
    for injection in injections:
        if injection.message.id.startswith(PROBE_PREFIX):
            probes[injection.message.kind] += 1
        else:
            kept.append(injection)
    return kept, probes["pub"], probes["sub"]


def subscriptions_of(injections) -> list[Filter]:
    """The filter of every subscription a workload issues, once per subscription id, in order."""
    return [f for _, f in _first_subscriptions(injections)]


def subscriptions_at(injections, t_us: int) -> list[Filter]:
    """The filters of the subscriptions present at ``t_us``: issued by then and not yet
    unsubscribed (a subscriber that moves keeps its subscriptions), in the order issued. Where
    roots come and go (auditors that subscribe for a minute in ten), this is the structure one
    removal meets; ``subscriptions_of`` counts every subscription ever issued as present at once."""
    present: dict[str, Filter] = {}
    for injection in injections:
        if injection.t_us > t_us:
            break
        message = injection.message
        if message.kind == "sub":
            present[message.id] = message.filter
        elif message.kind == "unsub":
            present.pop(message.id, None)
    return list(present.values())


def subscriptions_by_broker(injections) -> dict[str, list[Filter]]:
    """Per broker, the filters of the subscriptions first issued there (where a subscriber
    starts): the table a broker's covering compares before anything moves."""
    found: dict[str, list[Filter]] = {}
    for broker, f in _first_subscriptions(injections):
        found.setdefault(broker, []).append(f)
    return dict(sorted(found.items()))


def _first_subscriptions(injections) -> list[tuple[str, Filter]]:
    seen: dict[str, tuple[str, Filter]] = {}
    for injection in injections:
        message = injection.message
        if message.kind == "sub" and message.id not in seen:
            seen[message.id] = (injection.broker, message.filter)
    return list(seen.values())


def per_broker_lines(structures: dict[str, CoveringStructure]) -> list[str]:
    """One line over the subscriber brokers: roots and covering degree among each one's own
    subscriptions (the covering its link towards the publishers sees first; brokers where
    subscriptions from many meet, such as a star's hub, see the whole workload's)."""
    busy = {b: s for b, s in structures.items() if s.roots}
    if not busy:
        return []
    roots = np.array([s.roots for s in busy.values()])
    degrees = np.array([s.degree for s in busy.values()])
    return [f"covering within each subscriber broker's own subscriptions ({len(busy)} brokers): "
            f"roots {roots.mean():,.0f} on average "
            f"({roots.min():,}-{roots.max():,}), covering degree {degrees.mean():,.1f} on average "
            f"({degrees.min():,.1f}-{degrees.max():,.1f})"]


def covering_structure(filters: list[Filter]) -> CoveringStructure:
    """Roots and covered sets of ``filters``. Equal filters count once as a root candidate (the
    first), the others as covered by it; among filters that cover each other the first is the root."""
    distinct: dict[Filter, int] = {}
    for i, f in enumerate(filters):
        distinct.setdefault(f, i)
    roots = _roots(filters, _by_attributes(filters, list(distinct.values())))
    everything = FilterIndex()
    for i, f in enumerate(filters):
        everything.add(i, f)
    covered_count = np.zeros(len(filters), np.int64)
    covered_sets = []
    for root in roots:
        covered = np.array([i for i in everything.covered_by(filters[root]) if i != root], np.int64)
        covered_sets.append(covered)
        covered_count[covered] += 1
    per_root = np.array([len(c) for c in covered_sets], np.int64)
    exposed = np.array([len(_roots(filters, _by_attributes(filters, c[covered_count[c] == 1].tolist())))
                        for c in covered_sets], np.int64)
    return CoveringStructure(len(filters), len(roots), int((covered_count > 0).sum()), per_root, exposed)


def _by_attributes(filters: list[Filter], indices: list[int]) -> list[int]:
    return sorted(indices, key=lambda i: (_attributes(filters[i]), i))


def _attributes(f: Filter) -> int:
    return max(len(d.constraints) for d in f.disjuncts)


def _roots(filters: list[Filter], order: list[int]) -> list[int]:
    """Candidates first: each filter not covered by a candidate before it (a filter can only
    be covered by one constraining no more attributes, so in ``order`` few candidates turn
    out covered later); then the candidates that another candidate covers dropped. Any
    order is right: a filter covered by a dropped candidate is covered by whatever covers
    that one."""
    candidates = FilterIndex()
    for i in order:
        if not candidates.is_covered(filters[i]):
            candidates.add(i, filters[i])
    found = []
    for i in sorted(candidates.keys()):
        others = [j for j in candidates.covering(filters[i]) if j != i]
        if not others or (min(others) > i and all(i in candidates.covering(filters[j]) for j in others)):
            found.append(i)
    return found


@dataclass(frozen=True)
class Matching:
    """Per publication, in trace order: the fraction of the subscriptions present when it is
    published that it matches, and the fraction of the brokers holding one of them that hold
    one it matches (a publication passing the others there only forwards)."""
    subscriptions: np.ndarray
    brokers: np.ndarray

    def lines(self) -> list[str]:
        """The two shares' distributions (the soft-link paper plots the first's CDF)."""
        if not len(self.subscriptions):
            return ["matching: no publication meets a subscription"]
        return [f"matching: a publication matches {_distribution(self.subscriptions)} of the subscriptions "
                f"present ({len(self.subscriptions):,} publications)",
                f"matching: and reaches {_distribution(self.brokers)} of the brokers holding them"]


def _distribution(shares: np.ndarray) -> str:
    p10, p50, p90 = np.percentile(shares, [10, 50, 90]) * 100
    return f"{shares.mean() * 100:.1f}% on average (10th / 50th / 90th percentile {p10:.1f}% / {p50:.1f}% / {p90:.1f}%)"


def matching_shares(injections, most: int = 10_000) -> Matching:
    """How much of the subscriptions present each publication matches (``Matching``);
    publications with no subscription present are left out. Of more than ``most``
    publications, every k-th only (evenly spread, at most ``most``): the mobile rush hour's
    million would take hours."""
    publications = sum(1 for injection in injections if injection.message.kind == "pub")
    every = max(1, -(-publications // most))
    present = FilterIndex()
    held_at: dict[str, str] = {}  # subscription -> its broker
    holding: Counter = Counter()  # broker -> subscriptions present there
    shares, broker_shares = [], []
    seen = 0

    def release(sub_id: str) -> None:
        broker = held_at.pop(sub_id)
        holding[broker] -= 1
        if not holding[broker]:
            del holding[broker]

    for injection in injections:
        message = injection.message
        if message.kind == "sub":
            present.add(message.id, message.filter)
            if message.id in held_at:
                release(message.id)
            held_at[message.id] = injection.broker
            holding[injection.broker] += 1
        elif message.kind == "unsub" and message.id in present:
            present.remove(message.id)
            release(message.id)
        elif message.kind == "pub":
            seen += 1
            if len(present) and (seen - 1) % every == 0:
                matched = present.matching(message.publication)
                shares.append(len(matched) / len(present))
                broker_shares.append(len({held_at[s] for s in matched}) / len(holding))
    return Matching(np.array(shares), np.array(broker_shares))
