"""Composes the broker class a scenario's protocol section asks for, in one visible place."""
from __future__ import annotations

from .broker import Broker, configured
from .covering import ActiveCovering, LazyCovering, PackingCovering
from .deltamoves import DeltaMoves
from .multitree import Multitree
from .pruning import Pruning
from .relocation import Relocation
from .softlinks import SoftLinks, SoftLinkSettings

# protocol key -> {setting: mixin (None: nothing added)}; the first setting is the default
MIXINS: dict[str, dict[str, type | None]] = {
    "covering": {"none": None, "lazy": LazyCovering, "active": ActiveCovering, "packing": PackingCovering},
}
# protocol key -> mixin added when the key's settings are given (null: off), outermost first
CONFIGURED_MIXINS: dict[str, type] = {
    "multitree": Multitree, "relocation": Relocation, "pruning": Pruning, "soft_links": SoftLinks,
}
PROTOCOL_KEYS = {"check_conformance", *MIXINS, *CONFIGURED_MIXINS}


def broker_class(protocol: dict) -> type[Broker]:
    """The base broker with the scenario's mixins, outermost first."""
    mixins = [
        choices[protocol.get(key, next(iter(choices)))]
        for key, choices in MIXINS.items()
    ]
    mixins = [mixin for key, mixin in CONFIGURED_MIXINS.items() if protocol.get(key)] + mixins
    if protocol.get("soft_links") and configured(protocol, "soft_links", SoftLinkSettings).moves:
        mixins.insert(0, DeltaMoves)  # outermost: it chooses the routing state a message meets
    return _compose(tuple(m for m in mixins if m is not None))


_COMPOSED: dict[tuple[type, ...], type[Broker]] = {(): Broker}


def _compose(mixins: tuple[type, ...]) -> type[Broker]:
    composed = _COMPOSED.get(mixins)
    if composed is None:
        name = "Broker_" + "_".join(m.__name__ for m in mixins)
        composed = _COMPOSED[mixins] = type(name, (*mixins, Broker), {"__module__": __name__})
    return composed


def __getattr__(name: str) -> type[Broker]:
    """Composed classes by name, so pickle (host snapshots, Ray) finds them in any process."""
    known = {m.__name__: m for choices in MIXINS.values() for m in choices.values() if m is not None}
    known.update((m.__name__, m) for m in (*CONFIGURED_MIXINS.values(), DeltaMoves))
    parts = name.removeprefix("Broker_").split("_") if name.startswith("Broker_") else [None]
    if all(part in known for part in parts):
        return _compose(tuple(known[part] for part in parts))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_broker(name: str, neighbors, protocol: dict | None = None, overlay: dict | None = None) -> Broker:
    """``overlay``: every broker's overlay neighbours (stacks such as soft links need it)."""
    protocol = dict(protocol or {})
    return broker_class(protocol)(name, neighbors, protocol, overlay)
