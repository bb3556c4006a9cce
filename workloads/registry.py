"""The workload generators' registry: generators register by name for ``workload.generator``
in a scenario; the seeded generators they draw from, and how they refuse a parameter."""
from __future__ import annotations

import random
from typing import Callable

GENERATORS: dict[str, Callable] = {}


def generator(name: str):
    def register(fn: Callable) -> Callable:
        GENERATORS[name] = fn
        return fn

    return register


def require(*conditions: tuple[str, object, bool, str]) -> None:
    """Refuse the first parameter whose condition fails: (name, value, holds, what was expected);
    the message starts with the parameter's name, which the scenario's error names as its key."""
    for name, value, holds, expected in conditions:
        if not holds:
            raise ValueError(f"{name} {value!r}: expected {expected}")


def rng_for(seed: int, name: str) -> random.Random:
    """A generator seeded from the scenario seed and a stable name (never ``hash()``)."""
    return random.Random(f"{seed}/{name}")
