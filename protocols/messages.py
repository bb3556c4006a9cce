"""Messages exchanged by brokers and handed to them by clients.

One dataclass serves every kind, so the runtime can queue, cost and record messages without
knowing protocols. ``key`` identifies an advertisement or subscription incarnation: a client
that moves re-issues its filters with the next ``gen``, so late messages about the old
incarnation never touch the new one.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .language import Filter, Publication, rebuilt_by_constructor

CLIENT_KINDS = ("adv", "unadv", "sub", "unsub", "pub", "detach", "attach")


@dataclass(frozen=True, slots=True)
class Message:
    """``kind``: adv unadv sub unsub pub, the client kinds detach/attach, or a protocol's own.

    ``id`` is the advertisement, subscription or publication id of the trace (the client id
    for detach/attach). ``items`` carries the messages of a composite (attach, batches).
    ``headers`` holds protocol extensions (statistics, tuple lists) as a tuple of pairs.
    """

    kind: str
    id: str
    gen: int = 0
    filter: Filter | None = None
    publication: Publication | None = None
    client: str | None = None
    t_pub: int = 0
    hops: int = 0
    cause: str | None = None
    items: tuple["Message", ...] = ()
    headers: tuple[tuple[str, object], ...] = field(default=())

    __reduce__ = rebuilt_by_constructor

    @property
    def key(self) -> tuple[str, int]:
        return (self.id, self.gen)

    def header(self, name: str, default=None):
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def with_headers(self, **updates) -> "Message":
        kept = tuple((k, v) for k, v in self.headers if k not in updates)
        return replace(self, headers=kept + tuple(sorted(updates.items())))

    def unsubscription(self, **fields) -> "Message":
        """The unsubscription of this subscription (``cause``, ``headers`` as given)."""
        return Message("unsub", self.id, self.gen, client=self.client, **fields)

    def forwarded(self) -> "Message":
        """The copy of a publication sent one hop further."""
        return Message(self.kind, self.id, self.gen, self.filter, self.publication, self.client, self.t_pub,
                       self.hops + 1, self.cause, self.items, self.headers)
