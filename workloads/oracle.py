"""The delivery oracle over a compiled workload: how many subscribers each publication should
reach if every operation took effect the moment it was issued (what the analysis compares
deliveries with, to count the deliveries faults cost). A publication that conforms to none of
its publisher's active advertisements reaches nobody when brokers check conformance."""
from __future__ import annotations

from protocols.index import FilterIndex
from protocols.language import conforms, parse_filter, parse_publication
from protocols.trees import Doc

from .trace import Injection


def expected_subscribers(injections: list[Injection], check_conformance: bool = True) -> list[tuple[str, int, int]]:
    """(publication id, time published in us, subscriptions it matches) per publication, in
    the order of ``injections`` (time, then trace sequence)."""
    subscriptions = FilterIndex()
    advertisements: dict[str, dict[str, object]] = {}  # client -> advertisement id -> filter
    found = []
    for injection in sorted(injections, key=lambda i: (i.t_us, i.seq)):
        message = injection.message
        kind = message.kind
        if kind == "sub":
            subscriptions.add(message.id, message.filter)
        elif kind == "unsub":
            subscriptions.remove(message.id)
        elif kind == "adv":
            advertisements.setdefault(message.client, {})[message.id] = message.filter
        elif kind == "unadv":
            del advertisements[message.client][message.id]
        elif kind == "pub":
            publication = message.publication
            admitted = not check_conformance or any(
                conforms(publication, f) for f in advertisements.get(message.client, {}).values())
            count = len(subscriptions.matching(publication)) if admitted else 0
            found.append((message.id, injection.t_us, count))
    return found


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
