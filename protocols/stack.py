"""Composes the broker class a scenario's protocol section asks for, in one visible place."""
from __future__ import annotations

from .broker import Broker
from .covering import ActiveCovering, LazyCovering, PackingCovering
from .pruning import Pruning

# protocol key -> {setting: mixin (None: nothing added)}; the first setting is the default
MIXINS: dict[str, dict[str, type | None]] = {
    "covering": {"none": None, "lazy": LazyCovering, "active": ActiveCovering, "packing": PackingCovering},
}
# protocol key -> mixin added when the key's settings are given (null: off)
CONFIGURED_MIXINS: dict[str, type] = {"pruning": Pruning}
PROTOCOL_KEYS = {"check_conformance", *MIXINS, *CONFIGURED_MIXINS}


def broker_class(protocol: dict) -> type[Broker]:
    """The base broker with the scenario's mixins, outermost first."""
    mixins = [
        choices[protocol.get(key, next(iter(choices)))]
        for key, choices in MIXINS.items()
    ]
    mixins = [mixin for key, mixin in CONFIGURED_MIXINS.items() if protocol.get(key)] + mixins
    mixins = [m for m in mixins if m is not None]
    if not mixins:
        return Broker
    return type("Broker_" + "_".join(m.__name__ for m in mixins), (*mixins, Broker), {})


def make_broker(name: str, neighbors, protocol: dict | None = None) -> Broker:
    protocol = dict(protocol or {})
    return broker_class(protocol)(name, neighbors, protocol)
