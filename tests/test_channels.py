"""Channels between hosts: messages in order, both ways at once past the sockets' buffers,
and a gone peer that leaves the sender running."""
import os
import threading
import time
from multiprocessing.connection import Client, Listener

from actors.channels import Channels


def connected_pair():
    """Two hosts' channels, open to each other, and what each received."""
    key = os.urandom(16)
    hosts = [Channels(), Channels()]
    addresses = [host.listen(key) for host in hosts]
    received = ([], [])
    other = threading.Thread(target=hosts[1].open, args=([0], addresses, key, lambda *m: received[1].append(m)))
    other.start()
    hosts[0].open([1], addresses, key, lambda *m: received[0].append(m))
    other.join()
    return hosts, received


def wait_for(condition, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_messages_arrive_in_the_order_sent():
    hosts, received = connected_pair()
    for window in range(200):
        hosts[0].send(1, (window, 0, [("batch", window)], {"next": window}))
    wait_for(lambda: len(received[1]) == 200)
    assert received[1] == [(w, 0, [("batch", w)], {"next": w}) for w in range(200)]
    assert received[0] == []
    for host in hosts:
        host.close()


def test_both_hosts_send_batches_larger_than_the_buffers_at_once():
    """Each host writes 20 MB to the other before reading anything: the receiving threads
    drain the sockets, so neither write blocks for good."""
    hosts, received = connected_pair()
    payload = os.urandom(20 * 2**20)
    senders = [threading.Thread(target=hosts[h].send, args=(1 - h, (0, h, payload, None))) for h in (0, 1)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)
    wait_for(lambda: len(received[0]) == len(received[1]) == 1)
    assert received[0][0][2] == received[1][0][2] == payload
    for host in hosts:
        host.close()


def test_sending_to_a_peer_that_is_gone_does_not_fail():
    """A peer whose process died (it connected, then its sockets closed): writes to it are
    dropped, for the driver to find the host lost and restore every host."""
    key = os.urandom(16)
    host, gone = Channels(), Listener(("127.0.0.1", 0), authkey=key)
    address = host.listen(key)

    def die_after_connecting():
        Client(address, authkey=key).close()
        gone.accept().close()

    peer = threading.Thread(target=die_after_connecting)
    peer.start()
    host.open([1], [address, gone.address], key, lambda *m: None)
    peer.join()
    for window in range(200):  # the first writes may still fit the dead socket's buffer
        host.send(1, (window, 0, [b"x" * 100_000], None))
    host.close()
    gone.close()
