"""The cost model: how much virtual time a broker spends on one message.

service time (us) = base[kind] + sum over work counters of coefficient[kind][counter] * count,
where the counters are those the index reports (protocols.index.Work). A profile is a YAML
file with ``base`` and ``per`` maps; ``default`` entries apply to kinds not listed. Profiles
shipped: ``zero`` (no processing cost) and ``padres`` (fitted to PADRES's measured times).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from protocols.errors import InputError
from protocols.index import Work

PROFILE_DIR = Path(__file__).with_name("profiles")
COUNTERS = tuple(Work().as_dict())


@dataclass
class CostModel:
    name: str = "zero"
    base: dict[str, float] = field(default_factory=dict)
    per: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # per kind: (base, [(counter, coefficient), ...]) with defaults folded in
        self._plans: dict[str, tuple[float, list[tuple[str, float]]]] = {}

    def _plan(self, kind: str):
        plan = self._plans.get(kind)
        if plan is None:
            base = self.base.get(kind, self.base.get("default", 0.0))
            coefficients = dict(self.per.get("default", {}))
            coefficients.update(self.per.get(kind, {}))
            plan = self._plans[kind] = (base, [(c, k) for c, k in sorted(coefficients.items()) if k])
        return plan

    def min_service_us(self) -> int:
        """A lower bound on any message's service time: the smallest base cost (coefficients
        only add)."""
        bases = list(self.base.values()) + [self.base.get("default", 0.0)]
        return max(0, int(min(bases)))

    def service_us(self, kind: str, work: Work, units: int = 1) -> int:
        """``units`` > 1 for a batch of ``kind`` messages: each pays its base cost."""
        base, terms = self._plan(kind)
        total = base * units
        for counter, coefficient in terms:
            total += coefficient * getattr(work, counter)
        return max(0, round(total))

    def as_dict(self) -> dict:
        return {"name": self.name, "base": self.base, "per": self.per}


def load_profile(spec: str | dict, relative_to: Path | None = None, where: str = "runtime.costs") -> CostModel:
    """A profile by name (``zero``, ``padres``), by path to a YAML file, or as an inline map."""
    if isinstance(spec, dict):
        return _from_mapping(spec, where)
    if not isinstance(spec, str):
        raise InputError(f"{where}: expected a profile name or a path, got {spec!r}")
    path = PROFILE_DIR / f"{spec}.yaml"
    if not path.is_file():
        path = Path(spec) if relative_to is None or Path(spec).is_absolute() else relative_to / spec
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in PROFILE_DIR.glob("*.yaml")))
        raise InputError(f"{where}: no profile {spec!r} (known: {names}; or give a path to a profile file)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})") from None
    return _from_mapping(data, str(path))


def _from_mapping(data, where: str) -> CostModel:
    if not isinstance(data, dict):
        raise InputError(f"{where}: a profile is a mapping with 'base' and 'per'")
    unknown = set(data) - {"name", "base", "per", "fitted"}
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected name, base, per)")
    base = data.get("base") or {}
    per = data.get("per") or {}
    if not isinstance(base, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in base.values()):
        raise InputError(f"{where}: 'base' maps message kinds to non-negative microseconds")
    if not isinstance(per, dict):
        raise InputError(f"{where}: 'per' maps message kinds to counter coefficients")
    for kind, coefficients in per.items():
        if not isinstance(coefficients, dict):
            raise InputError(f"{where}: per.{kind} must map counters to coefficients")
        for counter, value in coefficients.items():
            if counter not in COUNTERS:
                raise InputError(f"{where}: per.{kind}.{counter}: unknown counter (known: {', '.join(COUNTERS)})")
            if not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"{where}: per.{kind}.{counter} must be a non-negative number")
    return CostModel(str(data.get("name", where)), dict(base), {k: dict(v) for k, v in per.items()})
