"""Emulated faults (DESIGN.md section 8): a scenario's ``faults:`` list, parsed and validated
into a ``FaultSchedule`` that every host holds whole.

Kinds: ``crash`` (a broker loses its state and queue, and restarts empty after
``restart_after``), ``link_down`` (an overlay link), ``partition`` (messages between brokers
of different groups; brokers no group names form one more group), ``loss`` (each message on
a link lost with ``probability``), ``delay`` (``extra`` latency plus a draw up to ``jitter``
on a link, which stays first in, first out) and ``slow`` (a broker's service times times
``factor``). Every fault lasts from ``t`` until ``until`` (a crash: ``restart_after``), or
to the end of the run.

The schedule answers as pure functions of the time, the brokers and the message's sender and
send counter (random draws are seeded by the scenario seed, the fault's place in the list and
those), so the answers do not depend on how brokers are spread over hosts. Dropped messages
name their ``cause``: ``link down`` (a link down or a partition), ``loss``, ``crashed broker``
(and the mailbox's own ``mailbox full``).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

KINDS = ("crash", "link_down", "partition", "loss", "delay", "slow")
LINK_DOWN, LOSS, CRASHED, MAILBOX_FULL = "link down", "loss", "crashed broker", "mailbox full"
_KEYS = {
    "crash": ("broker", "restart_after"),
    "link_down": ("a", "b", "until"),
    "partition": ("groups", "until"),
    "loss": ("a", "b", "probability", "until"),
    "delay": ("a", "b", "extra", "jitter", "until"),
    "slow": ("broker", "factor", "until"),
}
_REQUIRED = {"crash": ("broker",), "link_down": ("a", "b"), "partition": ("groups",),
             "loss": ("a", "b", "probability"), "delay": ("a", "b", "extra"), "slow": ("broker", "factor")}


@dataclass(frozen=True)
class Fault:
    number: int  # its place in the scenario's list: names it in events, seeds its draws
    kind: str
    start: int  # microseconds
    end: float  # when it ends (a crashed broker restarts); inf: never
    broker: str | None = None
    link: tuple[str, str] | None = None  # sorted
    groups: tuple[tuple[str, ...], ...] = ()
    probability: float = 0.0
    extra: int = 0
    jitter: int = 0
    factor: float = 1.0

    def active(self, t: int) -> bool:
        return self.start <= t < self.end

    def describe(self) -> dict:
        """What the ``events`` rows of its start and end say about it."""
        detail = {"fault": self.number, "kind": self.kind}
        if self.broker is not None:
            detail["broker"] = self.broker
        if self.link is not None:
            detail["a"], detail["b"] = self.link
        if self.groups:
            detail["groups"] = [list(g) for g in self.groups]
        for name, default in (("probability", 0.0), ("extra_us", 0), ("jitter_us", 0), ("factor", 1.0)):
            value = getattr(self, name.removesuffix("_us"))
            if value != default:
                detail[name] = value
        return detail

    @property
    def recorder(self) -> str:
        """The broker whose host writes the fault's start and end events."""
        if self.broker is not None:
            return self.broker
        if self.link is not None:
            return self.link[0]
        return min(b for group in self.groups for b in group)


@dataclass(frozen=True)
class Transition:
    """Something a host does at a fault's start or end, for one of its brokers: ``crash``,
    ``restart``, ``restore`` (the link to ``peer`` is back: resynchronise it), or ``record``
    (only the events row)."""

    t: int
    broker: str
    action: str
    fault: Fault
    peer: str | None = None


@dataclass
class FaultSchedule:
    faults: tuple[Fault, ...]
    seed: int
    overlay: dict[str, list[str]]
    _on_link: dict = field(init=False, default_factory=dict)  # sorted link -> faults on it
    _partitions: list = field(init=False, default_factory=list)  # (fault, broker -> group)
    _slow: dict = field(init=False, default_factory=dict)  # broker -> slow faults
    _crashes: dict = field(init=False, default_factory=dict)  # broker -> crash faults

    def __post_init__(self) -> None:
        for f in self.faults:
            if f.link is not None:
                self._on_link.setdefault(f.link, []).append(f)
            elif f.kind == "partition":
                self._partitions.append((f, {b: g for g, group in enumerate(f.groups) for b in group}))
            elif f.kind == "slow":
                self._slow.setdefault(f.broker, []).append(f)
            else:
                self._crashes.setdefault(f.broker, []).append(f)

    # ------------------------------------------------------------------ questions while running

    def drop_cause(self, sender: str, destination: str, t: int, seq: int) -> str | None:
        """Why a message ``sender`` sends to ``destination`` at ``t`` (its ``seq``-th send) is
        lost, or None. A crashed destination is decided where the message arrives."""
        for f in self._on_link.get(_pair(sender, destination), ()):
            if f.active(t):
                if f.kind == "link_down":
                    return LINK_DOWN
                if f.kind == "loss" and self._draw(f, sender, seq) < f.probability:
                    return LOSS
        if self._divided(sender, destination, t):
            return LINK_DOWN
        return None

    def extra_delay(self, sender: str, destination: str, t: int, seq: int) -> int:
        """Latency a delay fault adds to the message (0 if none)."""
        for f in self._on_link.get(_pair(sender, destination), ()):
            if f.kind == "delay" and f.active(t):
                return f.extra + (round(self._draw(f, sender, seq) * f.jitter) if f.jitter else 0)
        return 0

    def delays(self, sender: str, destination: str) -> bool:
        """Whether any delay fault ever applies to the link (it then keeps its order explicitly)."""
        return any(f.kind == "delay" for f in self._on_link.get(_pair(sender, destination), ()))

    def slow_factor(self, broker: str, t: int) -> float:
        for f in self._slow.get(broker, ()):
            if f.active(t):
                return f.factor
        return 1.0

    def crashed(self, broker: str, t: int) -> bool:
        return any(f.active(t) for f in self._crashes.get(broker, ()))

    def link_up(self, a: str, b: str, t: int) -> bool:
        """Both brokers up and nothing cutting the link between them at ``t``."""
        if self.crashed(a, t) or self.crashed(b, t) or self._divided(a, b, t):
            return False
        return not any(f.kind == "link_down" and f.active(t) for f in self._on_link.get(_pair(a, b), ()))

    def _divided(self, a: str, b: str, t: int) -> bool:
        for f, group_of in self._partitions:
            if f.active(t) and group_of.get(a, -1) != group_of.get(b, -1):
                return True
        return False

    def _draw(self, f: Fault, sender: str, seq: int) -> float:
        return random.Random(f"{self.seed}/fault{f.number}/{sender}/{seq}").random()

    # ------------------------------------------------------------------ transitions

    def transitions(self, brokers) -> list[Transition]:
        """What the host of ``brokers`` does at faults' starts and ends, in time order."""
        mine = set(brokers)
        found = []
        for f in self.faults:
            found += [x for x in self._transitions_of(f) if x.broker in mine]
        return sorted(found, key=lambda x: (x.t, x.fault.number, x.broker, x.action != "record", x.peer or ""))

    def _transitions_of(self, f: Fault) -> list[Transition]:
        ends = math.isfinite(f.end)
        end = int(f.end) if ends else 0
        if f.kind == "crash":
            found = [Transition(f.start, f.broker, "crash", f)]
            if ends:
                found.append(Transition(end, f.broker, "restart", f))
                found += [Transition(end, n, "restore", f, f.broker) for n in self.overlay[f.broker]]
            return found
        found = [Transition(f.start, f.recorder, "record", f)]
        if not ends:
            return found
        found.append(Transition(end, f.recorder, "record", f))
        if f.kind in ("link_down", "loss"):  # a lossy link may have lost routing state too
            a, b = f.link
            found += [Transition(end, a, "restore", f, b), Transition(end, b, "restore", f, a)]
        elif f.kind == "partition":
            group_of = dict(next(g for x, g in self._partitions if x is f))
            for a in sorted(self.overlay):
                found += [Transition(end, a, "restore", f, b) for b in self.overlay[a]
                          if group_of.get(a, -1) != group_of.get(b, -1)]
        return found


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


# ---------------------------------------------------------------------- parsing


def parse_faults(given, overlay: dict[str, list[str]], parse_time, parse_duration) -> tuple[Fault, ...]:
    """The scenario's ``faults`` list as Faults; a ValueError names the entry and key
    (``faults[2].broker: ...``). ``parse_time`` reads a time (zero allowed),
    ``parse_duration`` a positive duration; both take (value, key name)."""
    if given is None:
        return ()
    if not isinstance(given, list):
        raise ValueError("faults: expected a list of {t, kind, ...} mappings")
    faults = tuple(_parse_one(i, entry, overlay, parse_time, parse_duration) for i, entry in enumerate(given))
    _check_no_contradictions(faults)
    return faults


def _parse_one(i: int, entry, overlay, parse_time, parse_duration) -> Fault:
    where = f"faults[{i}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a mapping such as {{t: 30s, kind: crash, broker: B3}}")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    allowed = ("t", "kind") + _KEYS[kind]
    for key in entry:
        if key not in allowed:
            raise ValueError(f"{where}.{key}: unknown key for a {kind} fault (expected: {', '.join(allowed)})")
    for key in ("t",) + _REQUIRED[kind]:
        if entry.get(key) is None:
            raise ValueError(f"{where}.{key}: missing (a {kind} fault needs {', '.join(('t',) + _REQUIRED[kind])})")
    start = parse_time(entry["t"], f"{where}.t")
    fields = {}
    if kind == "crash":
        restart = entry.get("restart_after")
        end = math.inf if restart is None else start + parse_duration(restart, f"{where}.restart_after")
    else:
        until = entry.get("until")
        end = math.inf if until is None else parse_time(until, f"{where}.until")
        if end <= start:
            raise ValueError(f"{where}.until: must come after t ({entry['t']!r}), got {until!r}")
    if "broker" in _REQUIRED[kind]:
        fields["broker"] = _broker(entry["broker"], overlay, f"{where}.broker")
    if "a" in _REQUIRED[kind]:
        a, b = (_broker(entry[k], overlay, f"{where}.{k}") for k in ("a", "b"))
        if b not in overlay[a]:
            raise ValueError(f"{where}: {a} - {b} is not a link of the overlay")
        fields["link"] = _pair(a, b)
    if kind == "partition":
        fields["groups"] = _groups(entry["groups"], overlay, f"{where}.groups")
    if kind == "loss":
        fields["probability"] = _number(entry["probability"], f"{where}.probability", 0, 1)
    if kind == "delay":
        fields["extra"] = parse_duration(entry["extra"], f"{where}.extra")
        if entry.get("jitter") is not None:
            fields["jitter"] = parse_duration(entry["jitter"], f"{where}.jitter")
    if kind == "slow":
        fields["factor"] = _number(entry["factor"], f"{where}.factor", 0, math.inf, open_low=True)
    return Fault(i, kind, start, end, **fields)


def _broker(name, overlay, where: str) -> str:
    if not isinstance(name, str) or name not in overlay:
        raise ValueError(f"{where}: unknown broker {name!r}")
    return name


def _groups(given, overlay, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(given, list) or len(given) < 1 or not all(isinstance(g, list) and g for g in given):
        raise ValueError(f"{where}: expected a list of broker lists, such as [[B1, B2], [B3]]")
    seen: set[str] = set()
    groups = []
    for j, group in enumerate(given):
        names = [_broker(b, overlay, f"{where}[{j}]") for b in group]
        twice = seen.intersection(names)
        if twice:
            raise ValueError(f"{where}[{j}]: {sorted(twice)[0]} is in two groups")
        seen.update(names)
        groups.append(tuple(sorted(names)))
    if len(groups) == 1 and len(seen) == len(overlay):
        raise ValueError(f"{where}: one group holding every broker divides nothing")
    return tuple(groups)


def _number(value, where: str, low: float, high: float, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (low < value if open_low else low <= value) and value <= high):
        bounds = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
        raise ValueError(f"{where}: expected a number in {bounds}, got {value!r}")
    return float(value)


def _check_no_contradictions(faults: tuple[Fault, ...]) -> None:
    """Faults of one kind on one broker or link (or two partitions) must not overlap in time:
    two crashes of a broker at once, or two delays of a link, contradict each other."""
    by_target: dict[tuple, list[Fault]] = {}
    for f in faults:
        target = (f.broker,) if f.broker else f.link or ("partition",)
        by_target.setdefault((f.kind, target), []).append(f)
    for (kind, target), group in by_target.items():
        group.sort(key=lambda f: f.start)
        for earlier, later in zip(group, group[1:]):
            if later.start < earlier.end:
                what = "" if kind == "partition" else " on " + " - ".join(target)
                raise ValueError(f"faults[{later.number}]: overlaps faults[{earlier.number}], "
                                 f"another {kind}{what} (its window must begin after the other ends)")
