"""Composes the broker class a scenario's protocol section asks for, from the installed
protocols (protocols/plugins.py), in one visible place."""
from __future__ import annotations

from .broker import Broker
from .plugins import installed, mixin_classes


def broker_class(protocol: dict) -> type[Broker]:
    """The base broker with the mixins of every protocol the scenario turns on, outermost first
    (in the protocols' order)."""
    mixins = []
    for key, declared in installed().items():
        value = protocol.get(key, declared.default)
        if declared.active(value):
            mixins += declared.mixins(value)
    return _compose(tuple(mixins))


_COMPOSED: dict[tuple[type, ...], type[Broker]] = {(): Broker}


def _compose(mixins: tuple[type, ...]) -> type[Broker]:
    composed = _COMPOSED.get(mixins)
    if composed is None:
        name = "Broker_" + "_".join(m.__name__ for m in mixins)
        composed = _COMPOSED[mixins] = type(name, (*mixins, Broker), {"__module__": __name__})
    return composed


def __getattr__(name: str) -> type[Broker]:
    """Composed classes by name, so pickle (host snapshots, Ray) finds them in any process."""
    parts = name.removeprefix("Broker_").split("_") if name.startswith("Broker_") else [None]
    known = mixin_classes() if name.startswith("Broker_") else {}
    if all(part in known for part in parts):
        return _compose(tuple(known[part] for part in parts))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_broker(name: str, neighbors, protocol: dict | None = None, overlay: dict | None = None) -> Broker:
    """``overlay``: every broker's overlay neighbours (stacks such as soft links need it)."""
    protocol = dict(protocol or {})
    return broker_class(protocol)(name, neighbors, protocol, overlay)
