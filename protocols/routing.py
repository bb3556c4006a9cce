"""Routing tables: a filter index whose entries carry their routing metadata in arrays.

The base broker keeps two (PADRES's names): the SRT, advertisements by last hop, and the
PRT, subscriptions by last hop. Per slot of the index a table holds
- ``last_hop``: the neighbour index the entry came from, or -1 for a local client;
- ``toward[slot, n]``: how many advertisements from neighbour n intersect the entry (PRT);
- ``routed[slot, n]``: whether the entry is routed toward neighbour n (PRT);
- the client that issued the entry, and per client its local entries (last hop LOCAL), so
  that a client's leaving or publishing touches its own entries, not the table;
- a local subscription's delivery window: it delivers the publications published in
  ``[since, until)`` (where a client move bounds its incarnation, see protocols/broker.py).
Each question a broker asks of a table is answered by one kernel call of the index (and, for
an advertisement, one more that updates the counts), and returns what the broker acts on
(next hops, the entries whose routing changes), so the Python that follows is as long as
the routing changes, not as the matches.
Neighbour indices follow the broker's sorted neighbour names, so ascending indices are name
order.
"""
from __future__ import annotations

import numpy as np

from . import kernels
from .index import NO_GROUP, FilterIndex, Key, Match, Work
from .index_storage import _grown
from .language import Filter, Publication

LOCAL = -1  # last hop of an entry a local client issued
FOREVER = np.iinfo(np.int64).max  # the end of a delivery window no move has bounded


class RoutingTable(FilterIndex):
    def __init__(self, neighbors: list[str], work: Work | None = None) -> None:
        super().__init__(work)
        self.neighbors = list(neighbors)
        self.toward = np.zeros((8, len(neighbors)), np.int32)
        self.routed = np.zeros((8, len(neighbors)), bool)
        self._group_seen = np.zeros(len(neighbors), np.uint8)
        self._clients = np.empty(8, object)  # per slot: the issuing client
        self._ids = np.empty(8, object)  # per slot: the entry's id (``_id_of``), for deliveries
        self.since = np.zeros(8, np.int64)
        self.until = np.full(8, FOREVER, np.int64)
        self._local_of_client: dict[str | None, dict[Key, None]] = {}  # in the order they became local here
        self.columns: dict[str, np.ndarray] = {}  # a protocol's own per-slot values, by name

    def _grow_slot_arrays(self, size: int) -> None:
        super()._grow_slot_arrays(size)
        self._clients = _grown(self._clients, size, len(self._clients))
        self._ids = _grown(self._ids, size, len(self._ids))
        self.since = _grown(self.since, size, len(self.since))
        self.until = np.concatenate([self.until, np.full(size - len(self.until), FOREVER, np.int64)])
        for name in ("toward", "routed"):
            old = getattr(self, name)
            grown = np.zeros((size, old.shape[1]), old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)
        for name, old in self.columns.items():
            self.columns[name] = np.concatenate([old, np.zeros(size - len(old), old.dtype)])

    def __reduce__(self):  # (compiled with mypyc, an object is made by its ``__init__``: protocols/compiled.py)
        return RoutingTable, (self.neighbors,), self.__getstate__()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "_ids" not in state:  # a checkpoint written before the ids were kept
            self._ids = np.array([_id_of(key) for key in self._keys.tolist()], object)

    def add_column(self, name: str, dtype=np.int32) -> None:
        """A per-slot array ``columns[name]`` (zero for new slots; it is replaced, not
        resized in place, when the table grows: index it through ``columns``)."""
        self.columns[name] = np.zeros(len(self._group), dtype)

    def set_neighbors(self, neighbors: list[str]) -> None:
        """Rewire to ``neighbors`` (sorted names): per-neighbour columns and last hops follow
        their neighbour's name; a dropped neighbour must have no entries left."""
        self._arrays_gathered = False
        where = {name: i for i, name in enumerate(neighbors)}
        moved = np.array([where.get(name, -1) for name in self.neighbors], np.int32)
        from_hop = self._group >= 0
        if len(moved) and (moved[self._group[from_hop]] < 0).any():
            raise ValueError("entries from a dropped neighbour")
        self._group[from_hop] = moved[self._group[from_hop]]
        for name in ("toward", "routed"):
            old = getattr(self, name)
            rewired = np.zeros((len(old), len(neighbors)), old.dtype)
            kept = np.flatnonzero(moved >= 0)
            rewired[:, moved[kept]] = old[:, kept]
            setattr(self, name, rewired)
        self._group_seen = np.zeros(len(neighbors), np.uint8)
        self.neighbors = list(neighbors)

    # ------------------------------------------------------------------ entries

    def add_route(self, key: Key, f: Filter, last_hop: int, client: str | None = None) -> int:
        """Add an entry ``client`` issued, from neighbour index ``last_hop`` (LOCAL: a local
        client); its slot."""
        self.add(key, f)
        slot = self._slot_of[key]
        self._clients[slot], self._ids[slot] = client, _id_of(key)
        self.since[slot], self.until[slot] = 0, FOREVER
        self.toward[slot] = 0
        self.routed[slot] = False
        self.set_last_hop(slot, last_hop)
        return slot

    def remove(self, key: Key) -> Filter:
        slot = self._slot_of[key]
        self.set_last_hop(slot, NO_GROUP)
        self._clients[slot] = self._ids[slot] = None
        return super().remove(key)

    def slot(self, key: Key) -> int:
        return self._slot_of[key]

    def key(self, slot: int) -> Key:
        return self._keys[slot]

    def last_hop(self, slot: int) -> int:
        return int(self._group[slot])

    def set_last_hop(self, slot: int, last_hop: int) -> None:
        """Re-point an entry (a migrated advertisement) to neighbour index ``last_hop``."""
        was = self._group.item(slot)  # (a Python int: comparing NumPy's bools costs half a microsecond)
        self._group[slot] = last_hop
        if (was == LOCAL) == (last_hop == LOCAL):
            return
        client, key = self._clients[slot], self._keys[slot]
        if last_hop == LOCAL:
            self._local_of_client.setdefault(client, {})[key] = None
            return
        local = self._local_of_client[client]
        del local[key]
        if not local:
            del self._local_of_client[client]

    def last_hops(self, slots: np.ndarray) -> np.ndarray:
        """The last hop of each of ``slots``."""
        return self._group[slots]

    def local_keys_of(self, client: str | None) -> list[Key]:
        """Keys of the local entries ``client`` issued, in the order they became local here."""
        return list(self._local_of_client.get(client, ()))

    def delivering(self, slots: np.ndarray, t_pub: int) -> np.ndarray:
        """Those of ``slots`` whose delivery window holds a publication published at ``t_pub``."""
        inside = np.empty(len(slots), np.int64)
        count = kernels.within_windows(slots, self.since, self.until, t_pub, inside)
        return slots if count == len(slots) else inside[:count]

    def ids_of(self, slots: np.ndarray) -> np.ndarray:
        """The ids (``_id_of``) of the entries at ``slots``, an object array (deliveries are
        written from such arrays, see actors/results.py)."""
        return self._ids[slots]

    def clients_of(self, slots: np.ndarray) -> np.ndarray:
        """The clients that issued the entries at ``slots``, in order (an object array)."""
        return self._clients[slots]

    def routed_hops(self, slot: int) -> list[int]:
        """Neighbour indices the entry is routed toward, ascending."""
        return self.routed[slot].nonzero()[0].tolist()

    def routable_hops(self, slot: int) -> list[int]:
        """Neighbour indices with intersecting advertisements, but the entry's last hop."""
        last_hop = self._group.item(slot)
        return [hop for hop in self.toward[slot].nonzero()[0].tolist() if hop != last_hop]

    def routed_keys(self, hop: int) -> list[Key]:
        """Keys of the entries routed toward neighbour index ``hop``, in slot order."""
        return self._keys[self.routed[: len(self._group), hop].nonzero()[0]].tolist()

    # ------------------------------------------------------------------ the questions

    def publication(self, publication: Publication, sender: int) -> Match:
        """The subscriptions matching a publication from neighbour index ``sender`` (LOCAL:
        its publisher), with their distinct last hops but ``sender`` (the next hops) and the
        local ones (the deliveries)."""
        return self.match(publication, sender)

    def advertised(self, adv: Filter, hop: int) -> np.ndarray:
        """An advertisement arrived from ``hop``: count it toward ``hop`` for every entry it
        intersects; the slots that become routable there (not routed there yet, and not from
        there), in slot order."""
        return self._count_toward(self.intersected_by_slots(adv), hop, 1)

    def unadvertised(self, adv: Filter, hop: int) -> np.ndarray:
        """An advertisement from ``hop`` was withdrawn: uncount it; the slots routed toward
        ``hop`` that no advertisement from there intersects any more, in slot order."""
        return self._count_toward(self.intersected_by_slots(adv), hop, -1)

    def _count_toward(self, slots: np.ndarray, hop: int, delta: int) -> np.ndarray:
        if not len(slots):
            return slots
        changed = np.empty(len(slots), np.int64)
        return changed[: kernels.count_toward(slots, self.toward, self.routed, self._group, hop, delta, changed)]

    def hop_counts(self, sub: Filter) -> np.ndarray:
        """Per neighbour index, the entries (advertisements) from there that ``sub`` intersects."""
        counts = np.zeros(len(self.neighbors), np.int32)
        kernels.group_counts(self.intersecting_slots(sub), self._group, counts)
        return counts


def _id_of(key: Key):
    """An entry's id: the id of a key (id, generation), as brokers key entries; else the key."""
    return key[0] if type(key) is tuple else key
