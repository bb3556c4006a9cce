"""Protocols as plug-ins: what a protocol declares, and the registry of those installed.

A protocol is one or more mixins over the base broker (protocols/broker.py) and a
``Protocol`` declaration: the key it takes under ``protocol:`` in a scenario, the paper whose
algorithm it implements, its settings, where its mixins go in the stack, and what it needs of
the rest of the scenario (each refusal with the reason a user reads). The emulator's own
protocols and outside packages register alike, by an entry point in the group
``pubsub_emu.protocols`` that names a ``Protocol``; ``installed()`` reads them.
docs/writing-a-protocol.md builds one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import Any, Callable

GROUP = "pubsub_emu.protocols"
OFF = None  # a configured protocol's value when it is not in the stack (``key: null``)


@dataclass(frozen=True)
class Needs:
    """A condition a protocol puts on another part of the scenario: ``what`` is another
    protocol's key, ``faults`` or ``moving clients``; ``allowed`` the values it may have there
    (a choice's values; OFF: that protocol off, no faults, no moving clients)."""

    what: str
    allowed: tuple
    why: str

    def holds(self, value) -> bool:
        return value in self.allowed


@dataclass(frozen=True)
class View:
    """What a composition rule sees of a scenario: every protocol's value (a choice's value, a
    configured protocol's resolved settings or OFF), whether it has faults, and whether its
    workload moves clients (None until the workload is built)."""

    protocol: dict
    faults: bool
    moving_clients: bool | None

    def value(self, what: str):
        if what == "faults":
            return True if self.faults else OFF
        if what == "moving clients":
            return True if self.moving_clients else OFF
        return self.protocol.get(what)


@dataclass(frozen=True)
class Protocol:
    """A protocol's declaration.

    ``key``: its key under ``protocol:``. A *choice* protocol (``choices``: its values, the
    first the default) always takes a value; a *configured* one is in the stack when its key
    holds a mapping of ``settings`` (a class whose ``parse(given, parse_duration)`` returns its
    settings, ValueError naming the key) and off when it is null.
    ``mixins(value)``: the mixins it adds for its value (a choice, or the settings as a
    mapping), outermost first; ``classes``: every mixin it may add (composed classes are found
    again by their names, in any process). ``order``: where its mixins go, outermost first.
    ``needs``: conditions on the rest of the scenario; ``refusal(view, settings)``: those the
    needs cannot say (a reason, or None), written out for people in ``conditions``.
    ``check_overlay(settings, graph)``: settings checked against the overlay (ValueError).
    ``prepare(settings, injections, seed)``: entries the protocol adds to the scenario's
    protocol settings before the run (drawn from the workload).
    ``measure(settings, spec, read)``: measurements of the finished run, as tables of its own
    (name -> columns) the run directory gains; ``read(table, columns)`` reads the run's tables.
    """

    key: str
    paper: str
    summary: str
    mixins: Callable[[Any], tuple[type, ...]]
    classes: tuple[type, ...]
    settings: type | None = None
    choices: tuple[str, ...] = ()
    order: int = 50
    needs: tuple[Needs, ...] = ()
    refusal: Callable[[View, Any], str | None] | None = None
    conditions: str = ""
    check_overlay: Callable[[Any, Any], None] | None = None
    prepare: Callable[[Any, list, int], dict] | None = None
    measure: Callable[[Any, Any, Callable], dict] | None = None
    package: str = field(default="", compare=False)  # the distribution that installed it

    @property
    def default(self):
        return self.choices[0] if self.choices else OFF

    def active(self, value) -> bool:
        """Whether ``value`` puts the protocol in the stack (an unknown choice does not)."""
        if self.choices:
            return value in self.choices and bool(self.mixins(value))
        return value is not OFF

    def refused(self, view: View) -> str | None:
        """Why this protocol, with its value in ``view``, does not compose with the rest
        (the first reason), or None."""
        for needs in self.needs:
            value = view.value(needs.what)
            if needs.what == "moving clients" and view.moving_clients is None:
                continue
            if not needs.holds(value):
                return f"{_needed(needs, value)} ({needs.why})"
        if self.refusal is not None:
            return self.refusal(view, view.protocol.get(self.key))
        return None

    def composes(self) -> list[str]:
        """What it needs of the rest, in words (``pubsub-emu protocols``)."""
        found = [f"{_wanted(n)}: {n.why}" for n in self.needs]
        return found + ([self.conditions] if self.conditions else [])


def _wanted(needs: Needs) -> str:
    if needs.allowed == (OFF,):
        return f"without {_named(needs.what)}"
    return f"with {_named(needs.what)} {_either(needs.allowed)}"


def _needed(needs: Needs, value) -> str:
    if needs.allowed == (OFF,):
        return f"does not compose with {_named(needs.what)}"
    return f"needs {_named(needs.what)} {_either(needs.allowed)}, not {value!r}"


def _either(values: tuple) -> str:
    names = [str(v) for v in values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _named(what: str) -> str:
    return what if what in ("faults", "moving clients") else f"protocol.{what}"


@cache
def installed() -> dict[str, Protocol]:
    """The installed protocols by key, in the order their mixins stack (outermost first)."""
    found: dict[str, Protocol] = {}
    for entry in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
        try:
            protocol = entry.load()
        except Exception as exc:  # a broken plug-in is named, not a traceback from deep inside
            raise RuntimeError(f"protocol plug-in {entry.name!r} ({entry.value}) failed to load: {exc}") from exc
        if not isinstance(protocol, Protocol):
            raise RuntimeError(f"protocol plug-in {entry.name!r} ({entry.value}) is not a protocols.plugins.Protocol")
        if protocol.key in found:
            raise RuntimeError(f"two protocol plug-ins take the key {protocol.key!r}: "
                               f"{found[protocol.key].package} and {_package(entry)}")
        found[protocol.key] = _with_package(protocol, _package(entry))
    if not found:
        raise RuntimeError(f"no protocols installed (entry-point group {GROUP}): install the project "
                           "(pip install -e .) so that its own protocols register")
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def _package(entry) -> str:
    return entry.dist.name if entry.dist is not None else "?"


def _with_package(protocol: Protocol, package: str) -> Protocol:
    from dataclasses import replace

    return replace(protocol, package=package)


def describe() -> str:
    """``pubsub-emu protocols``: every installed protocol, its paper, settings and composition."""
    import dataclasses

    blocks = []
    for key, protocol in installed().items():
        lines = [f"{key} ({protocol.package}): {protocol.summary}", f"    paper: {protocol.paper}"]
        if protocol.choices:
            lines.append(f"    values: {', '.join(protocol.choices)} (default {protocol.default})")
        elif protocol.settings is not None:
            defaults = [_setting(f) for f in dataclasses.fields(protocol.settings)]
            lines.append(f"    settings (protocol.{key}: {{...}}, null for off): {', '.join(defaults)}" if defaults
                         else f"    settings: none (protocol.{key}: {{}} turns it on, null off)")
        lines.append(f"    stack: {', '.join(c.__name__ for c in protocol.classes)} (order {protocol.order})")
        rules = protocol.composes()
        lines.append("    composes: " + ("; ".join(rules) if rules else "with everything"))
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _setting(field_) -> str:
    """A setting as a scenario gives it, with its default (durations in seconds)."""
    import dataclasses

    if field_.default is not dataclasses.MISSING:
        default = field_.default
    elif field_.default_factory is not dataclasses.MISSING:
        default = field_.default_factory()
    else:
        return f"{field_.name} (required)"
    if field_.name.endswith("_us") and isinstance(default, int):
        return f"{field_.name.removesuffix('_us')}={default / 1e6:g}s"
    return f"{field_.name}={default!r}"


def mixin_classes() -> dict[str, type]:
    """Every installed mixin by its class name."""
    found: dict[str, type] = {}
    for protocol in installed().values():
        for cls in protocol.classes:
            if found.setdefault(cls.__name__, cls) is not cls:
                raise RuntimeError(f"two protocol mixins are named {cls.__name__!r}")
    return found
