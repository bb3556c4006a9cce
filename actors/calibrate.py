"""``pubsub-emu calibrate``: time this machine's index and fit a cost profile.

For each table size, fill an index with SIENA-style subscriptions and time matching and
covering queries and inserts. Each timed query also reports its work counters; a least-squares
fit of time = base + c_entries * entries + c_predicates * cells gives the coefficients the
cost model uses, so service times in the emulation follow this implementation's real costs.
Wall-clock timing here is the point of the command: it runs outside any emulation.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import yaml

from protocols.index import FilterIndex
from protocols.language import parse_filter
from workloads.generators import SienaVocabulary, rng_for


TIMINGS = 3  # per query, the fastest kept: a time slice another process took is not the index's cost


def measure(sizes: list[int], queries: int = 200, seed: int = 0) -> dict[str, list[tuple[float, float, float]]]:
    """(entries, cells compared, microseconds) per timed query, per query family (each query
    timed ``TIMINGS`` times, its fastest kept)."""
    language = SienaVocabulary()
    rng = rng_for(seed, "calibrate")
    samples: dict[str, list] = {"match": [], "cover": [], "insert": []}
    for size in sizes:
        index = FilterIndex()
        filters = [parse_filter(language.subscription(rng)) for _ in range(size)]
        started = time.perf_counter()
        for key, f in enumerate(filters):
            index.add(key, f)
        samples["insert"].append((size, 0, (time.perf_counter() - started) * 1e6 / size))
        pubs = [language.publication(rng) for _ in range(queries)]
        probes = [parse_filter(language.subscription(rng)) for _ in range(queries)]
        for family, run in (("match", lambda p: index.matching(p)), ("cover", lambda f: index.covering(f))):
            for item in pubs if family == "match" else probes:
                elapsed = float("inf")
                for _ in range(TIMINGS):
                    index.work.reset()
                    started = time.perf_counter()
                    run(item)
                    elapsed = min(elapsed, (time.perf_counter() - started) * 1e6)
                cells = index.work.match_predicates if family == "match" else index.work.cover_predicates
                samples[family].append((len(index), cells, elapsed))
    return samples


def fit(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Least squares time = base + a * entries + b * cells, clipped at zero."""
    data = np.array(rows, dtype=float)
    design = np.column_stack([np.ones(len(data)), data[:, 0], data[:, 1]])
    solution, *_ = np.linalg.lstsq(design, data[:, 2], rcond=None)
    return tuple(max(0.0, float(v)) for v in solution)


def calibrate(out: Path, sizes: list[int]) -> dict:
    samples = measure(sizes)
    match_base, match_entries, match_cells = fit(samples["match"])
    cover_base, cover_entries, cover_cells = fit(samples["cover"])
    insert_us = float(np.mean([us for _, _, us in samples["insert"]]))
    base = round(match_base + cover_base + insert_us, 2)
    profile = {
        "name": f"calibrated-{out.stem}",
        "base": {"default": base},
        "per": {"default": {
            "match_entries": round(match_entries, 6), "match_predicates": round(match_cells, 6),
            "cover_entries": round(cover_entries, 6), "cover_predicates": round(cover_cells, 6),
        }},
        "fitted": {"sizes": sizes, "match_base_us": round(match_base, 2), "cover_base_us": round(cover_base, 2),
                   "insert_us": round(insert_us, 2)},
    }
    Path(out).write_text(yaml.safe_dump(profile, sort_keys=False))
    return profile
