"""Packing brokers into hosts: balanced parts of the overlay that cut few links."""
from __future__ import annotations

from fractions import Fraction

import networkx as nx


def partition(graph: nx.Graph, hosts: int, weights: list[float] | None = None) -> dict[str, int]:
    """Broker -> host for ``hosts`` parts of near-equal size, or of sizes in proportion to the
    hosts' ``weights`` (the share of a CPU each gets, see ``host_weights``).

    Where links differ in latency, the hosts take whole parts of the overlay left when the
    longest links are removed, if that can be balanced (see ``_cut_at_long_links``): only
    long links then cross hosts, and windows can be as long as they are. Otherwise brokers
    are laid out in depth-first preorder from the overlay's centre (smallest name among
    centres, neighbours visited in name order) and cut into contiguous chunks: in a tree, a
    preorder chunk is a few subtrees, so few links cross between hosts.
    """
    names = sorted(graph)
    hosts = max(1, min(hosts, len(names)))
    if hosts == 1:
        return {name: 0 for name in names}
    shares = _shares(hosts, weights)
    at_long_links = _cut_at_long_links(graph, shares)
    if at_long_links is not None:
        return at_long_links
    root = min(nx.center(graph)) if nx.is_connected(graph) else names[0]
    ordered = _preorder(graph, root)
    ordered += [n for n in names if n not in set(ordered)]
    placement, start = {}, 0
    for host, size in enumerate(_sizes(len(ordered), shares)):
        for name in ordered[start:start + size]:
            placement[name] = host
        start += size
    return placement


def host_weights(host_nodes: list[str], node_cpus: dict[str, float]) -> list[float]:
    """Each host's share of a CPU: one host runs on one core at most, and the hosts placed on a
    node share its CPUs (``host_nodes``: each host's node, by host number). A node that
    reports no CPUs to Ray (a head started with none) counts as a core per host."""
    on_node = {node: host_nodes.count(node) for node in host_nodes}
    return [min(1.0, node_cpus.get(node, 0) / on_node[node]) or 1.0 for node in host_nodes]


def _shares(hosts: int, weights: list[float] | None) -> list[Fraction]:
    """Each host's fraction of the brokers (exact, so equal weights split as evenly as ever)."""
    if weights is None or len(set(weights)) == 1:
        return [Fraction(1, hosts)] * hosts
    total = sum(map(Fraction, weights))
    return [Fraction(w) / total for w in weights]


def _sizes(brokers: int, shares: list[Fraction]) -> list[int]:
    """Broker counts in proportion to ``shares`` (largest remainders first; equal shares give
    the first hosts one more)."""
    exact = [brokers * share for share in shares]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(len(shares)), key=lambda h: (-(exact[h] - sizes[h]), h))
    for host in by_remainder[:brokers - sum(sizes)]:
        sizes[host] += 1
    return sizes


def _cut_at_long_links(graph: nx.Graph, shares: list[Fraction], slack: float = 1.25) -> dict[str, int] | None:
    """Remove the links of the longest latency (then of the two longest, and so on) until
    the parts left can be packed onto the hosts with none above ``slack`` times its share
    (largest part first, each onto the host least loaded for its share); None if links do
    not differ in latency or no cut balances."""
    hosts = len(shares)
    latencies = sorted({d["latency_us"] for _, _, d in graph.edges(data=True)}, reverse=True)
    for threshold in latencies[:-1]:
        short = nx.Graph()
        short.add_nodes_from(graph)
        short.add_edges_from((a, b) for a, b, d in graph.edges(data=True) if d["latency_us"] < threshold)
        parts = sorted((sorted(part) for part in nx.connected_components(short)), key=lambda p: (-len(p), p[0]))
        if len(parts) < hosts:
            continue
        loads = [0] * hosts
        placement = {}
        for part in parts:
            host = min(range(hosts), key=lambda h: (loads[h] / shares[h], h))
            loads[host] += len(part)
            placement.update((name, host) for name in part)
        if all(load <= slack * len(graph) * share for load, share in zip(loads, shares)):
            return placement
    return None


def _preorder(graph: nx.Graph, root: str) -> list[str]:
    order, seen, stack = [], {root}, [root]
    while stack:
        node = stack.pop()
        order.append(node)
        for neighbor in sorted(graph.neighbors(node), reverse=True):
            if neighbor not in seen:
                seen.add(neighbor)
                stack.append(neighbor)
    return order


def cut_links(graph: nx.Graph, placement: dict[str, int]) -> int:
    return sum(1 for a, b in graph.edges if placement[a] != placement[b])


def boundary_distances(overlay: dict[str, list[str]], host_of: dict[str, int], latency: dict[tuple[str, str], int],
                       min_service: int) -> dict[str, float]:
    """Broker -> the least time from the end of one of its services until a broker of its
    host could hand a message to another host: 0 for a broker with an overlay neighbour on
    another host; else the shortest way within its host to one, each hop costing the link's
    latency and the next broker's least service; infinite where no way leads out. Windows
    between hosts end where the earliest such hand-over lands, not where the earliest output
    anywhere would (``Engine.earliest_output``)."""
    inside = nx.Graph()
    inside.add_nodes_from(overlay)
    at_edge = set()
    for a, neighbours in overlay.items():
        for b in neighbours:
            if host_of[a] != host_of[b]:
                at_edge.add(a)
            elif a < b:
                inside.add_edge(a, b, cost=latency[(a, b)] + min_service)
    reach = nx.multi_source_dijkstra_path_length(inside, sorted(at_edge), weight="cost") if at_edge else {}
    return {name: reach.get(name, float("inf")) for name in overlay}
