"""The multi-tree planners offline (issue 15): every algorithm plans from N sampled documents
of the keyword workload on a transit-stub graph; each configuration is costed on those
documents (the cost model the coordinator decides by) and on the next N documents (what the
plan then costs), with the planning wall time (the paper's tree computation time).

    python bench/bench_trees.py [--size 500|2000] [--dataset Localized1|Localized2|Uniform]
                                [--samples 300] [--algorithms SPT,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered]

The documents are the ``keywords`` generator's (1,000 keywords, 100 publishers), matched with
the scalar oracle; groups no sampled document matches ride the coordinator's breadth-first
tree, as in a run. Costs are publication copies (tree edges) per document.
"""
import argparse
import time

from comparison import print_table

import topologies
from bench_multitree import SIZES
from protocols import trees
from protocols.language import matches, parse_filter, parse_publication
from workloads.generators import GENERATORS


def documents(graph, dataset: str, count: int) -> tuple[list[trees.Doc], dict[str, tuple[str, ...]]]:
    """``count`` documents of the keyword workload and, per group, its subscribers' brokers."""
    records = GENERATORS["keywords"](sorted(graph), graph, 1, dataset=dataset, documents=count)
    members: dict[str, set[str]] = {}
    for r in records:
        if r["op"] == "subscribe":
            members.setdefault(r["filter"], set()).add(r["broker"])
    filters = {text: parse_filter(text) for text in members}
    home = {r["client"]: r["broker"] for r in records if r["op"] == "advertise"}
    docs = []
    for r in records:
        if r["op"] == "publish":
            publication = parse_publication(r["content"])
            groups = tuple(sorted((text, tuple(sorted(members[text])))
                                  for text, f in filters.items() if matches(f, publication)))
            docs.append(trees.Doc(home[r["client"]], groups))
    return docs, {text: tuple(sorted(brokers)) for text, brokers in members.items()}


def plan(planner: trees.Planner, algorithm: str, seed: int) -> tuple[list, dict, bool]:
    """The configuration an algorithm plans: (trees, cluster of each group, flooded), cluster 0
    on the coordinator's breadth-first tree (SPT: on the one shortest-path tree), as in a run."""
    if algorithm == "SPT":
        return [trees.Tree(trees.spt(planner.graph, seed), planner.names)], {}, False
    chosen = {"SINGLE": planner.single, "MULT": planner.mult, "MULT2": planner.mult2,
              "SemCast": planner.semcast, "SemCast-filtered": planner.semcast}[algorithm]()
    base = trees.Tree(trees.bfs_tree(planner.graph, min(planner.graph)), planner.names)
    cluster_of_group = {g: i for i, c in enumerate(chosen, start=1) for g in c.groups}
    return [base] + [c.tree for c in chosen], cluster_of_group, algorithm == "SemCast"


def cost(graph, docs, members, configuration) -> float:
    """Copies per document of a configuration."""
    return trees.Planner(graph, docs, members=members).configuration_cost(*configuration) / len(docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=500, choices=sorted(SIZES))
    parser.add_argument("--dataset", default="Localized2")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--algorithms", default="SPT,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered")
    args = parser.parse_args()
    graph = topologies.transit_stub(*SIZES[args.size], stub_edge_probability=0.1, seed=1)
    docs, members = documents(graph, args.dataset, 2 * args.samples)
    sampled, later = docs[: args.samples], docs[args.samples:]
    rows = []
    for algorithm in args.algorithms.split(","):
        planner = trees.Planner(graph, sampled, 1, members)
        started = time.perf_counter()
        if algorithm == "OPT":
            sample_cost, later_cost = (trees.opt_cost(graph, d) / len(d) for d in (sampled, later))
            trees_, computed = 0, 0
        else:
            configuration = plan(planner, algorithm, 1)
            sample_cost = cost(graph, sampled, members, configuration)
            later_cost = cost(graph, later, members, configuration)
            trees_, computed = len(set(configuration[1].values())) or 1, planner.trees_computed  # chosen clusters
        rows.append({"algorithm": algorithm, "sampled": sample_cost, "later": later_cost, "trees": trees_,
                     "computed": computed, "plan_s": time.perf_counter() - started})
    print(f"{args.size} brokers ({graph.number_of_nodes()}), {args.dataset}, {args.samples} sampled documents\n")
    print_table(rows, [("algorithm", "{}"), ("sampled", "{:.2f}"), ("later", "{:.2f}"), ("trees", "{}"),
                       ("computed", "{:,}"), ("plan_s", "{:.1f}")])


if __name__ == "__main__":
    main()
