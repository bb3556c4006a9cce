"""Reading and compiling traces of client operations (JSON Lines or Parquet).

``compile_trace`` checks every operation and turns it into the messages the runtime injects
into brokers' mailboxes. It resolves where each operation enters (a client is attached to the
broker of its first operation that names one; ``move`` re-attaches it) and which incarnation
(``gen``) of a filter an operation refers to.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from protocols.errors import InputError
from protocols.language import Filter, Publication, parse_filter, parse_publication
from protocols.messages import Message

OPS = ("advertise", "subscribe", "publish", "unsubscribe", "unadvertise", "move")
_NEEDS = {
    "advertise": ("client", "id", "filter"),
    "subscribe": ("client", "id", "filter"),
    "publish": ("client", "id", "content"),
    "unsubscribe": ("client", "id"),
    "unadvertise": ("client", "id"),
    "move": ("client", "broker"),
}
_ALLOWED = frozenset({"t", "op", "client", "broker", "id", "filter", "content"})


class Injection(NamedTuple):
    """A message entering ``broker``'s mailbox from a client at ``t_us``; ``seq`` orders ties.
    (A named tuple: a workload makes millions, each in half the time of a frozen dataclass.)"""

    t_us: int
    broker: str
    seq: int
    message: Message


class Trace(NamedTuple):
    """Operation records, and where each came from: ``where(i)`` names the i-th (for an error
    message; made only when one is raised, not for each of millions of records)."""

    records: list[dict]
    where: Callable[[int], str]


def read_trace(path: Path) -> Trace:
    """The records of a .jsonl or .parquet trace."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: trace file not found")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for unreadable files
            raise InputError(f"{path}: not a readable Parquet trace ({exc})") from None
        return Trace([{k: v for k, v in r.items() if v is not None} for r in rows], lambda i: f"{path}: row {i + 1}")
    records, numbers = [], []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InputError(f"{where}: expected a JSON object per line")
            records.append(record)
            numbers.append(number)
    return Trace(records, lambda i: f"{path}:{numbers[i]}")


def publication_of(content: str | Publication) -> Publication:
    """A publish operation's content: its text parsed, or the publication a generator handed."""
    return content if isinstance(content, Publication) else parse_publication(content)


class _Client:
    __slots__ = ("broker", "gen", "subs", "advs")

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self.gen = 0
        self.subs: dict[str, Message] = {}
        self.advs: dict[str, Message] = {}


def compile_trace(records: Iterable[dict], brokers, where: Callable[[int], str] = lambda i: f"operation {i + 1}",
                  ) -> list[Injection]:
    """Validate operations in order and return the injections they cause; an error names the
    operation by ``where(i)`` (the i-th record, from 0)."""
    known_brokers = set(brokers)
    clients: dict[str, _Client] = {}
    used_ids: dict[str, set[str]] = {"adv": set(), "sub": set(), "pub": set()}
    filters: dict[str, Filter] = {}  # text -> parsed filter: generators repeat theirs (filters are immutable)
    injections: list[Injection] = []
    last_t = 0
    for i, record in enumerate(records):
        try:
            last_t = _check_record(record, last_t, known_brokers)
            t_us = round(last_t * 1_000_000)
            sends = _sends(record, clients, t_us, used_ids, filters)
        except ValueError as exc:
            raise InputError(f"{where(i)}: {exc}") from None
        for broker, message in sends:
            injections.append(Injection(t_us, broker, len(injections), message))
    return injections


def _check_record(record: dict, last_t: float, brokers: set) -> float:
    if not _ALLOWED.issuperset(record):
        unknown = sorted(set(record) - _ALLOWED)
        raise ValueError(f"unknown key {unknown[0]!r} (expected {', '.join(sorted(_ALLOWED))})")
    t = record.get("t")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise ValueError(f"'t' must be a non-negative number of seconds, got {t!r}")
    if t < last_t:
        raise ValueError(f"time goes backwards ({t} after {last_t})")
    op = record.get("op")
    if op not in OPS:
        raise ValueError(f"unknown op {op!r} (expected one of {', '.join(OPS)})")
    for key in _NEEDS[op]:
        value = record.get(key)
        if not (isinstance(value, str) and value or key == "content" and isinstance(value, Publication)):
            raise ValueError(f"{op} needs a non-empty string {key!r}")
    if "broker" in record and record["broker"] not in brokers:
        raise ValueError(f"unknown broker {record['broker']!r}")
    return t


def _sends(record: dict, clients: dict[str, _Client], t_us: int, used_ids, filters: dict[str, Filter],
           ) -> list[tuple[str, Message]]:
    """The (broker, message) pairs a checked record injects."""
    op, name = record["op"], record["client"]
    client = clients.get(name)
    if client is None:
        if "broker" not in record:
            raise ValueError(f"client {name!r} has no broker yet (its first operation must name one)")
        client = clients[name] = _Client(record["broker"])
    elif "broker" in record and op != "move" and record["broker"] != client.broker:
        raise ValueError(f"client {name!r} is attached to {client.broker}, not {record['broker']} (use a move)")
    if op == "move":
        return _move(client, name, record["broker"], t_us)
    return [(client.broker, _operation(op, record, client, name, t_us, used_ids, filters))]


def _operation(op: str, record: dict, client: _Client, name: str, t_us: int, used_ids, filters: dict[str, Filter]) -> Message:
    op_id = record["id"]
    if op in ("advertise", "subscribe"):
        kind = "adv" if op == "advertise" else "sub"
        if op_id in used_ids[kind]:
            raise ValueError(f"{op} id {op_id!r} was used before")
        used_ids[kind].add(op_id)
        text = record["filter"]
        if text not in filters:
            filters[text] = parse_filter(text)
        message = Message(kind, op_id, client.gen, filter=filters[text], client=name)
        (client.advs if kind == "adv" else client.subs)[op_id] = message
        return message
    if op == "publish":
        if op_id in used_ids["pub"]:
            raise ValueError(f"publish id {op_id!r} was used before")
        used_ids["pub"].add(op_id)
        return Message("pub", op_id, publication=publication_of(record["content"]), client=name, t_pub=t_us)
    table, kind = (client.subs, "unsub") if op == "unsubscribe" else (client.advs, "unadv")
    if op_id not in table:
        raise ValueError(f"{op} of {op_id!r}, which client {name!r} does not hold")
    del table[op_id]
    return Message(kind, op_id, client.gen, client=name)


def _move(client: _Client, name: str, broker: str, t_us: int) -> list[tuple[str, Message]]:
    """The (broker, message) pairs of a move: detach at the old broker, attach at the new.
    Both carry the move's time: it splits the publications the two incarnations deliver
    (protocols/broker.py, client moves)."""
    detach = (client.broker, Message("detach", name, client.gen, client=name, t_pub=t_us))
    client.gen += 1
    client.broker = broker
    client.advs = {i: _regenerate(m, client.gen) for i, m in client.advs.items()}
    client.subs = {i: _regenerate(m, client.gen) for i, m in client.subs.items()}
    items = tuple(client.advs.values()) + tuple(client.subs.values())
    return [detach, (broker, Message("attach", name, client.gen, client=name, items=items, t_pub=t_us))]


def _regenerate(message: Message, gen: int) -> Message:
    return Message(message.kind, message.id, gen, filter=message.filter, client=message.client)
