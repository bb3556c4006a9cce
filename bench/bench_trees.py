"""The multi-tree planners offline, evaluated as the paper does (issue 38): every algorithm
plans from a seeded random sample of the documents (the paper's 3% of 10,000; the same
sample the emulator's ``plan: offline`` draws) and every document is then costed on the
configuration, in sample and out of it, with the planning wall time (the paper's tree
computation time).

    python bench/bench_trees.py [--graph transit_stub|gt_itm] [--size 500]
        [--workload keywords_paper|keywords] [--dataset Localized1|Localized2|Uniform]
        [--documents 10000] [--sample 0.03] [--span union,overlay] [--seed 1]
        [--algorithms SPT,SPT-unfiltered,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered]
        [--publishers N] [--subscriptions per_broker|per_keyword]   (keywords_paper's variants)

Costs are publication copies (tree edges) per document. SPT filters along its tree;
SPT-unfiltered sends every document across the whole tree. Groups no sampled document matches
ride the base tree (breadth first from the first broker), as in a run, except under SINGLE,
whose one tree serves every group (the paper's SINGLE). ``--span`` picks what COMPUTETREE's
low-stretch tree spans: the union of the samples' Steiner trees (the paper's Algorithm 1) or
the whole overlay (``protocols/trees.py``).
"""
import argparse
import time

from comparison import print_table

import topologies
from bench_multitree import SIZES
from experiments.scenario import offline_indices
from protocols import trees
from protocols.multitree import Overlay
from workloads.generators import GENERATORS
from workloads.oracle import documents

FILTERED = {"SPT-unfiltered": "SPT", "SemCast-filtered": "SemCast-filtered"}


def graph_of(kind: str, size: int, seed: int):
    """The overlay as the emulator's brokers build it (their Steiner trees break ties alike)."""
    graph = topologies.gt_itm(size, seed=seed) if kind == "gt_itm" else topologies.transit_stub(
        *SIZES[size], stub_edge_probability=0.1, seed=seed)
    return Overlay(topologies.neighbours(graph), min(graph)).graph


def evaluate(graph, docs, members, sample: list[int], algorithm: str, seed: int, span: str) -> dict:
    """Plan ``algorithm`` from the ``sample`` documents; copies per document over all of them,
    the sampled and the others."""
    sampled = [docs[i] for i in sample]
    planner = trees.Planner(graph, sampled, seed, members, span)
    base = trees.Tree(trees.bfs_tree(graph, min(graph)), planner.names)
    started = time.perf_counter()
    tree_list, groups, _ = trees.configure(planner, FILTERED.get(algorithm, algorithm), base, single_for_all=True)
    plan_s = time.perf_counter() - started
    taken = set(sample)
    parts = {"all": docs, "sampled": sampled, "unsampled": [d for i, d in enumerate(docs) if i not in taken]}
    row = {"algorithm": algorithm, "span": span if algorithm in ("SINGLE", "MULT", "MULT2") else "-"}
    for name, part in parts.items():
        row[name] = copies(graph, part, members, algorithm, tree_list, groups) / len(part)
    clusters = len(set(groups.values())) if groups else 1
    return row | {"trees": clusters, "computed": planner.trees_computed, "plan_s": plan_s}


def copies(graph, docs, members, algorithm: str, tree_list, groups) -> int:
    if algorithm == "OPT":
        return trees.opt_cost(graph, docs)
    planner = trees.Planner(graph, docs, members=members)
    if algorithm == "SPT-unfiltered":
        return planner.flooded_cost(tree_list[0])
    return planner.configuration_cost(tree_list, groups, flooded=algorithm == "SemCast")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="transit_stub", choices=["transit_stub", "gt_itm"])
    parser.add_argument("--size", type=int, default=500)
    parser.add_argument("--workload", default="keywords_paper", choices=["keywords_paper", "keywords"])
    parser.add_argument("--dataset", default="Localized1")
    parser.add_argument("--documents", type=int, default=10000)
    parser.add_argument("--sample", type=float, default=0.03)
    parser.add_argument("--span", default="union,overlay")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--publishers", type=int, default=0, help="keywords_paper: fixed publisher brokers (0: any)")
    parser.add_argument("--subscriptions", default="per_broker", help="keywords_paper: per_broker or per_keyword")
    parser.add_argument("--algorithms", default="SPT,SPT-unfiltered,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered")
    args = parser.parse_args()
    graph = graph_of(args.graph, args.size, args.seed)
    variant = {"publishers": args.publishers, "subscriptions": args.subscriptions} if args.workload == "keywords_paper" else {}
    records = GENERATORS[args.workload](sorted(graph), graph, args.seed, dataset=args.dataset, documents=args.documents,
                                        **variant)
    docs, members = documents(records)
    sample = offline_indices(len(docs), args.sample, args.seed)  # the emulator's plan: offline draws the same
    rows = []
    for algorithm in args.algorithms.split(","):
        spans = args.span.split(",") if algorithm in ("SINGLE", "MULT", "MULT2") else ["union"]
        for span in spans:
            started = time.perf_counter()
            rows.append(evaluate(graph, docs, members, sample, algorithm, args.seed, span))
            print(f"{algorithm} ({span}): {time.perf_counter() - started:.0f} s", flush=True)
    opt = next((r["all"] for r in rows if r["algorithm"] == "OPT"), None)
    for row in rows:
        row["vs_opt"] = row["all"] / opt if opt else float("nan")
    print(f"\n{args.graph}, {graph.number_of_nodes()} brokers, {graph.number_of_edges()} links, {args.workload} "
          f"{args.dataset} {variant}, {len(docs)} documents, {len(sample)} sampled ({args.sample:g})\n")
    print_table(rows, [("algorithm", "{}"), ("span", "{}"), ("all", "{:.2f}"), ("vs_opt", "{:.2f}"),
                       ("sampled", "{:.2f}"), ("unsampled", "{:.2f}"), ("trees", "{}"), ("computed", "{:,}"),
                       ("plan_s", "{:.1f}")])


if __name__ == "__main__":
    main()
