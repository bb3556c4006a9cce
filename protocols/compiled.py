"""The modules the build compiles with mypyc from their own source (setup.py), and the way back
to that source.

Where the build compiled them, a compiled module (``engine.cpython-311-x86_64-linux-gnu.so``
beside ``engine.py``) is imported in place of its source: same code, same results, less time
in the interpreter. Their sources are imported instead, all of them, where
``PUBSUB_EMU_PURE_PYTHON`` is set (to compare the builds, or to step through them in a
debugger) and where a source is not what was compiled (an edited checkout, until
``pip install -e .`` compiles it again, with a warning saying so): the build records each
source's digest in ``compiled_sources.json`` beside this file. A build without a C compiler
has no compiled modules and runs the sources anyway.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

COMPILED = ("actors.engine", "actors.results", "actors.costs", "protocols.index_storage", "protocols.index_planning",
            "protocols.index", "protocols.routing")
PURE_PYTHON = "PUBSUB_EMU_PURE_PYTHON"  # set (to anything but "" or "0"): import the sources
DIGESTS = "compiled_sources.json"  # beside this file: {module: the sha256 of the source compiled}
_ROOT = Path(__file__).resolve().parent.parent


def source_of(module: str) -> Path:
    return _ROOT.joinpath(*module.split(".")).with_suffix(".py")


def compiled_of(module: str) -> Path | None:
    """The compiled module the build left beside the source, if any."""
    source = source_of(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def digest_of(module: str) -> str:
    return hashlib.sha256(source_of(module).read_bytes()).hexdigest()


def stale_modules() -> list[str]:
    """The compiled modules whose source is not the one compiled."""
    try:
        digests = json.loads(Path(__file__).with_name(DIGESTS).read_text())
    except (OSError, ValueError):  # none (a pure build), or unreadable: nothing compiled is to be trusted
        digests = {}
    return [module for module in COMPILED
            if compiled_of(module) is not None and digests.get(module) != digest_of(module)]


def sources_asked() -> bool:
    """Whether ``PUBSUB_EMU_PURE_PYTHON`` asks for the sources."""
    return os.environ.get(PURE_PYTHON, "") not in ("", "0")


def running_compiled() -> bool:
    """Whether this process runs the compiled modules (call after importing them)."""
    module = sys.modules.get(COMPILED[0])
    return module is not None and not str(module.__file__).endswith(".py")


def build_name() -> str:
    """Which build this process runs, and why where it is not the compiled one."""
    if running_compiled():
        return "compiled build"
    if sources_asked():
        return f"pure-Python build ({PURE_PYTHON} is set)"
    if stale_modules():
        return "pure-Python build (sources changed since compiled: pip install -e . compiles them again)"
    return ("pure-Python build (nothing compiled here: `pip install -e .` compiles where a C compiler is; "
            "about 1.2x slower)")


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources ahead of the compiled modules."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_file_location(name, source_of(name)) if name in COMPILED else None


def use_sources_if_asked_or_stale() -> None:
    """Called once, by ``protocols/__init__.py``: before any compiled module is imported (``actors``
    imports ``protocols`` first)."""
    if sources_asked():
        sys.meta_path.insert(0, _Sources())
    elif stale := stale_modules():
        warnings.warn(f"{', '.join(stale)}: not the source compiled, so running the sources of "
                      f"{', '.join(COMPILED)} (`pip install -v -e .` compiles them again, or says why not)",
                      stacklevel=2)
        sys.meta_path.insert(0, _Sources())
