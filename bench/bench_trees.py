"""The multi-tree planners offline, evaluated as the paper does (issue 38): every algorithm
plans from a seeded random sample of the documents (the paper's 3% of 10,000; the same
sample the emulator's ``plan: offline`` draws) and every document is then costed on the
configuration, in sample and out of it, with the planning wall time (the paper's tree
computation time).

    python bench/bench_trees.py [--graph transit_stub|gt_itm] [--size 500[,1000,...]]
        [--workload keywords_paper|keywords] [--dataset Localized1|Localized2|Uniform[,...]]
        [--documents 10000] [--sample 0.03] [--span union,overlay] [--seed 1]
        [--algorithms SPT,SPT-unfiltered,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered]
        [--publishers N] [--subscriptions per_broker|per_keyword]   (keywords_paper's variants)
        [--option KEY=VALUE ...]   (any other option of the workload's generator: a reading of the paper)
        [--graph-option KEY=VALUE ...]   (an option of the graph's generator, e.g. stub_nodes=120)
        [--results ROWS.jsonl] [--plot FIGURE.png]

Several sizes and datasets make the paper's Figs. 5 and 8: ``--results`` keeps every row as it
is computed (a row already there is not computed again, so a long sweep resumes) and ``--plot``
draws cost against size per dataset and planning time against size from all of them.

Costs are publication copies (tree edges) per document. SPT filters along its tree;
SPT-unfiltered sends every document across the whole tree. Groups no sampled document matches
ride the base tree (breadth first from the first broker), as in a run, except under SINGLE,
whose one tree serves every group (the paper's SINGLE). ``--span`` picks what COMPUTETREE's
low-stretch tree spans: the union of the samples' Steiner trees (the paper's Algorithm 1) or
the whole overlay (``protocols/trees.py``).
"""
import argparse
import json
import time
from pathlib import Path

import yaml

from comparison import print_table

import topologies
from bench_multitree import SIZES
from protocols.multitree import offline_indices
from protocols import planning, trees
from protocols.multitree import Overlay
from workloads.generators import GENERATORS
from workloads.oracle import documents

FILTERED = {"SPT-unfiltered": "SPT", "SemCast-filtered": "SemCast-filtered"}
SPANNED = ("SINGLE", "MULT", "MULT2")  # the planners that build COMPUTETREE trees (``--span``)


def graph_of(kind: str, size: int, seed: int, options: dict | None = None):
    """The overlay as the emulator's brokers build it (their Steiner trees break ties alike);
    ``options``: the graph generator's options beyond the size's (``--graph-option``)."""
    options = options or {}
    if kind == "gt_itm":
        graph = topologies.gt_itm(size, seed=seed, **options)
    else:
        shape = dict(zip(("transit_domains", "transit_nodes", "stubs_per_transit", "stub_nodes"), SIZES[size]))
        graph = topologies.transit_stub(**(shape | {"stub_edge_probability": 0.1} | options), seed=seed)
    return Overlay(topologies.neighbours(graph), min(graph)).graph


def evaluate(graph, docs, members, sample: list[int], algorithm: str, seed: int, span: str,
             unsampled: str = "base") -> dict:
    """Plan ``algorithm`` from the ``sample`` documents (``unsampled``: where groups no sampled
    document matched ride, ``planning.configure``); copies per document over all of them, the
    sampled and the others."""
    sampled = [docs[i] for i in sample]
    planner = planning.Planner(graph, sampled, seed, members, span)
    base = trees.Tree(trees.bfs_tree(graph, min(graph)), planner.names)
    started = time.perf_counter()
    tree_list, groups, _ = planning.configure(planner, FILTERED.get(algorithm, algorithm), base, single_for_all=True,
                                           unsampled=unsampled)
    plan_s = time.perf_counter() - started
    taken = set(sample)
    parts = {"all": docs, "sampled": sampled, "unsampled": [d for i, d in enumerate(docs) if i not in taken]}
    row = {"algorithm": algorithm, "span": span if algorithm in SPANNED else "-"}
    for name, part in parts.items():
        row[name] = copies(graph, part, members, algorithm, tree_list, groups) / len(part)
    clusters = len(set(groups.values())) if groups else 1
    return row | {"trees": clusters, "computed": planner.trees_computed, "plan_s": plan_s}


def copies(graph, docs, members, algorithm: str, tree_list, groups) -> int:
    if algorithm == "OPT":
        return trees.opt_cost(graph, docs)
    planner = planning.Planner(graph, docs, members=members)
    if algorithm == "SPT-unfiltered":
        return planner.flooded_cost(tree_list[0])
    return planner.configuration_cost(tree_list, groups, flooded=algorithm == "SemCast")


KEY = ("graph", "size", "graph_options", "workload", "dataset", "documents", "sample", "seed", "publishers",
       "subscriptions", "options", "algorithm", "span", "unsampled_groups")  # what a row of --results is the result of
DEFAULTS = {"unsampled_groups": "base", "options": "", "graph_options": ""}  # for rows written before a key existed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="transit_stub", choices=["transit_stub", "gt_itm"])
    parser.add_argument("--size", default="500", help="brokers (the generator's size), or several: 500,1000")
    parser.add_argument("--workload", default="keywords_paper", choices=["keywords_paper", "keywords"])
    parser.add_argument("--dataset", default="Localized1", help="one, or several: Localized1,Uniform")
    parser.add_argument("--documents", type=int, default=10000)
    parser.add_argument("--sample", type=float, default=0.03)
    parser.add_argument("--span", default="union,overlay")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--publishers", type=int, default=0, help="keywords_paper: fixed publisher brokers (0: any)")
    parser.add_argument("--subscriptions", default="per_broker", help="keywords_paper: per_broker or per_keyword")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="another option of the workload's generator, e.g. keywords_per_document=33 or "
                             "publisher=nearby; repeat for several")
    parser.add_argument("--graph-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the graph's generator, e.g. stub_nodes=120 (transit_stub) or "
                             "stub_edge_probability=0.2; repeat for several")
    parser.add_argument("--algorithms", default="SPT,SPT-unfiltered,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered")
    parser.add_argument("--unsampled", default="base", choices=planning.UNSAMPLED,
                        help="groups no sampled document matched ride the base tree (as in runs) or the tree of "
                             "the cluster with the most sampled documents (a variant)")
    parser.add_argument("--results", type=Path, help="JSON lines: rows appended as computed, and reused")
    parser.add_argument("--plot", type=Path, help="draw Figs. 5 and 8 from the rows of --results (or these)")
    args = parser.parse_args()
    known = _read_rows(args.results)
    graph_options = generator_options(args.graph_option)
    rows = []
    for size in map(int, args.size.split(",")):
        graph = graph_of(args.graph, size, args.seed, graph_options)
        for dataset in args.dataset.split(","):
            rows += sweep_point(args, graph, size, dataset, known, graph_options)
    opt = {(r["size"], r["dataset"]): r["all"] for r in rows if r["algorithm"] == "OPT"}
    for row in rows:
        row["vs_opt"] = row["all"] / opt[row["size"], row["dataset"]] if (row["size"], row["dataset"]) in opt \
            else float("nan")
    print(f"\n{args.graph}, {args.workload}, {args.documents} documents, {args.sample:g} sampled, seed {args.seed}\n")
    print_table(rows, [("brokers", "{:,}"), ("dataset", "{}"), ("algorithm", "{}"), ("span", "{}"), ("all", "{:.2f}"),
                       ("vs_opt", "{:.2f}"), ("sampled", "{:.2f}"), ("unsampled", "{:.2f}"), ("trees", "{}"),
                       ("computed", "{:,}"), ("plan_s", "{:.1f}")])
    if args.plot:
        draw_sizes(_read_rows(args.results) if args.results else rows, args.plot)
        print(args.plot)


def sweep_point(args, graph, size: int, dataset: str, known: dict, graph_options: dict) -> list[dict]:
    """Every algorithm (and span) on one graph and dataset: the rows of ``known`` (``--results``)
    where there are, the others computed and appended to it."""
    variant = {"publishers": args.publishers, "subscriptions": args.subscriptions} \
        if args.workload == "keywords_paper" else {}
    options = generator_options(args.option)
    setting = {"graph": args.graph, "size": size, "graph_options": _text(graph_options),
               "workload": args.workload, "dataset": dataset, "documents": args.documents, "sample": args.sample,
               "seed": args.seed, "unsampled_groups": args.unsampled, "options": _text(options), **variant}
    work = None
    rows = []
    for algorithm in args.algorithms.split(","):
        for span in args.span.split(",") if algorithm in SPANNED else ["union"]:
            key = _key({**setting, "algorithm": algorithm, "span": span if algorithm in SPANNED else "-"})
            if key in known:
                rows.append(known[key])
                continue
            if work is None:
                records = GENERATORS[args.workload](sorted(graph), graph, args.seed, dataset=dataset,
                                                    documents=args.documents, **variant, **options)
                docs, members = documents(records)
                work = docs, members, offline_indices(len(docs), args.sample, args.seed)  # as plan: offline draws
            started = time.perf_counter()
            row = {**setting, "brokers": graph.number_of_nodes(),
                   **evaluate(graph, *work, algorithm, args.seed, span, args.unsampled)}
            print(f"{graph.number_of_nodes()} brokers, {dataset}, {algorithm} ({span}): "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
            if args.results:
                with open(args.results, "a") as f:
                    f.write(json.dumps(row) + "\n")
            rows.append(row)
    return rows


def generator_options(given: list[str]) -> dict:
    """``--option`` or ``--graph-option`` arguments (``KEY=VALUE``) as a generator's keyword
    arguments, in name order; a value reads as YAML, as a scenario's ``--set`` does."""
    options = {}
    for text in given:
        key, _, value = text.partition("=")
        if not key or not value:
            raise SystemExit(f"{text!r}: expected KEY=VALUE")
        options[key] = yaml.safe_load(value)
    return dict(sorted(options.items()))


def _text(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items())


def _key(row: dict) -> tuple:
    return tuple(row.get(k, DEFAULTS.get(k)) for k in KEY)


def _read_rows(path: Path | None) -> dict:
    """The rows of a ``--results`` file by what they are the result of (the last of equal ones)."""
    if path is None or not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {_key(row): row for row in rows}


ORDER = ("SPT", "SINGLE", "MULT2", "MULT", "OPT", "SemCast", "SemCast-filtered", "SPT-unfiltered")  # legend order


def series_name(row: dict) -> str:
    """A row's line: its algorithm, and where it is planned otherwise than the paper's (COMPUTETREE's
    span, where unsampled groups ride)."""
    variants = [*([] if row["span"] in ("union", "-") else ["overlay span"]),
                *([row["graph_options"]] if row.get("graph_options") else []),
                *([row["options"]] if row.get("options") else []),
                *([] if row.get("unsampled_groups", "base") == "base" else ["unsampled groups on its largest tree"])]
    return ", ".join([row["algorithm"], *variants])


def draw_sizes(rows, path: Path) -> None:
    """The paper's Fig. 5 (cost over every document against network size, a panel per dataset,
    log cost) and Fig. 8 (the paper's algorithms' planning time against size on the first
    dataset), from rows of one graph kind and setting. Our variants of an algorithm (the
    overlay span, unsampled groups elsewhere) share its colour in another line style."""
    from matplotlib.ticker import NullLocator

    from analysis import style

    rows = list(rows.values()) if isinstance(rows, dict) else rows
    datasets = sorted({r["dataset"] for r in rows}, key=["Localized1", "Localized2", "Uniform"].index)
    names = sorted({series_name(r) for r in rows}, key=lambda name: (ORDER.index(name.split(",")[0]), name))
    looks = style.styles(names, {name: name.split(",")[0] for name in names})
    columns = 2 if len(datasets) > 1 else len(datasets) + 1
    lines = -(-(len(datasets) + 1) // columns)
    fig, axes = style.plt.subplots(lines, columns, figsize=(6.2 * columns, 4.2 * lines), squeeze=False)
    for ax in axes.flat[len(datasets) + 1:]:
        ax.set_visible(False)
    graph = "GT-ITM transit-stub" if rows[0]["graph"] == "gt_itm" else "transit-stub"
    sizes = sorted({r["brokers"] for r in rows})
    for letter, ax, dataset in zip("abcdefgh", axes.flat, [*datasets, None]):
        for name in names:
            timed = name in SPANNED  # planning time: the paper's planners
            points = sorted((r["brokers"], r["all"] if dataset else r["plan_s"]) for r in rows if series_name(r) == name
                            and r["dataset"] == (dataset or datasets[0]))
            if points and (dataset or timed):
                ax.plot(*zip(*points), label=name, **looks[name].line_kwargs(points=len(points)))
        ax.set(xscale="log", yscale="log", xlabel=f"brokers ({graph} graph)",
               ylabel="cost (copies per document)" if dataset else "planning time (s)")
        style.readable_log(ax)
        ax.set_xticks(sizes, [f"{size:,}" for size in sizes])
        ax.xaxis.set_minor_locator(NullLocator())  # the sizes alone
        ax.set_title(f"({letter}) Cost, {dataset} (Fig. 5)" if dataset else
                     f"({letter}) Planning time, {datasets[0]} (Fig. 8)", loc="left", fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
    handles = {}  # one legend for the page: a name keeps its look in every panel
    for ax in axes.flat:
        handles |= {line.get_label(): line for line in ax.lines if line.get_label() not in handles}
    fig.legend([handles[name] for name in names if name in handles], [name for name in names if name in handles],
               loc="lower center", ncol=min(len(handles), 5), fontsize="small")
    first = rows[0]
    fig.suptitle(f"Content-aware multi-tree routing offline, as the paper evaluates it: {graph} graphs,\n"
                 f"{first['documents']:,} documents, each plan from {first['sample']:.0%} of them, every document "
                 f"costed (seed {first['seed']})", fontsize="large")
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight(), 1, 1))  # room for the legend below
    style.save(fig, path)


if __name__ == "__main__":
    main()
