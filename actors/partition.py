"""Packing brokers into hosts: balanced parts of the overlay that cut few links."""
from __future__ import annotations

import networkx as nx


def partition(graph: nx.Graph, hosts: int) -> dict[str, int]:
    """Broker -> host for ``hosts`` parts of near-equal size.

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
    at_long_links = _cut_at_long_links(graph, hosts)
    if at_long_links is not None:
        return at_long_links
    root = min(nx.center(graph)) if nx.is_connected(graph) else names[0]
    ordered = _preorder(graph, root)
    ordered += [n for n in names if n not in set(ordered)]
    size, extra = divmod(len(ordered), hosts)
    placement, start = {}, 0
    for host in range(hosts):
        end = start + size + (1 if host < extra else 0)
        for name in ordered[start:end]:
            placement[name] = host
        start = end
    return placement


def _cut_at_long_links(graph: nx.Graph, hosts: int, slack: float = 1.25) -> dict[str, int] | None:
    """Remove the links of the longest latency (then of the two longest, and so on) until
    the parts left can be packed onto ``hosts`` with no host above ``slack`` times an even
    share (largest part first, each onto the least loaded host); None if links do not
    differ in latency or no cut balances."""
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
            host = loads.index(min(loads))
            loads[host] += len(part)
            placement.update((name, host) for name in part)
        if max(loads) <= slack * len(graph) / hosts:
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
