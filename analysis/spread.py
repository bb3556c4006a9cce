"""Spread over seeds: runs of one variant with different seeds, summarised as a mean and a 95%
confidence interval (Student's t over the runs: the runs are few and their spread unknown).

Runs of one variant are named ``<variant>_seed<N>`` (``sweep --repeat`` and ``figure --repeat``
name them so); a run without that suffix is a variant of one run.
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
from scipy import stats

LEVEL = 0.95
DESCRIBED = "mean and 95% confidence interval (Student's t) over the seeds"
_SEEDED = re.compile(r"^(?P<variant>.+)_seed(?P<seed>\d+)$")


def seeded_name(name: str, seed: int) -> str:
    """The name of ``name``'s run with ``seed``, one of several."""
    return f"{name}_seed{seed}"


def variant_of(name: str) -> tuple[str, int | None]:
    """(variant, seed) of a run name; seed None for a run of its own."""
    found = _SEEDED.match(name)
    return (found["variant"], int(found["seed"])) if found else (name, None)


def interval(values) -> tuple[float, float | None]:
    """(mean, half-width of the 95% confidence interval) of one value per seed; the half-width
    is None for a single value (no interval), 0 when every seed gave the same value."""
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if not len(values):
        return float("nan"), None
    mean = float(values.mean())
    if len(values) < 2:
        return mean, None
    spread = float(values.std(ddof=1))
    return mean, float(stats.t.ppf(0.5 + LEVEL / 2, len(values) - 1) * spread / np.sqrt(len(values)))


def by_variant(rows: list[dict], column: str = "run") -> dict[str, list[dict]]:
    """Rows grouped by the variant of their run's name, in first-seen order."""
    grouped = defaultdict(list)
    for row in rows:
        grouped[variant_of(row[column])[0]].append(row)
    return dict(grouped)


def summarised(rows: list[dict], columns: list[str]) -> list[dict]:
    """Per variant with several seeds: ``run`` (the variant), ``seeds`` (their numbers) and,
    per numeric column, ``<column>`` (the mean) and ``<column>_ci`` (the half-width)."""
    found = []
    for variant, members in by_variant(rows).items():
        seeds = sorted(s for s in (variant_of(r["run"])[1] for r in members) if s is not None)
        if len(seeds) < 2:
            continue
        row = {"run": variant, "seeds": seeds}
        for column in columns:
            values = [r.get(column) for r in members]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values if v is not None) \
                    and any(v is not None for v in values):
                row[column], row[f"{column}_ci"] = interval(values)
        found.append(row)
    return found


def ratios(numerators: dict[int, float], denominators: dict[int, float]) -> tuple[float, float | None]:
    """The interval of per-seed ratios (seed -> value of each side): each seed's ratio first,
    then their mean and interval."""
    common = sorted(set(numerators) & set(denominators))
    return interval([numerators[s] / denominators[s] for s in common if denominators[s]])
