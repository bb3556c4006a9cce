"""Direct channels between Ray broker hosts: a TCP connection from each host to each peer it
exchanges windows with (``multiprocessing.connection``, authenticated by a key the driver
draws for the run), and one thread per host receiving from all of them.

A window's exchange costs a socket write and read where a Ray actor call costs a task's
scheduling: on the 2-core machine a round between two hosts took 0.03 ms this way against
1.9 ms through actor calls (bench/RESULTS.md, issue 40).
"""
from __future__ import annotations

import threading
from multiprocessing.connection import Client, Connection, Listener, wait
from typing import Callable


def node_address() -> str:
    """This process's node address as Ray knows it (where peers on other nodes reach it)."""
    import ray

    return ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1"


class Channels:
    """One host's side: ``listen`` (once per run), ``open`` to its peers, ``send`` to one."""

    def __init__(self) -> None:
        self.listener: Listener | None = None
        self.outgoing: dict[int, Connection] = {}

    def listen(self, authkey: bytes) -> tuple[str, int]:
        """A listener for this run's peers; its address."""
        self.close()
        self.listener = Listener((node_address(), 0), backlog=128, authkey=authkey)
        return self.listener.address

    def open(self, peers: list[int], addresses: list[tuple[str, int]], authkey: bytes,
             on_message: Callable[..., None]) -> None:
        """Connect to every peer and accept each peer's connection (each host calls this at
        the same time with the same peers relation); ``on_message(*message)`` then runs on a
        receiving thread for every message a peer sends."""
        incoming: list[Connection] = []
        acceptor = threading.Thread(target=lambda: incoming.extend(self.listener.accept() for _ in peers))
        acceptor.start()  # a peer's connection completes only once accepted
        for peer in peers:
            self.outgoing[peer] = Client(addresses[peer], authkey=authkey)
        acceptor.join()
        threading.Thread(target=_receive, args=(incoming, on_message), daemon=True).start()

    def send(self, peer: int, message: tuple) -> None:
        try:
            self.outgoing[peer].send(message)
        except OSError:
            pass  # the peer is gone: the driver finds it lost and restores every host

    def close(self) -> None:
        """Close the listener and the connections to the peers (their receiving threads end)."""
        for connection in self.outgoing.values():
            connection.close()
        self.outgoing = {}
        if self.listener is not None:
            self.listener.close()
            self.listener = None


def _receive(connections: list[Connection], on_message: Callable[..., None]) -> None:
    live = list(connections)
    while live:
        for connection in wait(live):
            try:
                message = connection.recv()
            except (EOFError, OSError):  # the peer closed its side or is gone
                live.remove(connection)
                connection.close()
                continue
            on_message(*message)
