"""A synchronous broker context: brokers without time, mailboxes or hosts.

Each injected message is handled, then everything it sets off, before the next one: every
operation completes before the next begins. actors/reference_fit.py replays PADRES's reference
workload with it, and the tests drive brokers with it against the delivery oracle.
"""
from __future__ import annotations

from collections import deque

from workloads.trace import compile_trace


class SyncPump:
    """The context the brokers see (``send``, ``deliver``, ``event``, ``now``, ``queue_len``);
    subclasses observe by overriding those and ``handle``."""

    def __init__(self, brokers: dict) -> None:
        self.brokers = brokers
        self.queue: deque = deque()
        self.now = 0
        self.queue_len = 0
        self._current: str | None = None

    # the broker context
    def send(self, destination, message) -> None:
        self.queue.append((destination, self._current, message))

    def deliver(self, publication, sub_id, client) -> None:
        pass

    def event(self, kind, **detail) -> None:
        pass

    # driving the brokers
    def run(self, records: list[dict], source: str = "trace") -> "SyncPump":
        """Inject a trace's operations, each at its time, each to quiescence."""
        for injection in compile_trace([(source, r) for r in records], self.brokers):
            self.now = injection.t_us
            self.inject(injection.broker, injection.message)
        return self

    def inject(self, broker: str, message) -> None:
        self.queue.append((broker, None, message))
        self._drain()

    def tick(self, broker: str) -> None:
        """The broker's periodic work, then everything it sets off."""
        self._current = broker
        self.brokers[broker].tick(self)
        self._drain()

    def handle(self, destination: str, sender: str | None, message) -> None:
        self.brokers[destination].handle(message, sender, self)

    def _drain(self) -> None:
        while self.queue:
            destination, sender, message = self.queue.popleft()
            self._current = destination
            self.handle(destination, sender, message)
