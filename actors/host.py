"""A broker host: one engine and its result writer, run in-process or as a Ray actor.

Hosts advance in conservative windows driven by the coordinator. ``run_window`` takes the
batches other hosts sent to this one, processes every event before ``until``, and returns a
small status plus one batch per destination host; under Ray the batches are separate return
objects that the coordinator hands on by reference, so their contents go host to host
through the object store.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

from protocols.stack import make_broker
from workloads.trace import Injection

from .costs import CostModel
from .engine import Engine, Settings
from .results import TableWriter


@dataclass
class HostSpec:
    host: int
    hosts: int
    run_dir: str
    neighbors: dict[str, list[str]]  # this host's brokers -> their overlay neighbours
    index_of: dict[str, int]
    host_of: dict[str, int]
    latency: dict[tuple[str, str], int]
    costs: dict
    settings: Settings
    protocol: dict
    injections: list[Injection]


@dataclass
class Status:
    next_time: float  # earliest pending local event
    next_outgoing: float  # earliest arrival among messages just sent to other hosts
    destinations: list[int]  # hosts with a non-empty batch from this window
    arrivals: int
    largest_queue: int
    last_event_t: int


class BrokerHost:
    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        brokers = {name: make_broker(name, neighbors, spec.protocol) for name, neighbors in spec.neighbors.items()}
        self.writer = TableWriter(Path(spec.run_dir), spec.host)
        costs = CostModel(**spec.costs)
        self.engine = Engine(brokers, spec.index_of, spec.host_of, spec.host, spec.latency, costs, spec.settings, self.writer)
        for injection in spec.injections:
            self.engine.inject(injection.t_us, injection.broker, injection.seq, injection.message)
        spec.injections = []

    def status(self, outbox: dict | None = None) -> Status:
        outbox = outbox or {}
        next_outgoing = min((a.key[0] for batch in outbox.values() for a in batch), default=float("inf"))
        engine = self.engine
        return Status(
            engine.next_time(), next_outgoing, sorted(outbox), engine.arrivals, engine.largest_queue(),
            engine.last_event_t,
        )

    def run_window(self, until: int, *batches):
        for batch in batches:
            self.engine.receive(batch)
        self.engine.run_until(until)
        outbox = self.engine.take_outbox()
        return (self.status(outbox), *[outbox.get(h, []) for h in range(self.spec.hosts)])

    def finish(self, end: int) -> Status:
        self.engine.finish(end)
        self.writer.flush()
        return self.status()

    def snapshot(self) -> bytes:
        """The host's state at a window boundary; results so far are committed first."""
        epoch = self.writer.next_epoch()
        return pickle.dumps((epoch, self.engine.__dict__ | {"writer": None}))

    def restore(self, snapshot: bytes) -> None:
        epoch, state = pickle.loads(snapshot)
        self.writer.discard_after(epoch)
        self.engine.__dict__.update(state)
        self.engine.writer = self.writer
