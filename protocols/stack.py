"""Composes the broker class a scenario's protocol section asks for, in one visible place."""
from __future__ import annotations

from .broker import Broker

PROTOCOL_KEYS = {"check_conformance"}


def broker_class(protocol: dict) -> type[Broker]:
    """The base broker with the scenario's mixins, outermost first."""
    mixins: list[type] = []
    if not mixins:
        return Broker
    return type("Broker_" + "_".join(m.__name__ for m in mixins), (*mixins, Broker), {})


def make_broker(name: str, neighbors, protocol: dict | None = None) -> Broker:
    protocol = dict(protocol or {})
    return broker_class(protocol)(name, neighbors, protocol)
