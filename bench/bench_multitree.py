"""Content-aware multi-tree routing benchmark (issue 15): the communication cost of SPT,
SINGLE, MULT2, MULT, OPT, SemCast and SemCast with filtering on transit-stub graphs, per
network size and keyword dataset, with each run's wall time and peak memory.

    python bench/bench_multitree.py [--sizes 500,2000] [--datasets Localized1,Localized2,Uniform]
                                    [--algorithms SPT,SINGLE,MULT2,MULT,OPT,SemCast,SemCast-filtered]
                                    [--documents 4000] [--set KEY=VALUE ...] [--paper]

Each run is ``experiments/scenarios/multitree_<algorithm>.yaml`` with the size's transit-stub
parameters, the dataset and ``--documents`` documents, in a process of its own (``hosts: 0``),
so its peak resident memory is its own. Communication cost is publication copies between
brokers per publication: ``planned`` counts the publications from the first active plan on
(before it they flood the coordinator's tree), ``final`` those from the last plan on (the
plan computed from the most samples). ``vs OPT`` divides ``final`` by OPT's in the same
setting. ``--paper``: the paper's evaluation instead, on GT-ITM graphs (``gt_itm``) with its
keyword datasets (``keywords_paper``), each algorithm planned once from 3% of the documents
drawn before the run (``plan: offline``); compare with ``bench_trees.py``'s offline costs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from comparison import ROOT, SCENARIOS, print_table

from actors.results import read_table

# brokers -> transit-stub parameters (transit domains, transit brokers each, stub domains per
# transit broker, brokers per stub domain): 2 x 5 x (1 + 4 x 12) = 490; 4 x 5 x (1 + 4 x 25) = 2,020
SIZES = {500: (2, 5, 4, 12), 2000: (4, 5, 4, 25)}
ALGORITHMS = ["SPT", "SINGLE", "MULT2", "MULT", "OPT", "SemCast", "SemCast-filtered"]


# the paper's setup (--paper): GT-ITM graphs, its keyword datasets, planned offline from 3%
PAPER = ["topology.generator={{name: gt_itm, nodes: {size}, seed: 1}}",
         "workload.generator={{name: keywords_paper, dataset: {dataset}, documents: {documents}}}",
         "protocol.multitree.plan=offline"]


def run_one(algorithm: str, size: int, dataset: str, documents: int, overrides: list[str], out: Path,
            paper: bool = False) -> dict:
    if paper:
        sets = [setting.format(size=size, dataset=dataset, documents=documents) for setting in PAPER]
    else:
        domains, transit, stubs, stub_nodes = SIZES[size]
        sets = [f"topology.generator.transit_domains={domains}", f"topology.generator.transit_nodes={transit}",
                f"topology.generator.stubs_per_transit={stubs}", f"topology.generator.stub_nodes={stub_nodes}",
                f"workload.generator.dataset={dataset}", f"workload.generator.documents={documents}"]
    sets += [f"duration={documents * 0.05 + 30:.0f}s", "runtime.hosts=0", *overrides]
    scenario = SCENARIOS / f"multitree_{algorithm.lower().replace('-', '_')}.yaml"
    command = [sys.executable, "-m", "experiments.cli", "run", str(scenario), "--out", str(out)]
    command += [arg for value in sets for arg in ("--set", value)]
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{scenario.name} ({size}, {dataset}) failed:\n{child.stderr.read()}")
    return {"size": size, "dataset": dataset, "algorithm": algorithm, "wall_s": wall,
            "peak_gb": usage.ru_maxrss / 1e6, **costs(out)}


def costs(out: Path) -> dict:
    messages = read_table(out, "messages").to_pandas()
    events = read_table(out, "events").to_pandas()
    pubs = messages[messages.kind == "pub"]
    published = pubs[pubs.sender.isna()].set_index("msg_id").t_arrive_us
    copies = pubs[pubs.sender.notna()].msg_id.value_counts()
    activated = sorted(events[events.kind == "multitree_activated"].t_us)
    plans = [json.loads(d) for d in events[events.kind == "multitree_recomputed"].detail]
    installed = [p for p in plans if p["installed"]]

    def per_publication(since: int) -> float:
        ids = published[published >= since].index
        return copies.reindex(ids, fill_value=0).sum() / max(len(ids), 1)

    return {"publications": len(published), "planned": per_publication(activated[0]),
            "final": per_publication(activated[-1]), "plans": len(installed),
            "trees": installed[-1]["clusters"] if installed else 0,
            "samples": installed[-1]["docs"] if installed else 0,
            "trees_computed": sum(p["trees_computed"] for p in plans)}


COLUMNS = [("size", "{}"), ("dataset", "{}"), ("algorithm", "{}"), ("final", "{:.2f}"), ("vs_opt", "{:.2f}"),
           ("planned", "{:.2f}"), ("plans", "{}"), ("trees", "{}"), ("samples", "{}"),
           ("trees_computed", "{:,}"), ("wall_s", "{:.0f}"), ("peak_gb", "{:.2f}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="500,2000")
    parser.add_argument("--datasets", default="Localized1,Localized2,Uniform")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--documents", type=int, default=4000)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--paper", action="store_true",
                        help="the paper's setup: gt_itm graphs, keywords_paper datasets, plan: offline")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            for dataset in args.datasets.split(","):
                setting = []
                for algorithm in args.algorithms.split(","):
                    out = Path(tmp) / f"{size}-{dataset}-{algorithm}"
                    setting.append(run_one(algorithm, size, dataset, args.documents, args.overrides, out, args.paper))
                    print(f"{size} {dataset} {algorithm}: {setting[-1]['wall_s']:.0f} s", file=sys.stderr)
                opt = next((r["final"] for r in setting if r["algorithm"] == "OPT"), None)
                for row in setting:
                    row["vs_opt"] = row["final"] / opt if opt else float("nan")
                rows += setting
    print_table(rows, COLUMNS)


if __name__ == "__main__":
    main()
