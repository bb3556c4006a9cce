"""The scenario file of DESIGN.md section 9: loading, ``extends``, ``--set`` overrides,
validation and the protocols' composition rules (experiments/build.py makes a run of it).
Every mistake is reported once, as an ``InputError`` naming the file and the key (or trace
line) and what was expected, before anything runs.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import re
from pathlib import Path

import yaml

from protocols.errors import InputError
from protocols.plugins import View, installed


def _schema() -> dict:
    """The keys a scenario may hold (every installed protocol's among ``protocol``)."""
    return {**SCHEMA, "protocol": {key: object for key in ("check_conformance", *installed())}}


def _defaults() -> dict:
    return {**DEFAULTS, "protocol": {"check_conformance": True,
                                     **{key: p.default for key, p in installed().items()}}}


SCHEMA = {
    "name": str,
    "seed": int,
    "duration": "duration",
    "topology": {"edgelist": str, "generator": dict, "link": {"latency": "duration"}, "uplink": {"capacity": object}},
    "workload": {"trace": str, "generator": dict},
    "protocol": {},  # filled by _schema
    "runtime": {
        "hosts": object,
        "cpus_per_host": object,
        "mailbox": {"capacity": int, "overflow": str},
        "costs": object,
        "sample_interval": "duration",
        "checkpoint_every": "duration",
        "max_recoveries": int,
    },
    "output": {"dir": str, "collect": str},
    "faults": object,
}
DEFAULTS = {
    "seed": 0,
    "duration": None,
    "topology": {"link": {"latency": "1ms"}},
    "protocol": {},  # filled by _defaults
    "runtime": {"hosts": "auto", "cpus_per_host": 0, "mailbox": {"capacity": 100_000, "overflow": "drop"}, "costs": "padres",
                "sample_interval": "1s", "checkpoint_every": None, "max_recoveries": 3},
    "output": {"dir": "runs", "collect": "hosts"},
    "faults": None,
}
_UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "min": 60_000_000, "h": 3_600_000_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|min|h)\s*$")


def parse_duration(value, where: str, zero: bool = False) -> int:
    """Seconds as a number, or a string with a unit (500us, 1ms, 2s, 10min, 3h) -> microseconds
    (positive, or with ``zero`` non-negative: a point in time)."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a duration such as 2s or 500ms, got {value!r}")
    if isinstance(value, (int, float)):
        micros = round(value * 1_000_000)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise InputError(f"{where}: expected a duration such as 2s, 500ms or 10min, got {value!r}")
        micros = round(float(match.group(1)) * _UNITS[match.group(2)])
    if micros < 0 or (micros == 0 and not zero):
        raise InputError(f"{where}: a {'time' if zero else 'duration'} must be "
                         f"{'non-negative' if zero else 'positive'}, got {value!r}")
    return micros


def load(path: Path, overrides: list[str] = ()) -> dict:
    """The scenario as a mapping, with ``extends`` resolved and ``--set KEY=VALUE`` overrides applied."""
    data = _load_file(Path(path), ())
    for override in overrides:
        _apply_override(data, override, path)
    return data


def _load_file(path: Path, extended_by: tuple[Path, ...]) -> dict:
    """One scenario file; ``extends: OTHER.yaml`` (relative to it) starts from OTHER's mapping
    and merges this file's keys over it, mapping by mapping."""
    if not path.is_file():
        if extended_by:
            raise InputError(f"{extended_by[-1]}: extends: scenario file {path} not found")
        raise InputError(f"{path}: scenario file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a scenario is a YAML mapping with at least 'name', 'topology' and 'workload'")
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise InputError(f"{path}: extends: expected the path of another scenario file, got {base!r}")
    base_path = path.parent / base
    if base_path.resolve() in {p.resolve() for p in (*extended_by, path)}:
        raise InputError(f"{path}: extends: {base} extends itself (directly or through others)")
    return _merge(_load_file(base_path, (*extended_by, path)), data)


def _apply_override(data: dict, override: str, path: Path) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise InputError(f"--set {override!r}: expected KEY=VALUE with a dotted key, e.g. protocol.covering=lazy")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise InputError(f"--set {override!r}: the value is not valid YAML ({getattr(exc, 'problem', None) or exc}); "
                         f"quote it for a string ('{key}=\"...\"') or close its brackets") from None
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:  # an absent or null section (pruning: null) gets its first key
            child = node[part] = {}
        if not isinstance(child, dict):
            raise InputError(f"--set {override!r}: {part!r} in {path} is not a mapping")
        node = child
    node[parts[-1]] = value


def _merge(defaults: dict, given: dict) -> dict:
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_keys(data: dict, schema: dict, prefix: str, path: Path, errors: "_Errors") -> None:
    for key, value in data.items():
        where = f"{path}: {prefix}{key}"
        if key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (expected one of: {', '.join(schema)})"
            errors.add(f"{where}: unknown key{hint}")
            continue
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                errors.add(f"{where}: expected a mapping")
            else:
                _check_keys(value, expected, f"{prefix}{key}.", path, errors)
        elif expected in (str, int, dict) and value is not None:
            if not isinstance(value, expected) or isinstance(value, bool):
                errors.add(f"{where}: expected {_NAMES[expected]}, got {value!r}")


class _Errors:
    """A scenario's errors, collected so that one message names every one of them."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.append(message)

    @contextlib.contextmanager
    def check(self):
        """Run a check; its InputError is recorded and the next check runs."""
        try:
            yield
        except InputError as exc:
            self.add(str(exc))

    def raise_any(self) -> None:
        if len(self.messages) == 1:
            raise InputError(self.messages[0])
        if self.messages:
            raise InputError(f"{len(self.messages)} errors:\n  " + "\n  ".join(self.messages))


_NAMES = {str: "a string", int: "an integer", dict: "a mapping"}


def validate(raw: dict, path: Path) -> dict:
    """Check keys and values; returns the scenario with defaults filled in. Every error is
    reported at once (InputError naming each), as far as the keys' structure allows."""
    errors = _Errors()
    for required in ("name", "topology", "workload"):
        if required not in raw:
            errors.add(f"{path}: missing required key {required!r}")
    _check_keys(raw, _schema(), "", path, errors)
    errors.raise_any()  # the checks below read a scenario of the schema's shape
    scenario = _merge(_defaults(), raw)
    for check in (_check_identity, _check_sections):
        with errors.check():
            check(scenario, path)
    _check_runtime(scenario, path, errors)
    protocol = scenario["protocol"]
    for key, declared in installed().items():
        if declared.settings is not None:
            with errors.check():
                protocol[key] = _configured(protocol, key, declared.settings, path)
    with errors.check():
        check_composition(scenario, None, path)
    errors.raise_any()
    return scenario


def _check_identity(scenario: dict, path: Path) -> None:
    if not scenario["name"]:
        raise InputError(f"{path}: name: must not be empty")
    if scenario["seed"] < 0:
        raise InputError(f"{path}: seed: expected a non-negative integer")


def _check_sections(scenario: dict, path: Path) -> None:
    _exactly_one(scenario["topology"], ("edgelist", "generator"), "topology", path)
    _exactly_one(scenario["workload"], ("trace", "generator"), "workload", path)
    if not isinstance(scenario["protocol"]["check_conformance"], bool):
        raise InputError(f"{path}: protocol.check_conformance: expected true or false")
    for key, declared in installed().items():
        if declared.choices and scenario["protocol"][key] not in declared.choices:
            raise InputError(f"{path}: protocol.{key}: expected one of {', '.join(declared.choices)}, "
                             f"got {scenario['protocol'][key]!r}")


def _check_runtime(scenario: dict, path: Path, errors: _Errors) -> None:
    runtime = scenario["runtime"]
    hosts = runtime["hosts"]
    if not (hosts in ("all", "auto") or (isinstance(hosts, int) and not isinstance(hosts, bool) and hosts >= 0)):
        errors.add(f"{path}: runtime.hosts: expected 0, a positive number, 'all' or 'auto', got {hosts!r}")
    cpus = runtime["cpus_per_host"]
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus < 0:
        errors.add(f"{path}: runtime.cpus_per_host: expected a non-negative number of CPUs, got {cpus!r}")
    if scenario["output"]["collect"] not in ("hosts", "driver"):
        errors.add(f"{path}: output.collect: expected 'hosts' (they write the run directory) or 'driver' "
                   f"(it writes what they send), got {scenario['output']['collect']!r}")
    if runtime["max_recoveries"] < 0:
        errors.add(f"{path}: runtime.max_recoveries: expected a non-negative integer")
    if runtime["mailbox"]["capacity"] < 1:
        errors.add(f"{path}: runtime.mailbox.capacity: expected at least 1")
    if runtime["mailbox"]["overflow"] not in ("drop", "block"):
        errors.add(f"{path}: runtime.mailbox.overflow: expected 'drop' or 'block', got "
                   f"{runtime['mailbox']['overflow']!r}")


def _configured(protocol: dict, key: str, settings_class, path: Path) -> dict | None:
    """``protocol.<key>`` of a configured protocol resolved to every setting (durations in
    microseconds), or None when it is off (null)."""
    given = protocol[key]
    if given is None:
        return None
    if not isinstance(given, dict):
        raise InputError(f"{path}: protocol.{key}: expected a mapping of its settings (or {{}} for the defaults), "
                         "or null for off")
    return _parsed_settings(settings_class, given, key, path)


def check_composition(scenario: dict, injections, path: Path) -> None:
    """Every protocol the scenario turns on composes with the rest of it, as the protocol
    declares (with ``injections``: the workload's moving clients too)."""
    moving = None if injections is None else any(i.message.kind == "detach" for i in injections)
    view = View(scenario["protocol"], scenario["faults"] is not None, moving)
    for key, declared in installed().items():
        if declared.active(scenario["protocol"][key]):
            reason = declared.refused(view)
            if reason:
                raise InputError(f"{path}: protocol.{key}: {reason}")


def _parsed_settings(settings_class, given: dict, key: str, path: Path) -> dict:
    """A protocol's settings class parsing ``protocol.<key>`` (durations in microseconds), as
    a mapping of every setting; its ValueError becomes an InputError naming the key."""
    try:
        settings = settings_class.parse(
            given, lambda value, name: parse_duration(value, f"{path}: protocol.{key}.{name}"))
    except ValueError as exc:
        raise InputError(f"{path}: protocol.{key}.{exc}") from None
    return dataclasses.asdict(settings)


def _exactly_one(section: dict, keys: tuple[str, str], name: str, path: Path) -> None:
    present = [k for k in keys if section.get(k) is not None]
    if len(present) != 1:
        raise InputError(f"{path}: {name}: give exactly one of {keys[0]!r} or {keys[1]!r}")
