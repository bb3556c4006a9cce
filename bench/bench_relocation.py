"""Publisher-relocation benchmark (issue 14): static placement against POP, GRAPE load 100 and
GRAPE delay 100 on one subscriber distribution, side by side.

    python bench/bench_relocation.py [--size full|small] [--distribution enterprise|random]
                                     [--settings static,pop,grape_load,grape_delay]
                                     [--quotes DIR] [--set KEY=VALUE ...]

Runs ``experiments/scenarios/relocation_<distribution>_<setting>.yaml`` (``relocation_small_...``
with ``--size small``) in this process, one after the other (``--quotes``: a directory of quote
files, such as ../shared/data/stockquotes, instead of the seeded random walk), and prints a
Markdown table of what the paper compares: the mean broker message rate (every processed
message, per broker and simulated second), the mean broker input utilisation (busy time over
simulated time), delivery delay and hops, the relocation protocols' control messages and
their share of all processed messages, and the migrations with their mean wait (publisher
paused) and selection times; and where load builds up, the busiest broker's utilisation while
the publishers publish (``peak_util``) and a publication's mean wait in a mailbox
(``pub_wait_ms``). With ``--placements``, where the publishers end up, for the enterprise
distribution: the mean hops of the deliveries to the high-rated subscribers' broker H and of
the others (``high_hops``, ``low_hops``), how many publishers end at H (``at_h``), their mean
distance from H (``from_h``), and from the broker that would give their own deliveries the
fewest hops (``from_median``: the weighted median of the tree, weighting each broker by the
deliveries it took of that publisher).
"""
import argparse
import json
from collections import Counter
from pathlib import Path

import networkx as nx

from comparison import SCENARIOS, compare, print_table

from actors.results import read_table
from experiments.build import build_topology, generated_records
from protocols.relocation import CONTROL_KINDS


def measure(out, manifest: dict) -> dict:
    messages = read_table(out, "messages").to_pandas()
    deliveries = read_table(out, "deliveries").to_pandas()
    samples = read_table(out, "samples").to_pandas()
    events = read_table(out, "events").to_pandas()
    seconds, brokers = manifest["sim_end_us"] / 1e6, manifest["brokers"]
    processed = messages[messages.t_end_us.notna()]
    control = processed.kind.isin(CONTROL_KINDS).sum()
    moves = [json.loads(d) for d in events[events.kind == "publisher_migrated"].detail]
    delay_ms = (deliveries.t_deliver_us - deliveries.t_pub_us) / 1000
    publishing_from = manifest["scenario"]["workload"]["generator"]["start"] * 1e6
    publishing = samples[samples.t_us > publishing_from]
    pubs = processed[processed.kind == "pub"]
    return {
        "deliveries": len(deliveries),
        "msg_rate": len(processed) / brokers / seconds, "pub_rate": (processed.kind == "pub").sum() / brokers / seconds,
        "utilisation": samples.busy_us.sum() / 1e6 / brokers / seconds,
        "peak_util": publishing.groupby("broker").busy_us.sum().max() / (manifest["sim_end_us"] - publishing_from),
        "pub_wait_ms": (pubs.t_start_us - pubs.t_arrive_us).mean() / 1000,
        "delay_ms": delay_ms.mean(), "p90_ms": delay_ms.quantile(0.9), "hops": deliveries.hops.mean(),
        "control": int(control), "control_share": control / len(processed), "migrations": len(moves),
        "wait_ms": sum(m["t_end_us"] - m["t_start_us"] for m in moves) / 1000 / max(len(moves), 1),
        "selection_ms": sum(m["selection_us"] for m in moves) / 1000 / max(len(moves), 1),
    }


def placements(out, manifest: dict) -> dict:
    """Where the enterprise workload's publishers end up against H, the broker of every
    high-rated subscriber (see the module's docstring)."""
    scenario, where = manifest["scenario"], Path(out) / "manifest.json"
    base = Path(manifest.get("scenario_dir") or ".")
    graph, _ = build_topology(scenario, base, where)
    records = generated_records(scenario, graph, base, where)
    high = {r["broker"] for r in records if r["op"] == "subscribe" and r["filter"].count("],[") == 1}
    if len(high) != 1:
        raise SystemExit("bench_relocation: --placements needs the enterprise distribution (one broker of high-rated subscribers)")
    (h,) = high
    final = {r["client"]: r["broker"] for r in records if r["op"] == "advertise"}
    events = read_table(out, "events").to_pandas()
    for detail in sorted((json.loads(d) for d in events[events.kind == "publisher_migrated"].detail),
                         key=lambda m: m["t_end_us"]):
        final[detail["publisher"]] = detail["target"]
    deliveries = read_table(out, "deliveries").to_pandas()
    at_h = deliveries.broker == h
    distance = dict(nx.all_pairs_shortest_path_length(graph))
    taken = Counter(zip(deliveries.pub_id.str.rsplit("-", n=1).str[0], deliveries.broker))
    medians = {}
    for (publisher, broker), count in taken.items():
        medians.setdefault("P-" + publisher, Counter())[broker] = count
    from_median = [distance[final[p]][_median(weights, distance, graph)] for p, weights in medians.items()]
    return {"high_hops": deliveries.hops[at_h].mean(), "low_hops": deliveries.hops[~at_h].mean(),
            "at_h": sum(b == h for b in final.values()), "publishers": len(final),
            "from_h": sum(distance[b][h] for b in final.values()) / len(final),
            "from_median": sum(from_median) / len(from_median)}


def _median(weights: Counter, distance: dict, graph) -> str:
    """The broker with the fewest delivery hops to ``weights``' brokers (the first by name)."""
    return min(sorted(graph), key=lambda b: sum(n * distance[b][at] for at, n in weights.items()))


PLACEMENT_COLUMNS = [("high_hops", "{:.2f}"), ("low_hops", "{:.2f}"), ("at_h", "{}"), ("publishers", "{}"),
                     ("from_h", "{:.2f}"), ("from_median", "{:.2f}")]

COLUMNS = [("setting", "{}"), ("wall_s", "{:.0f}"), ("events_per_s", "{:,.0f}"), ("deliveries", "{:,}"),
           ("msg_rate", "{:.1f}"), ("pub_rate", "{:.1f}"), ("utilisation", "{:.2%}"), ("peak_util", "{:.1%}"),
           ("pub_wait_ms", "{:.3f}"), ("delay_ms", "{:.1f}"),
           ("p90_ms", "{:.1f}"), ("hops", "{:.2f}"), ("control", "{:,}"), ("control_share", "{:.2%}"),
           ("migrations", "{}"), ("wait_ms", "{:.1f}"), ("selection_ms", "{:.1f}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="full", choices=["full", "small"])
    parser.add_argument("--distribution", default="enterprise", choices=["enterprise", "random"])
    parser.add_argument("--settings", default="static,pop,grape_load,grape_delay")
    parser.add_argument("--quotes", help="a directory of quote files (default: the seeded random walk)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--placements", action="store_true",
                        help="also where the publishers end up (enterprise distribution only)")
    args = parser.parse_args()
    overrides = list(args.overrides)
    if args.quotes:
        overrides.append(f"workload.generator.quotes={Path(args.quotes).resolve()}")
    prefix = "relocation_small" if args.size == "small" else "relocation"
    variants = {setting: SCENARIOS / f"{prefix}_{args.distribution}_{setting}.yaml"
                for setting in args.settings.split(",")}
    if args.placements:
        def measured(out, manifest: dict) -> dict:
            return {**measure(out, manifest), **placements(out, manifest)}
        print_table(compare("setting", variants, overrides, measured), COLUMNS + PLACEMENT_COLUMNS)
    else:
        print_table(compare("setting", variants, overrides, measure), COLUMNS)

if __name__ == "__main__":
    main()
