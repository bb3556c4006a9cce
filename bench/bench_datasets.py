"""The soft-link paper's datasets as our scenarios build them (issue 37), measured before any
run: per publication, the share of the subscriptions it matches (the paper's Fig. 8a plots its
CDF) and the share of the brokers holding subscriptions that hold one it matches (what leaves
brokers that only forward). With ``--any`` the same datasets with subscriptions placed on any
broker (``interest: any``), the variant that shows why the brokers' interests matter.

    python bench/bench_datasets.py [--any] [--plot docs/figures/softlinks_paper_datasets.png]
"""
import argparse
from pathlib import Path

import numpy as np
from comparison import SCENARIOS, print_table

from analysis.style import plt
from experiments.build import resolve
from workloads.structure import matching_shares

DATASETS = {  # name: (scenario, configuration, the paper's mean share)
    "DT1": ("softlinks_paper_dt1_S0.yaml", "C1", 0.08),
    "DT2": ("softlinks_paper_dt2_S0.yaml", "C1", 0.53),
    "DT3": ("softlinks_paper_c2_S0.yaml", "C2", 0.09),
    "DT-C": ("softlinks_paper_c3_S0.yaml", "C3", 0.04),
}


def measured(interest: str) -> dict:
    return {name: matching_shares(resolve(SCENARIOS / scenario, [f"workload.generator.interest={interest}"]).injections)
            for name, (scenario, *_) in DATASETS.items()}


def rows_of(found: dict, interest: str) -> list[dict]:
    rows = []
    for name, matching in found.items():
        _, configuration, paper = DATASETS[name]
        rows.append({"dataset": name, "config": configuration, "interest": interest, "paper": f"{paper:.0%}",
                     "subscriptions matched": f"{matching.subscriptions.mean():.1%}",
                     "p10 / p50 / p90": " / ".join(f"{q:.1%}" for q in _percentiles(matching.subscriptions)),
                     "brokers reached": f"{matching.brokers.mean():.1%}",
                     "brokers p10 / p50 / p90": " / ".join(f"{q:.1%}" for q in _percentiles(matching.brokers))})
    return rows


def _percentiles(values):
    return np.percentile(values, [10, 50, 90])


def plot(found: dict, path: Path) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, matching in found.items():
        for ax, shares in zip(axes, (matching.subscriptions, matching.brokers)):
            x = np.sort(shares) * 100
            ax.step(x, np.arange(1, len(x) + 1) / len(x) * 100, where="post", label=name)
    for ax, what in zip(axes, ("subscriptions a publication matches (%)", "brokers holding a match (% of brokers)")):
        ax.set_xlabel(what)
        ax.set_ylabel("share of publications (%)")
        ax.set_ylim(0, 102)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_title("(a) Matching share (the paper's Fig. 8a)", loc="left", fontsize="medium")
    axes[1].set_title("(b) Brokers a publication has a match at", loc="left", fontsize="medium")
    figure.suptitle("The soft-link datasets as built (brokers' interests), every publication of each scenario")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--any", action="store_true", help="also subscriptions on any broker (interest: any)")
    parser.add_argument("--plot", type=Path, help="draw the CDFs of the brokers'-interest datasets here")
    args = parser.parse_args()
    found = measured("broker")
    rows = rows_of(found, "broker")
    if args.any:
        rows += rows_of(measured("any"), "any")
    print_table(rows, [(key, "{}") for key in rows[0]])
    if args.plot:
        plot(found, args.plot)


if __name__ == "__main__":
    main()
