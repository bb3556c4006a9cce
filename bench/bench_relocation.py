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
(``pub_wait_ms``).
"""
import argparse
import json
from pathlib import Path

from comparison import SCENARIOS, compare, print_table

from actors.results import read_table
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
    args = parser.parse_args()
    overrides = list(args.overrides)
    if args.quotes:
        overrides.append(f"workload.generator.quotes={Path(args.quotes).resolve()}")
    prefix = "relocation_small" if args.size == "small" else "relocation"
    variants = {setting: SCENARIOS / f"{prefix}_{args.distribution}_{setting}.yaml"
                for setting in args.settings.split(",")}
    print_table(compare("setting", variants, overrides, measure), COLUMNS)

if __name__ == "__main__":
    main()
