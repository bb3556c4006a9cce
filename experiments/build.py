"""Building what a run needs from a validated scenario (experiments/scenario.py checks it):
the overlay, the workload (built once for scenarios that share it), the fault schedule, the
cost profile and runtime settings, and each protocol's preparations, as a ``RunSpec``;
also a run's workload again from its manifest (``pubsub-emu check``)."""
from __future__ import annotations

import contextlib
import difflib
import gc
import inspect
import json
import re
from pathlib import Path

import topologies
from actors.coordinator import RunSpec
from actors.costs import load_profile
from actors.engine import Settings
from actors.faults import FaultSchedule, parse_faults
from protocols.errors import InputError
from protocols.plugins import installed
from workloads import generators as workload_generators
from workloads.trace import Trace, compile_trace, read_trace

from .scenario import check_composition, load, parse_duration, validate


def _check_overlay(protocol: dict, graph, path: Path) -> None:
    """Settings that name brokers or links, against the overlay."""
    overlay = topologies.neighbours(graph)
    for key, declared in installed().items():
        if declared.check_overlay is not None and declared.active(protocol[key]):
            try:
                declared.check_overlay(protocol[key], overlay)
            except ValueError as exc:
                raise InputError(f"{path}: protocol.{key}.{exc}") from None



def _faults(scenario: dict, graph, path: Path) -> FaultSchedule | None:
    """The scenario's ``faults`` as the schedule every host holds (needs the overlay)."""
    if scenario["faults"] is None:
        return None
    overlay = topologies.neighbours(graph)
    try:
        faults = parse_faults(scenario["faults"], overlay,
                              lambda value, name: parse_duration(value, name, zero=True),
                              lambda value, name: parse_duration(value, name))
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    return FaultSchedule(faults, scenario["seed"], overlay)



# A generator's parameters in seconds (intervals, starts, durations, bounds of a time), by name:
# a negative one is named here, not found later as an operation's time.
SECONDS = re.compile(r"(interval|spacing|_after|duration|length|travel|^start|_start|_end|_min|_max|_from)$")


def _call_generator(spec: dict, registry: dict, where: str, **fixed):
    function, fixed, params = _checked_arguments(spec, registry, where, **fixed)
    signature = inspect.signature(function)
    try:
        return function(**fixed, **params)
    except (ValueError, TypeError) as exc:
        parameter = str(exc).split(" ", 1)[0].rstrip(":")
        if parameter in signature.parameters:  # the generator named the parameter it refused
            raise InputError(f"{where}.{parameter}: {str(exc).split(' ', 1)[1]}") from None
        raise InputError(f"{where}: generator {spec.get('name')!r} refused its parameters: {exc}") from None


def _checked_arguments(spec: dict, registry: dict, where: str, **fixed):
    """The generator ``spec`` names, the fixed arguments it takes and ``spec``'s own, checked
    against its signature (names, types, times in seconds) without calling it."""
    params = dict(spec)
    name = params.pop("name", None)
    if name not in registry:
        raise InputError(f"{where}.name: unknown generator {name!r} (known: {', '.join(sorted(registry))})")
    function = registry[name]
    signature = inspect.signature(function)
    fixed = {k: v for k, v in fixed.items() if k in signature.parameters}
    for key, value in params.items():
        if SECONDS.search(key) and isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise InputError(f"{where}.{key}: {value!r}: a time in seconds, expected 0 or more")
    accepted = [p for p in signature.parameters if p not in fixed]
    for key, value in params.items():
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (parameters: {', '.join(accepted)})"
            raise InputError(f"{where}.{key}: unknown parameter of generator {name!r}{hint}")
        default = signature.parameters[key].default
        optional = value is None and "None" in str(signature.parameters[key].annotation)
        if default is not inspect.Parameter.empty and default is not None and not optional:
            numeric_ok = isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool)
            if type(value) is not type(default) and not numeric_ok:
                raise InputError(f"{where}.{key}: expected {type(default).__name__}, got {value!r}")
    return function, fixed, params


def build_topology(scenario: dict, base: Path, path: Path):
    topology = scenario["topology"]
    default_latency = parse_duration(topology["link"]["latency"], f"{path}: topology.link.latency")
    if topology.get("edgelist"):
        graph = topologies.load_edgelist(
            base / topology["edgelist"], lambda text, where: parse_duration(_number_or_text(text), where)
        )
        where = str(base / topology["edgelist"])
    else:
        graph = _call_generator(topology["generator"], topologies.GENERATORS, f"{path}: topology.generator")
        where = f"{path}: topology.generator"
    topologies.check_tree(graph, where, acyclic=scenario["protocol"]["multitree"] is None)
    for a, b in graph.edges:
        if graph.edges[a, b].get("latency_us") is None:
            graph.edges[a, b]["latency_us"] = default_latency
    for node in graph:
        graph.nodes[node].setdefault("role", None)
    return graph, default_latency


def _uplink_us(uplink: dict | None, path: Path) -> int:
    """``topology.uplink.capacity`` (messages a broker can send per second) as the time one
    message occupies the uplink; 0 without an uplink limit."""
    if not uplink or uplink.get("capacity") is None:
        return 0
    capacity = uplink["capacity"]
    if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not 0 < capacity <= 1_000_000:
        raise InputError(f"{path}: topology.uplink.capacity: expected messages per second, a number in "
                         f"(0, 1000000], got {capacity!r}")
    return max(1, round(1_000_000 / capacity))


def _number_or_text(text: str):
    try:
        return float(text)
    except ValueError:
        return text


_shared_workloads: dict | None = None  # see workloads_shared


@contextlib.contextmanager
def workloads_shared(builds: dict | None = None):
    """Within it, scenarios that build the same workload on the same overlay (the same
    workload section and seed, brokers and links, and trace file) get one build: the runs of a
    figure, the points of a sweep or the files of one ``validate`` that differ only in protocol
    or runtime settings. The builds go into ``builds``; by default into those of the context
    this one is inside, else a new dict dropped when it ends."""
    global _shared_workloads
    outer = _shared_workloads
    _shared_workloads = builds if builds is not None else outer if outer is not None else {}
    try:
        yield
    finally:
        _shared_workloads = outer


def _workload_key(scenario: dict, graph, base: Path) -> str | None:
    """None for a trace that cannot be read (building it reports why)."""
    workload = scenario["workload"]
    trace = None
    if workload.get("trace"):
        try:
            stat = (base / workload["trace"]).stat()
        except OSError:
            return None
        trace = [str((base / workload["trace"]).resolve()), stat.st_mtime_ns, stat.st_size]
    links = sorted((*sorted((a, b)), sorted(data.items())) for a, b, data in graph.edges(data=True))
    return json.dumps([workload, scenario["seed"], str(base.resolve()), trace, sorted(graph), links],
                      sort_keys=True, default=str)


def build_workload(scenario: dict, graph, base: Path, path: Path):
    """The workload's injections (built once for scenarios that share it, inside
    ``workloads_shared``)."""
    key = None if _shared_workloads is None else _workload_key(scenario, graph, base)
    if key is None:
        return _build_workload(scenario, graph, base, path)
    if key not in _shared_workloads:
        _shared_workloads[key] = _build_workload(scenario, graph, base, path)
    return _shared_workloads[key]


def _build_workload(scenario: dict, graph, base: Path, path: Path):
    """The cycle collector is paused while the injections are built, and what is built is
    frozen out of its view (``gc.freeze``): it would walk the millions of records and messages
    (none of them in a cycle) again and again, and took more than half the time of building
    the mobile rush hour."""
    workload = scenario["workload"]
    collecting = gc.isenabled()
    gc.collect()  # so that no garbage is frozen with the workload, never to be collected
    gc.disable()
    try:
        if workload.get("trace"):
            if not (base / workload["trace"]).is_file():
                raise InputError(f"{path}: workload.trace: {base / workload['trace']} not found (a trace file's path "
                                 "is relative to the scenario's directory)")
            trace = read_trace(base / workload["trace"])
        else:
            trace = Trace(generated_records(scenario, graph, base, path),
                          lambda i: f"{path}: workload.generator operation {i + 1}")
        return compile_trace(trace.records, graph, trace.where)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def generated_records(scenario: dict, graph, base: Path, path: Path) -> list[dict]:
    """The trace records a scenario's ``workload.generator`` makes on ``graph``."""
    return _call_generator(scenario["workload"]["generator"], workload_generators.GENERATORS,
                           f"{path}: workload.generator", brokers=sorted(graph), graph=graph, seed=scenario["seed"],
                           base=base)


def rebuild_workload(manifest: dict, where: str):
    """The overlay and compiled workload of a run, from the resolved scenario its manifest
    holds (``where`` names the manifest in errors); files the scenario names are read
    relative to ``scenario_dir``, the directory of the scenario file it was run from."""
    scenario = manifest.get("scenario")
    if not isinstance(scenario, dict):
        raise InputError(f"{where}: no resolved scenario in the manifest")
    base = Path(manifest.get("scenario_dir") or ".")
    path = Path(where)
    graph, _ = build_topology(scenario, base, path)
    return graph, build_workload(scenario, graph, base, path)


def check_arguments(path: Path, overrides: list[str] = ()) -> dict:
    """What ``resolve`` checks short of building the workload: keys and values, the overlay,
    faults, the cost profile, and the workload generator's arguments against its signature
    (not what a generator refuses only while generating). Returns the validated scenario."""
    path = Path(path)
    scenario = validate(load(path, overrides), path)
    graph, _ = build_topology(scenario, path.parent, path)
    _check_overlay(scenario["protocol"], graph, path)
    _faults(scenario, graph, path)
    load_profile(scenario["runtime"]["costs"], path.parent, f"{path}: runtime.costs")
    if generator := scenario["workload"].get("generator"):
        _checked_arguments(generator, workload_generators.GENERATORS, f"{path}: workload.generator",
                           brokers=sorted(graph), graph=graph, seed=scenario["seed"], base=path.parent)
    return scenario


def resolve(path: Path, overrides: list[str] = ()) -> RunSpec:
    """Load, validate and resolve a scenario file into everything a run needs."""
    path = Path(path)
    scenario = validate(load(path, overrides), path)
    base = path.parent
    graph, default_latency = build_topology(scenario, base, path)
    _check_overlay(scenario["protocol"], graph, path)
    faults = _faults(scenario, graph, path)
    injections = build_workload(scenario, graph, base, path)
    check_composition(scenario, injections, path)
    runtime = scenario["runtime"]
    costs = load_profile(runtime["costs"], base, f"{path}: runtime.costs")
    settings = Settings(
        capacity=runtime["mailbox"]["capacity"],
        overflow=runtime["mailbox"]["overflow"],
        sample_interval=parse_duration(runtime["sample_interval"], f"{path}: runtime.sample_interval"),
        default_latency=default_latency,
        uplink_us=_uplink_us(scenario["topology"].get("uplink"), path),
    )
    duration = scenario["duration"]
    duration_us = None if duration is None else parse_duration(duration, f"{path}: duration")
    every = runtime["checkpoint_every"]
    checkpoint_every_us = None if every is None else parse_duration(every, f"{path}: runtime.checkpoint_every")
    protocol = {**scenario["protocol"], "seed": scenario["seed"]}
    for key, declared in installed().items():
        if declared.prepare is not None and declared.active(protocol[key]):
            protocol.update(declared.prepare(protocol[key], injections, scenario["seed"]))
    return RunSpec(
        name=scenario["name"], seed=scenario["seed"], graph=graph, injections=injections,
        protocol=protocol, hosts=runtime["hosts"],
        cpus_per_host=runtime["cpus_per_host"], settings=settings, costs=costs,
        duration_us=duration_us, scenario=scenario, faults=faults, checkpoint_every_us=checkpoint_every_us,
        max_recoveries=runtime["max_recoveries"], collect=scenario["output"]["collect"],
        scenario_dir=str(base.resolve()),
    )
