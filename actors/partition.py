"""Packing brokers into hosts: balanced parts of the overlay that cut few links."""
from __future__ import annotations

import networkx as nx


def partition(graph: nx.Graph, hosts: int) -> dict[str, int]:
    """Broker -> host for ``hosts`` parts of near-equal size.

    Brokers are laid out in depth-first preorder from the overlay's centre (smallest name
    among centres, neighbours visited in name order) and cut into contiguous chunks: in a
    tree, a preorder chunk is a few subtrees, so few links cross between hosts.
    """
    names = sorted(graph)
    hosts = max(1, min(hosts, len(names)))
    if hosts == 1:
        return {name: 0 for name in names}
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
