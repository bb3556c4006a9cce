"""``workflow``: the incremental-pruning paper's distributed workflow (execution engines,
monitors and periodic auditors on the ``regions`` overlay)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .registry import generator, require, rng_for


@generator("workflow")
def workflow(
    brokers: list[str],
    graph=None,
    seed: int = 0,
    engines_per_domain: int = 6,
    small: int = 80,
    medium: int = 80,
    large: int = 40,
    small_activities: int = 3,
    medium_activities: int = 10,
    large_activities: int = 26,
    monitored: float = 0.3,
    auditors: int = 4,
    trigger_min: float = 60.0,
    trigger_max: float = 180.0,
    activity_min: float = 0.5,
    activity_max: float = 2.0,
    audit_interval: float = 600.0,
    audit_length: float = 60.0,
    duration: float = 3600.0,
    subscriptions: str = "per_instance",
) -> list[dict]:
    """The distributed-workflow workload of the incremental-pruning paper, on an overlay of
    domains (the ``regions`` topology: its regions are the domains, ``engines_per_domain``
    execution engines on each domain's edge brokers, e.g. ``regions: 4, inner_per_region: 3,
    edges_per_inner: 2`` for four domains of ten brokers in three levels).

    Processes: ``small`` of ``small_activities`` activities on one engine, ``medium`` of
    ``medium_activities`` on engines of one domain, ``large`` of ``large_activities`` on
    engines anywhere. Each is deployed at the start: a trigger source (at its domain's core) advertises
    its triggers, its first activity's engine subscribes to them, and every engine advertises
    activity completions. Each process is triggered with its own period (``trigger_min`` to
    ``trigger_max`` s, a random phase); an instance's activities run one after another
    (``activity_min`` to ``activity_max`` s each): when it is triggered, the engine of every
    later activity subscribes to its predecessor's completion in this instance, and drops that
    subscription once its own activity has completed. A share ``monitored`` of the processes
    has a monitor client subscribing to all of its completions; ``auditors`` clients (one per
    domain in turn) subscribe to every trigger for ``audit_length`` s every
    ``audit_interval`` s (each with its own phase). This is ``subscriptions: per_instance``,
    the model earlier results use (bench/RESULTS.md).

    ``subscriptions: per_activity`` is the workflow as the paper's platform runs it: every
    control-flow message is a trigger, and each activity's engine subscribes once, at
    deployment, to the trigger that starts it (``[class,eq,'TRIGGER'],[process,eq,'Pp'],
    [activity,=,a]``) and keeps it (the paper does not say; PADRES's process engine deploys an
    agent per activity that subscribes to its predecessors' completions for the life of the
    process). An instance starts with the process's trigger for activity 0 (from its source
    at the domain's core); each activity, when done, publishes the trigger of the next one
    (the last one's, for activity n, reaches only monitors and auditors). A monitor subscribes
    to all of its process's triggers. An auditor's filter on every trigger then covers every
    activity subscription of the processes without a monitor and every monitor's: active
    covering withholds them while an auditor is there and forwards them all again when it
    leaves (the paper's burst)."""
    _check_workflow(monitored, (small, medium, large), (small_activities, medium_activities, large_activities),
                    (trigger_min, trigger_max), (activity_min, activity_max), audit_interval, audit_length)
    if subscriptions not in WORKFLOW_SUBSCRIPTIONS:
        raise ValueError(f"subscriptions: expected one of {', '.join(WORKFLOW_SUBSCRIPTIONS)}, got {subscriptions!r}")
    per_activity = subscriptions == "per_activity"
    rng = rng_for(seed, "workflow")
    domains = _workflow_domains(graph, brokers)
    engines = _workflow_engines(domains, engines_per_domain)
    published = "[class,eq,'TRIGGER'],[process,str-prefix,'P'],[instance,>=,0],[activity,>=,1]" if per_activity \
        else "[class,eq,'ACTIVITY'],[process,str-prefix,'P'],[instance,>=,0],[activity,>=,0]"
    records = [{"t": 0.0, "op": "advertise", "client": name, "broker": broker, "id": f"ADV-{name}", "filter": published}
               for name, broker in engines.everywhere]
    process_records = _per_activity_process if per_activity else _per_instance_process
    for p, domain, steps in _workflow_processes(rng, domains, engines, (small, medium, large),
                                                (small_activities, medium_activities, large_activities)):
        records += process_records(rng, p, steps, domains[domain][0], rng.random() < monitored, brokers,
                                   (trigger_min, trigger_max), (activity_min, activity_max), duration)
    # a generator of its own: the audits stay where they are when the processes change
    records += _auditors(rng_for(seed, "workflow/auditors"), domains, auditors, audit_interval, audit_length, duration)
    records.sort(key=lambda r: r["t"])  # stable: ties keep generation order
    return records


WORKFLOW_SUBSCRIPTIONS = ("per_instance", "per_activity")


def _check_workflow(monitored: float, counts: tuple, activities: tuple, trigger_period: tuple,
                    activity_time: tuple, audit_interval: float, audit_length: float) -> None:
    if not 0 <= monitored <= 1:
        raise ValueError(f"monitored: expected a share in [0, 1], got {monitored!r}")
    sizes = ("small", "medium", "large")
    require(*((size, count, count >= 0, "0 or more processes") for size, count in zip(sizes, counts)),
             *((f"{size}_activities", n, n >= 1, "at least 1") for size, n in zip(sizes, activities)),
             ("trigger_min", trigger_period[0], trigger_period[0] > 0, "a positive number of seconds"),
             ("trigger_max", trigger_period[1], trigger_period[1] >= trigger_period[0],
              f"at least trigger_min ({trigger_period[0]})"),
             ("activity_min", activity_time[0], activity_time[0] > 0, "a positive number of seconds"),
             ("activity_max", activity_time[1], activity_time[1] >= activity_time[0],
              f"at least activity_min ({activity_time[0]})"),
             ("audit_length", audit_length, 0 < audit_length <= audit_interval,
              f"a positive number of seconds, at most audit_interval ({audit_interval})"))


@dataclass(frozen=True)
class _Engines:
    per_domain: dict[int, list[tuple[str, str]]]  # domain -> its engines' (client, broker)
    everywhere: list[tuple[str, str]]


def _workflow_engines(domains: dict, engines_per_domain: int) -> _Engines:
    """``engines_per_domain`` engines on each domain's edge brokers in turn."""
    per_domain = {d: [(f"eng-{d}-{e}", edges[e % len(edges)]) for e in range(engines_per_domain)]
                  for d, (_, edges) in domains.items()}
    return _Engines(per_domain, [engine for d in sorted(per_domain) for engine in per_domain[d]])


def _workflow_processes(rng, domains: dict, engines: _Engines, counts: tuple, activities: tuple):
    """Per process, in turn: its number, domain and the (engine, broker) of its activities in
    order; ``counts`` small, medium and large processes of ``activities`` activities: a small
    one on one engine, a medium one on engines of its domain, a large one on engines anywhere.
    Drawn as the caller consumes them (the caller's own draws for a process come between)."""
    sizes = [(kind, length) for kind, (count, length) in enumerate(zip(counts, activities)) for _ in range(count)]
    for p, (kind, length) in enumerate(sizes):
        domain = rng.choice(sorted(domains))
        if kind == 0:
            steps = [rng.choice(engines.per_domain[domain])] * length
        else:
            pool = engines.per_domain[domain] if kind == 1 else engines.everywhere
            steps = [rng.choice(pool) for _ in range(length)]
        yield p, domain, steps


def _auditors(rng, domains: dict, auditors: int, audit_interval: float, audit_length: float,
              duration: float) -> list[dict]:
    """``auditors`` clients (at each domain's core in turn) subscribing to every trigger
    message for ``audit_length`` s every ``audit_interval`` s, each with its own phase."""
    cores = [core for core, _ in domains.values()]
    records = []
    for a in range(auditors):
        phase = rng.uniform(0, audit_interval)
        for r, t in enumerate(_periodic(phase, audit_interval, duration - audit_length)):
            fields = {"client": f"auditor{a}", "id": f"AUD{a}.{r}"}
            records.append({"t": round(t, 6), "op": "subscribe", "broker": cores[a % len(cores)],
                            "filter": "[class,eq,'TRIGGER']", **fields})
            records.append({"t": round(t + audit_length, 6), "op": "unsubscribe", **fields})
    return records


def _workflow_domains(graph, brokers: list[str]) -> dict[int, tuple[str, list[str]]]:
    """Per domain (the overlay's ``region``), its core and its edge brokers (without regions:
    one domain, the first broker as core and every broker as an edge)."""
    roles = {n: graph.nodes[n] for n in sorted(graph)} if graph is not None else {}
    if not any("region" in attrs for attrs in roles.values()):
        return {1: (sorted(brokers)[0], sorted(brokers))}
    cores = {attrs["region"]: name for name, attrs in roles.items() if attrs.get("role") == "core"}
    edges: dict[int, list[str]] = {}
    for name, attrs in roles.items():
        if attrs.get("role") == "edge":
            edges.setdefault(attrs["region"], []).append(name)
    return {domain: (cores[domain], edges[domain]) for domain in sorted(cores)}


def _periodic(phase: float, period: float, until: float) -> list[float]:
    return [phase + k * period for k in range(max(0, math.ceil((until - phase) / period)))]


def _per_instance_process(rng, p: int, steps: list, core: str, monitored: bool, brokers: list[str],
                          trigger_period: tuple, activity_time: tuple, duration: float) -> list[dict]:
    """The records of process ``P<p>``: its deployment and every instance that completes by
    ``duration``; ``steps`` are the (engine, broker) of its activities in order."""
    source, first = f"trg-P{p}", steps[0]
    records = [
        {"t": 0.0, "op": "advertise", "client": source, "broker": core, "id": f"ADV-{source}",
         "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[instance,>=,0]"},
        {"t": 0.5, "op": "subscribe", "client": first[0], "broker": first[1], "id": f"TRG-P{p}",
         "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}']"},
    ]
    if monitored:
        records.append({"t": 0.5, "op": "subscribe", "client": f"mon-P{p}", "broker": rng.choice(brokers),
                        "id": f"MON-P{p}", "filter": f"[class,eq,'ACTIVITY'],[process,eq,'P{p}']"})
    for instance, t, done in _instances(rng, len(steps), trigger_period, activity_time, duration):
        records.append({"t": round(t, 6), "op": "publish", "client": source, "id": f"T{p}.{instance}",
                        "content": f"[class,'TRIGGER'],[process,'P{p}'],[instance,{instance}]"})
        for a, (engine, _) in enumerate(steps):
            if a > 0:
                wait = {"client": engine, "id": f"W{p}.{instance}.{a}"}
                records.append({"t": round(t + 0.1, 6), "op": "subscribe", **wait, "filter": (
                    f"[class,eq,'ACTIVITY'],[process,eq,'P{p}'],[instance,=,{instance}],[activity,=,{a - 1}]")})
                records.append({"t": round(t + done[a], 6), "op": "unsubscribe", **wait})
            records.append({"t": round(t + done[a], 6), "op": "publish", "client": engine,
                            "id": f"E{p}.{instance}.{a}",
                            "content": f"[class,'ACTIVITY'],[process,'P{p}'],[instance,{instance}],[activity,{a}]"})
    return records


def _instances(rng, activities: int, trigger_period: tuple, activity_time: tuple, duration: float):
    """A process's instances that complete by ``duration``: (instance, trigger time, when each
    activity is done after it); the process's period and phase are drawn first."""
    period = rng.uniform(*trigger_period)
    t = 1.0 + rng.uniform(0, period)
    instance = 0
    while True:
        done = list(itertools.accumulate(rng.uniform(*activity_time) for _ in range(activities)))
        if t + done[-1] >= duration:
            return
        yield instance, t, done
        t += period
        instance += 1


def _per_activity_process(rng, p: int, steps: list, core: str, monitored: bool, brokers: list[str],
                          trigger_period: tuple, activity_time: tuple, duration: float) -> list[dict]:
    """The records of process ``P<p>`` with ``subscriptions: per_activity``: its deployment
    (advertisement, one subscription per activity, the monitor's) and every instance that
    completes by ``duration``; ``steps`` are the (engine, broker) of its activities in order."""
    source = f"trg-P{p}"
    records = [{"t": 0.0, "op": "advertise", "client": source, "broker": core, "id": f"ADV-{source}",
                "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[instance,>=,0],[activity,=,0]"}]
    for a, (engine, broker) in enumerate(steps):
        records.append({"t": 0.5, "op": "subscribe", "client": engine, "broker": broker, "id": f"ACT-P{p}.{a}",
                        "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}'],[activity,=,{a}]"})
    if monitored:
        records.append({"t": 0.5, "op": "subscribe", "client": f"mon-P{p}", "broker": rng.choice(brokers),
                        "id": f"MON-P{p}", "filter": f"[class,eq,'TRIGGER'],[process,eq,'P{p}']"})
    for instance, t, done in _instances(rng, len(steps), trigger_period, activity_time, duration):
        records.append(_trigger(t, source, p, instance, 0))
        for a, (engine, _) in enumerate(steps):
            records.append(_trigger(t + done[a], engine, p, instance, a + 1))
    return records


def _trigger(t: float, client: str, p: int, instance: int, activity: int) -> dict:
    return {"t": round(t, 6), "op": "publish", "client": client, "id": f"T{p}.{instance}.{activity}",
            "content": f"[class,'TRIGGER'],[process,'P{p}'],[instance,{instance}],[activity,{activity}]"}
