"""The delivery oracle (the package's, workloads/oracle.py) and a synchronous message pump for
broker tests.

The oracle reads trace records and says which (publication, subscription) pairs a correct
network delivers when every operation completes before the next begins: a publication that
conforms to one of its publisher's active advertisements reaches every active subscription
it matches, and nothing else.
"""
import topologies
from actors.pump import SyncPump
from protocols.stack import make_broker
from workloads.oracle import expected_deliveries  # noqa: F401 (the tests' oracle)


def scenario_records(path, overrides=()) -> list[dict]:
    """The trace records the workload generator of the scenario at ``path`` makes."""
    from pathlib import Path

    from experiments.build import generated_records, resolve

    spec = resolve(Path(path), list(overrides))
    return generated_records(spec.scenario, spec.graph, Path(path).parent, Path(path))


class Pump(SyncPump):
    """A network of brokers run synchronously, recording deliveries, sends and events."""

    def __init__(self, graph, protocol: dict | None = None) -> None:
        overlay = topologies.neighbours(graph)
        super().__init__({n: make_broker(n, overlay[n], protocol, overlay) for n in sorted(graph)})
        self.deliveries: list[tuple[str, str]] = []
        self.sent: list[tuple[str, str, str, str]] = []  # (sender, destination, kind, id)
        self.events: list[tuple[str, dict]] = []

    def send(self, destination, message):
        self.sent.append((self._current, destination, message.kind, message.id))
        super().send(destination, message)

    def deliver(self, publication, sub_ids, clients):
        self.deliveries += [(publication.id, sub_id) for sub_id in sub_ids]

    def event(self, kind, **detail):
        self.events.append((kind, detail))
