"""Broker overlays as networkx graphs: an edge-list loader and generators registered by name.

Brokers are graph nodes named by strings; a node may carry ``role`` (core, inner, edge) and
an edge may carry ``latency_us``. The overlay must be a tree (acyclic and connected): the
base routing protocol relies on it. Content-aware multi-tree routing builds its own trees and
takes any connected overlay (``transit_stub`` generates such graphs).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

import networkx as nx

from protocols.errors import InputError

GENERATORS: dict[str, Callable[..., nx.Graph]] = {}


def generator(name: str):
    def register(fn):
        GENERATORS[name] = fn
        return fn

    return register


def _named(graph: nx.Graph) -> nx.Graph:
    return nx.relabel_nodes(graph, {i: f"B{i}" for i in graph})


@generator("line")
def line(n: int = 5) -> nx.Graph:
    """B0 - B1 - ... - B(n-1)."""
    return _named(nx.path_graph(n))


@generator("star")
def star(n: int = 5) -> nx.Graph:
    """B0 in the middle, B1..B(n-1) around it."""
    return _named(nx.star_graph(n - 1))


@generator("balanced_tree")
def balanced_tree(fanout: int = 2, depth: int = 3, brokers: int = 0) -> nx.Graph:
    """A full tree: B0 is the root, every inner broker has ``fanout`` children. ``brokers``: only
    the first that many in breadth-first order (the last level filled from the left), so trees
    of different fanouts can hold the same number of brokers (0: all)."""
    full = nx.balanced_tree(fanout, depth)
    if not 0 <= brokers <= len(full):
        raise ValueError(f"brokers: expected 0 (all) to {len(full)} for fanout {fanout} and depth {depth}, "
                         f"got {brokers}")
    return _named(full.subgraph(range(brokers)).copy() if brokers else full)


@generator("random_tree")
def random_tree(n: int = 20, seed: int = 0, max_degree: int = 0) -> nx.Graph:
    """Each broker Bi (i > 0) attaches to a uniformly chosen earlier broker, one with fewer
    than ``max_degree`` links when that is given (the soft-link paper's configurations C1, C2
    and C3 are such trees of 120, 250 and 500 brokers with ``max_degree: 3``)."""
    if max_degree == 1 and n > 2 or max_degree < 0:
        raise ValueError(f"max_degree {max_degree} cannot connect {n} brokers (give 0 for no limit, or 2 or more)")
    rng = random.Random(f"{seed}/random_tree")
    graph = nx.Graph()
    graph.add_node("B0")
    open_ = ["B0"]  # brokers that can take another link, in the order they joined
    for i in range(1, n):
        if not max_degree:
            graph.add_edge(f"B{i}", f"B{rng.randrange(i)}")
            continue
        parent = open_[rng.randrange(len(open_))]
        graph.add_edge(f"B{i}", parent)
        if graph.degree(parent) >= max_degree:
            open_.remove(parent)
        open_.append(f"B{i}")
    return graph


def neighbours(graph: nx.Graph) -> dict[str, list[str]]:
    """Every broker (in name order) -> its overlay neighbours, sorted: the plain form brokers
    and their hosts are given the overlay in."""
    return {n: sorted(graph.neighbors(n)) for n in sorted(graph)}


def load_edgelist(path: Path, parse_latency: Callable[[str, str], int]) -> nx.Graph:
    """Lines ``A B`` or ``A B LATENCY``; ``#`` starts a comment."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: edge list not found")
    graph = nx.Graph()
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        where = f"{path}:{number}"
        if len(line) not in (2, 3):
            raise InputError(f"{where}: expected 'A B' or 'A B LATENCY', got {raw.strip()!r}")
        a, b = line[0], line[1]
        if a == b:
            raise InputError(f"{where}: a broker cannot link to itself ({a})")
        if graph.has_edge(a, b):
            raise InputError(f"{where}: link {a} - {b} is listed twice")
        graph.add_edge(a, b, latency_us=parse_latency(line[2], where) if len(line) == 3 else None)
    if graph.number_of_nodes() == 0:
        raise InputError(f"{path}: no links")
    return graph


def check_tree(graph: nx.Graph, where: str, acyclic: bool = True) -> None:
    """The overlay is connected and, unless ``acyclic`` is False, a tree."""
    if graph.number_of_nodes() == 0:
        raise InputError(f"{where}: the overlay has no brokers")
    if not nx.is_connected(graph):
        parts = sorted((sorted(c) for c in nx.connected_components(graph)), key=len)
        raise InputError(f"{where}: the overlay is disconnected ({len(parts)} parts; e.g. {', '.join(parts[0][:5])} "
                         "cannot reach the rest)")
    if acyclic and graph.number_of_edges() != graph.number_of_nodes() - 1:
        cycle = nx.find_cycle(graph)
        raise InputError(f"{where}: the overlay must be acyclic (only protocol.multitree routes on a graph "
                         f"with cycles); cycle through {' - '.join(a for a, _ in cycle)}")


@generator("transit_stub")
def transit_stub(
    transit_domains: int = 2,
    transit_nodes: int = 4,
    stubs_per_transit: int = 3,
    stub_nodes: int = 8,
    transit_edge_probability: float = 0.6,
    stub_edge_probability: float = 0.3,
    domain_edge_probability: float = 0.5,
    seed: int = 0,
) -> nx.Graph:
    """A GT-ITM-like transit-stub graph, seeded: ``transit_domains`` domains of
    ``transit_nodes`` transit brokers; every transit broker has ``stubs_per_transit`` stub
    domains of ``stub_nodes`` brokers, one of them linked to it. Inside a domain every pair is
    linked with the domain's edge probability (and a random spanning tree keeps it connected);
    every pair of transit domains is linked (one random pair of their brokers) with
    ``domain_edge_probability``, and the domains are kept connected the same way. Brokers are
    ``t<d>-<i>`` (role transit) and ``s<d>-<i>-<k>-<j>`` (role stub)."""
    counts = (transit_domains, transit_nodes, stubs_per_transit, stub_nodes)
    if min(counts) < 1:
        raise ValueError("transit_domains, transit_nodes, stubs_per_transit and stub_nodes must be at least 1")
    for name, p in (("transit_edge_probability", transit_edge_probability),
                    ("stub_edge_probability", stub_edge_probability),
                    ("domain_edge_probability", domain_edge_probability)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must be within [0, 1], got {p}")
    rng = random.Random(f"{seed}/transit_stub")
    graph = nx.Graph()
    domains = []
    for d in range(transit_domains):
        transit = [f"t{d}-{i}" for i in range(transit_nodes)]
        graph.add_nodes_from(transit, role="transit")
        _random_domain(graph, transit, transit_edge_probability, rng)
        domains.append(transit)
        for i, gateway in enumerate(transit):
            for k in range(stubs_per_transit):
                stub = [f"s{d}-{i}-{k}-{j}" for j in range(stub_nodes)]
                graph.add_nodes_from(stub, role="stub")
                _random_domain(graph, stub, stub_edge_probability, rng)
                graph.add_edge(gateway, rng.choice(stub))
    for a in range(transit_domains):
        for b in range(a + 1, transit_domains):
            if rng.random() < domain_edge_probability:
                graph.add_edge(rng.choice(domains[a]), rng.choice(domains[b]))
    for b in range(1, transit_domains):  # a random spanning tree over the domains
        graph.add_edge(rng.choice(domains[rng.randrange(b)]), rng.choice(domains[b]))
    return graph


# (transit domains, transit brokers per domain, stub domains per transit broker, brokers per stub)
GT_ITM_SIZES = {500: (2, 5, 4, 12), 1000: (4, 5, 4, 12), 2000: (4, 5, 4, 25), 5000: (5, 8, 5, 25)}


@generator("gt_itm")
def gt_itm(
    nodes: int = 500,
    seed: int = 0,
    transit_edge_probability: float = 0.5,
    stub_edge_probability: float = 0.42,
    extra_transit_stub: float = 0.1,
    extra_stub_stub: float = 0.1,
) -> nx.Graph:
    """GT-ITM's transit-stub model (Zegura, Calvert and Bhattacharjee, "How to model an
    internetwork", 1996) at the sizes the multi-tree paper uses (about ``nodes``: 490, 980,
    2,020 or 5,040 brokers, ``GT_ITM_SIZES``), with the edge probabilities of GT-ITM's own
    transit-stub example (pure random graphs: 0.5 inside a transit domain, 0.42 inside a stub
    domain, every pair of transit domains linked) and its two kinds of extra edges, drawn per
    stub domain: with probability ``extra_transit_stub`` a second link from one of its brokers
    to another transit broker of its transit domain, and with probability ``extra_stub_stub``
    a link to a broker of another stub domain. The paper names none of these parameters."""
    if nodes not in GT_ITM_SIZES:
        raise ValueError(f"nodes: expected one of {', '.join(map(str, GT_ITM_SIZES))}, got {nodes}")
    for name, p in (("extra_transit_stub", extra_transit_stub), ("extra_stub_stub", extra_stub_stub)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must be within [0, 1], got {p}")
    domains, transit, stubs, stub_nodes = GT_ITM_SIZES[nodes]
    graph = transit_stub(domains, transit, stubs, stub_nodes, transit_edge_probability, stub_edge_probability,
                         domain_edge_probability=1.0, seed=seed)
    rng = random.Random(f"{seed}/gt_itm")
    stub_domains = [(d, i, [f"s{d}-{i}-{k}-{j}" for j in range(stub_nodes)])
                    for d in range(domains) for i in range(transit) for k in range(stubs)]
    for d, i, members in stub_domains:
        if transit > 1 and rng.random() < extra_transit_stub:
            other = rng.choice([t for t in range(transit) if t != i])
            graph.add_edge(rng.choice(members), f"t{d}-{other}")
        if len(stub_domains) > 1 and rng.random() < extra_stub_stub:
            _, _, elsewhere = rng.choice([s for s in stub_domains if s[2] is not members])
            graph.add_edge(rng.choice(members), rng.choice(elsewhere))
    return graph


def _random_domain(graph: nx.Graph, nodes: list[str], probability: float, rng: random.Random) -> None:
    """Link every pair of ``nodes`` with ``probability``, and along a random spanning tree."""
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            if rng.random() < probability:
                graph.add_edge(a, b)
    for i in range(1, len(nodes)):
        graph.add_edge(nodes[rng.randrange(i)], nodes[i])


def _enterprise(subscriber_edges: int) -> nx.Graph:
    """Core brokers A-E in a chain; 18 inner brokers hang off A-D; subscriber edge brokers
    hang off the inner ones; three publisher edge brokers hang off E. Nodes carry ``role``
    (core, inner, edge) and ``clients`` (publishers, subscribers, or None: no clients), so
    subscription traffic funnels along the core toward E."""
    graph = nx.Graph()
    core = [f"core-{c}" for c in "ABCDE"]
    for name in core:
        graph.add_node(name, role="core", clients=None)
    nx.add_path(graph, core)
    inner_per_core = {"core-A": 5, "core-B": 4, "core-C": 4, "core-D": 5}
    inner = []
    for parent, count in inner_per_core.items():
        for _ in range(count):
            name = f"inner-{len(inner) + 1:02d}"
            graph.add_node(name, role="inner", clients=None)
            graph.add_edge(parent, name)
            inner.append(name)
    for i in range(subscriber_edges):
        name = f"edge-{i + 1:02d}"
        graph.add_node(name, role="edge", clients="subscribers")
        graph.add_edge(inner[i % len(inner)], name)
    for i in range(3):
        name = f"edge-{subscriber_edges + i + 1:02d}"
        graph.add_node(name, role="edge", clients="publishers")
        graph.add_edge("core-E", name)
    return graph


@generator("enterprise55")
def enterprise55() -> nx.Graph:
    """The 55-broker enterprise overlay of the unsubscription-burst experiments
    ("Congestion Avoidance with Selective Filter Aggregation..."): 5 core, 18 inner, 32 edge."""
    return _enterprise(29)


@generator("enterprise49")
def enterprise49() -> nx.Graph:
    """The 49-broker variant used for the covering-cost measurements: 26 edge brokers."""
    return _enterprise(23)


@generator("regions")
def regions(regions: int = 4, inner_per_region: int = 3, edges_per_inner: int = 4) -> nx.Graph:
    """A tiered overlay of ``regions`` regions (the mobile-monitor experiments of "Congestion
    Avoidance with Selective Filter Aggregation..."): one core broker per region, the cores in
    a chain, inner brokers under each core and edge brokers under each inner one. Nodes carry
    ``role`` (core, inner, edge), ``region`` (1..regions) and ``clients`` (edge brokers host
    both publishers and subscribers)."""
    if regions < 1 or inner_per_region < 1 or edges_per_inner < 1:
        raise ValueError("regions, inner_per_region and edges_per_inner must be at least 1")
    graph = nx.Graph()
    cores = [f"core-{r}" for r in range(1, regions + 1)]
    for r, core in enumerate(cores, start=1):
        graph.add_node(core, role="core", region=r, clients=None)
        for i in range(1, inner_per_region + 1):
            inner = f"r{r}-inner-{i}"
            graph.add_node(inner, role="inner", region=r, clients=None)
            graph.add_edge(core, inner)
            for e in range(1, edges_per_inner + 1):
                edge = f"r{r}-edge-{i}-{e}"
                graph.add_node(edge, role="edge", region=r, clients="both")
                graph.add_edge(inner, edge)
    nx.add_path(graph, cores)
    return graph
