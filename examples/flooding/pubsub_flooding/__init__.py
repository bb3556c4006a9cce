"""Publication flooding with local matching: the baseline content-based routing is measured
against (docs/writing-a-protocol.md builds it step by step).

Implements the flooding strategy that "Design and Evaluation of a Wide-Area Event Notification
Service" (Carzaniga, Rosenblum and Wolf, ACM TOCS 2001) compares its routing with: every
publication travels the whole overlay tree, and each broker matches it against its own
clients' subscriptions only. Subscriptions never leave their broker, so no routing table grows
with the network and no (un)subscription travels; every publication costs a copy on every
link. Deliberate difference: advertisements still flood as in the base broker, because the
conformance check and the client-move handoff (markers sent toward the publishers) use them.
"""
from __future__ import annotations

from dataclasses import dataclass

from protocols.errors import unknown_key
from protocols.plugins import OFF, Needs, Protocol


class Flooding:
    """Publications go to every neighbour but the one they came from; a subscription stays at
    the broker its client is attached to (the output filter lets none cross)."""

    def send_subscription(self, route, hop: str, ctx) -> None:
        """Nothing crosses: the subscription is only matched where it was made."""

    def send_unsubscription(self, route, hop: str, ctx, headers: tuple = ()) -> None:
        """Nothing was sent, so nothing is withdrawn."""

    def publication_next_hops(self, msg, match, sender) -> list[str]:
        return [hop for hop in self.neighbors if hop != sender]


@dataclass(frozen=True)
class FloodingSettings:
    """Flooding has no settings; ``protocol.flooding: {}`` turns it on."""

    @classmethod
    def parse(cls, given: dict, parse_duration) -> "FloodingSettings":
        for key in given:
            raise ValueError(unknown_key(key, ()))
        return cls()


_ALONE = "publications flood the overlay and subscriptions stay where they were made"

PROTOCOL = Protocol(
    key="flooding",
    paper="Design and Evaluation of a Wide-Area Event Notification Service (its flooding baseline)",
    summary="publication flooding with local matching: every publication on every link, subscriptions kept at "
            "their broker",
    settings=FloodingSettings,
    mixins=lambda settings: (Flooding,),
    classes=(Flooding,),
    order=5,
    needs=(Needs("covering", ("none",), f"{_ALONE}: there is nothing to cover"),
           Needs("soft_links", (OFF,), f"{_ALONE}: there is no forwarder to skip"),
           Needs("relocation", (OFF,), f"{_ALONE}: every broker gets every publication wherever its publisher is"),
           Needs("multitree", (OFF,), "both decide where every publication goes")),
)
