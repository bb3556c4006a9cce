"""Seeded workload generators, registered by name for ``workload.generator`` in a scenario.

Each generator takes the overlay's broker names (sorted), the scenario seed and keyword
parameters, and returns trace records (dicts in the trace format of DESIGN.md section 9), so
a generated workload can be written out and replayed as a trace. A publish record's
``content`` may be a ``Publication`` already parsed, whose ``str()`` is its text. The
registry is workloads/registry.py; each family of workloads is a module of its own, imported
here so that every generator is registered.
"""
from .bursts import covering_degree
from .keywords import KEYWORD_DATASETS, keywords, keywords_paper
from .mixes import SYMBOLS, random_mix
from .mobile import (
           MOBILE_MOVES,
           MOBILE_SUBSCRIPTIONS,
           mobile_monitors,
           mobile_rush_hour,
)
from .registry import GENERATORS, generator, rng_for
from .siena import SienaVocabulary, siena
from .stockquotes import stock_quotes
from .workflow import WORKFLOW_SUBSCRIPTIONS, workflow
from .zipf import zipf_groups

__all__ = ["GENERATORS", "KEYWORD_DATASETS", "MOBILE_MOVES", "MOBILE_SUBSCRIPTIONS", "SYMBOLS",
           "WORKFLOW_SUBSCRIPTIONS", "SienaVocabulary", "covering_degree", "generator", "keywords", "keywords_paper",
           "mobile_monitors", "mobile_rush_hour", "random_mix", "rng_for", "siena", "stock_quotes", "workflow",
           "zipf_groups"]
