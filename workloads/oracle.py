"""The delivery oracle over a compiled workload: which subscriptions each publication reaches
if every operation took effect the moment it was issued. A publication that conforms to none
of its publisher's active advertisements reaches nobody when brokers check conformance.
Subscriptions follow their client through moves. ``pubsub-emu check`` compares a run's
deliveries with it (experiments/check.py), the runtime counts from it what faults cost
(the ``expected`` table), and the tests hold every protocol to it.

Matching goes through the routing index (one compiled call per publication), which the
property tests hold to the scalar reference (protocols/language.py)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from protocols.index import FilterIndex
from protocols.language import Publication, conforms, parse_filter, parse_publication
from protocols.trees import Doc

from .trace import Injection, compile_trace


class Expected(NamedTuple):
    """The oracle's pairs: ``pub[i]`` (an index into ``publications``) reaches ``sub[i]`` (an
    index into ``subscriptions``); pairs in publication order, then subscription order.
    ``publications`` and ``subscriptions`` are the workload's publish and subscribe
    injections in the oracle's order (``in_oracle_order``)."""

    publications: list[Injection]
    subscriptions: list[Injection]
    pub: np.ndarray
    sub: np.ndarray

    def pairs(self) -> set[tuple[str, str]]:
        """The pairs as (publication id, subscription id)."""
        pub_ids = [i.message.id for i in self.publications]
        sub_ids = [i.message.id for i in self.subscriptions]
        return {(pub_ids[p], sub_ids[s]) for p, s in zip(self.pub.tolist(), self.sub.tolist())}


def in_oracle_order(injections: list[Injection]) -> list[Injection]:
    """Injections as the oracle takes them: by time, then trace sequence. A subscription's
    number is its place among the subscriptions in this order."""
    return sorted(injections, key=lambda i: (i.t_us, i.seq))


def reached_by_publication(ordered: list[Injection], check_conformance: bool = True,
                           asked: np.ndarray | None = None) -> Iterator[np.ndarray | None]:
    """Per publication of ``ordered`` (``in_oracle_order``), in order, the numbers of the
    subscriptions it reaches, sorted: one publication's at a time, for a caller that need not
    hold every pair. ``asked``: per publication, whether to match it (None for the others)."""
    subscriptions_index = FilterIndex()
    advertisements: dict[str, dict[str, object]] = {}  # client -> advertisement id -> filter
    number_of: dict[str, int] = {}  # subscription id -> its number
    nobody = np.zeros(0, np.int64)
    number = subscriptions = -1  # the last publication's and subscription's numbers
    for injection in ordered:
        message = injection.message
        kind = message.kind
        if kind == "pub":
            number += 1
            if asked is not None and not asked[number]:
                yield None
                continue
            publication = message.publication
            admitted = not check_conformance or any(
                conforms(publication, f) for f in advertisements.get(message.client, {}).values())
            if admitted and len(subscriptions_index):
                # through a copy: matching caches a publication's encoding on it, and the
                # workload's millions would keep theirs (about 1 KB each)
                reached = subscriptions_index.keys_of(subscriptions_index.match(Publication(publication.items)).slots)
                yield np.sort(np.array(reached, np.int64)) if reached else nobody
            else:
                yield nobody
        elif kind == "sub":
            subscriptions += 1
            number_of[message.id] = subscriptions
            subscriptions_index.add(subscriptions, message.filter)
        elif kind == "unsub":
            subscriptions_index.remove(number_of[message.id])
        elif kind == "adv":
            advertisements.setdefault(message.client, {})[message.id] = message.filter
        elif kind == "unadv":
            del advertisements[message.client][message.id]


def of_kind(ordered: list[Injection], kind: str) -> list[Injection]:
    return [i for i in ordered if i.message.kind == kind]


def expected_pairs(injections: list[Injection], check_conformance: bool = True) -> Expected:
    """The oracle's pairs of a compiled workload (``injections`` in any order)."""
    ordered = in_oracle_order(injections)
    pub_parts, sub_parts = [], []
    for number, reached in enumerate(reached_by_publication(ordered, check_conformance)):
        if len(reached):
            pub_parts.append(np.full(len(reached), number, np.int64))
            sub_parts.append(reached)
    pub = np.concatenate(pub_parts) if pub_parts else np.zeros(0, np.int64)
    sub = np.concatenate(sub_parts) if sub_parts else np.zeros(0, np.int64)
    return Expected(of_kind(ordered, "pub"), of_kind(ordered, "sub"), pub, sub)


def expected_subscribers(injections: list[Injection], check_conformance: bool = True) -> list[tuple[str, int, int]]:
    """(publication id, time published in us, subscriptions it reaches) per publication, in
    the oracle's order (time, then trace sequence)."""
    ordered = in_oracle_order(injections)
    return [(i.message.id, i.t_us, len(reached)) for i, reached in
            zip(of_kind(ordered, "pub"), reached_by_publication(ordered, check_conformance))]


def expected_deliveries(records: list[dict], check_conformance: bool = True) -> set[tuple[str, str]]:
    """The oracle's (publication id, subscription id) pairs of trace records (in trace order;
    every broker they name exists)."""
    brokers = {r["broker"] for r in records if "broker" in r}
    return expected_pairs(compile_trace(records, brokers), check_conformance).pairs()


def documents(records: list[dict]) -> tuple[list, dict[str, tuple[str, ...]]]:
    """A workload's publications as the multi-tree planners see them (``protocols.trees.Doc``:
    the publisher's broker when it publishes and, per subscription group it matches, that
    group's brokers), in trace order, and per group the brokers of its subscriptions. A group
    is the subscriptions with one filter text, placed where they were made; all of the trace's
    subscriptions count for every document (the paper's offline evaluation: every
    subscription is in place before any document)."""
    members: dict[str, set[str]] = {}
    for record in records:
        if record["op"] == "subscribe":
            members.setdefault(record["filter"], set()).add(record["broker"])
    groups = {text: tuple(sorted(brokers)) for text, brokers in members.items()}
    index = FilterIndex()
    for text in sorted(groups):
        index.add(text, parse_filter(text))
    docs, at = [], {}
    for record in records:
        if "broker" in record and (record["op"] == "move" or record["client"] not in at):
            at[record["client"]] = record["broker"]
        if record["op"] == "publish":
            matched = sorted(index.matching(parse_publication(record["content"])))
            docs.append(Doc(at[record["client"]], tuple((text, groups[text]) for text in matched)))
    return docs, groups
