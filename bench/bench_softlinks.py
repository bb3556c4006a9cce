"""Soft-link benchmark (issue 13): one dataset under several forwarding strategies, side by side.

    python bench/bench_softlinks.py [--size c1|small] [--dataset dense|sparse]
                                    [--strategies S0,SH] [--set KEY=VALUE ...]

Runs ``experiments/scenarios/softlinks_<size>_<dataset>_<strategy>.yaml`` for each strategy
in this process, one after the other, and prints a Markdown table: wall time and events/s,
then what the paper compares: deliveries, publication copies between brokers (traffic), pure
forwarders (processed copies at a broker with no local delivery of that publication), yield
(processed copies with a local delivery / all), mean hops, delivery delay, the busiest
uplink and the soft links held at the end.
"""
import argparse

from comparison import SCENARIOS, compare, print_table

from actors.results import read_table


def measure(out, manifest: dict) -> dict:
    messages = read_table(out, "messages").to_pandas()
    deliveries = read_table(out, "deliveries").to_pandas()
    samples = read_table(out, "samples").to_pandas()
    copies = messages[(messages.kind == "pub") & messages.t_end_us.notna()]
    delivered_at = set(zip(deliveries.pub_id, deliveries.broker))
    useful = sum((p, b) in delivered_at for p, b in zip(copies.msg_id, copies.broker))
    delay_ms = (deliveries.t_deliver_us - deliveries.t_pub_us) / 1000
    last = samples[samples.t_us == samples.t_us.max()]
    return {
        "deliveries": len(deliveries),
        "traffic": int(copies.sender.notna().sum()), "pure": len(copies) - useful, "yield": useful / len(copies),
        "hops": deliveries.hops.mean(), "delay_ms": delay_ms.mean(), "p90_ms": delay_ms.quantile(0.9),
        "uplink": samples.uplink_utilisation.max(), "soft_links": int(last.soft_links.sum()),
    }


COLUMNS = [("strategy", "{}"), ("wall_s", "{:.1f}"), ("events_per_s", "{:,.0f}"), ("deliveries", "{:,}"),
           ("traffic", "{:,}"), ("pure", "{:,}"), ("yield", "{:.1%}"), ("hops", "{:.2f}"), ("delay_ms", "{:.1f}"),
           ("p90_ms", "{:.1f}"), ("uplink", "{:.2f}"), ("soft_links", "{}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="c1", choices=["c1", "small"])
    parser.add_argument("--dataset", default="dense", choices=["dense", "sparse"])
    parser.add_argument("--strategies", default="S0,SH")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    variants = {strategy: SCENARIOS / f"softlinks_{args.size}_{args.dataset}_{strategy}.yaml"
                for strategy in args.strategies.split(",")}
    print_table(compare("strategy", variants, args.overrides, measure), COLUMNS)

if __name__ == "__main__":
    main()
