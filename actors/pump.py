"""A synchronous broker context: brokers without time, mailboxes or hosts.

Each injected message is handled, then everything it sets off, before the next one: every
operation completes before the next begins. Links have no latency and services no cost; a
client a broker resumes elsewhere has its later operations go there (a pause needs nothing:
nothing of the client's waits while a message is handled). actors/reference_fit.py replays PADRES's reference
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
        self.queued_us = 0
        self._current: str | None = None
        self.resumed: dict[tuple[str, str], str] = {}  # (broker in the trace, client) -> where it is now

    # the broker context
    def send(self, destination, message) -> None:
        self.queue.append((destination, self._current, message))

    def deliver(self, publication, sub_ids, clients) -> None:
        pass

    def event(self, kind, **detail) -> None:
        pass

    def latency(self, destination) -> int:
        return 0

    def service_us(self) -> int:
        return 0

    def pause_client(self, client, toward) -> None:
        pass

    def resume_client(self, client, broker) -> None:
        here = self._current
        for key, now_at in self.resumed.items():
            if key[1] == client and now_at == here:
                self.resumed[key] = broker
        self.resumed.setdefault((here, client), broker)

    # driving the brokers
    def run(self, records: list[dict], source: str = "trace") -> "SyncPump":
        """Inject a trace's operations, each at its time, each to quiescence."""
        for injection in compile_trace(records, self.brokers, lambda i: f"{source}: operation {i + 1}"):
            self.now = injection.t_us
            self.inject(injection.broker, injection.message)
        return self

    def inject(self, broker: str, message) -> None:
        broker = self.resumed.get((broker, message.client), broker)
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
