"""Counters that explain a burst run's numbers, read from one run directory's tables.

    python bench/burst_counters.py work RUN [--broker core-E] --from SECONDS
        the messages a broker served from a time on, by kind: how many, their total service time,
        and for unsubscriptions and subscriptions a line fit of the service time against k, the
        unsubscriptions the broker had served before (how a root's removal costs more the more
        roots went before it)
    python bench/burst_counters.py wait RUN [--broker core-E] --from SECONDS [--to SECONDS]
        how long the publications arriving in a window (by default 120 s) and served by the run's end
        waited in the broker's queue
    python bench/burst_counters.py triggered RUN
        triggered subscription messages (``triggered_by`` set) each core broker received, by
        sender, and sent
    python bench/burst_counters.py load RUN --from SECONDS --to SECONDS
        per core broker over a window: messages arriving by kind with their mean service time,
        and the work arriving as a share of the window (above 100%: more than it can serve)
    python bench/burst_counters.py queue RUN [--broker BROKER]
        the messages waiting at the longest queue the broker had (by default: the longest any core
        broker had): by kind, with their mean service time and the time to serve them all, and how
        many of them the run ended before serving
    python bench/burst_counters.py tables RUN --at SECONDS [--at SECONDS ...]
        each core broker's routing-table size at the last sample at or before each time

Times are simulated seconds. Used for the causes in bench/RESULTS.md (session 54).
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds

KINDS = ("pub", "sub", "unsub")


def _table(run: str, name: str, columns: list[str], where=None):
    return ds.dataset(f"{run}/{name}", format="parquet").to_table(columns=columns, filter=where)


def _core_brokers(run: str) -> list[str]:
    brokers = _table(run, "brokers", ["broker", "role"])
    return sorted(b for b, role in zip(brokers["broker"].to_pylist(), brokers["role"].to_pylist()) if role == "core")


def _us(seconds: float) -> int:
    return int(round(seconds * 1e6))


def _served(run: str, broker: str | None, start_s: float, end_s: float | None = None):
    """(broker, kind, start, service, arrive) arrays of the messages served that arrived in the window."""
    where = (pc.field("t_arrive_us") >= _us(start_s)) & pc.field("t_end_us").is_valid()
    if end_s is not None:
        where &= pc.field("t_arrive_us") < _us(end_s)
    if broker is not None:
        where &= pc.field("broker") == broker
    m = _table(run, "messages", ["broker", "kind", "t_arrive_us", "t_start_us", "t_end_us"], where)
    start = m["t_start_us"].to_numpy()
    return (np.array(m["broker"].to_pylist()), np.array(m["kind"].to_pylist()), start,
            (m["t_end_us"].to_numpy() - start) / 1e3, m["t_arrive_us"].to_numpy())


def work(args) -> None:
    _, kind, start, service_ms, _ = _served(args.run, args.broker, args.start)
    unsub_starts = np.sort(start[kind == "unsub"])
    for name in KINDS:
        chosen = kind == name
        if not chosen.any():
            continue
        line = f"{args.broker} {name}: {chosen.sum():,} served, {service_ms[chosen].sum() / 1e3:,.0f} s of work"
        if name != "pub":
            before = np.searchsorted(unsub_starts, start[chosen], side="left")  # unsubscriptions served before
            slope, intercept = np.polyfit(before, service_ms[chosen], 1)
            deviation = np.abs(service_ms[chosen] - (intercept + slope * before)).max()
            line += f"; service = {intercept:,.1f} ms + {slope:.3f} ms x k (largest deviation {deviation:.3f} ms)"
        print(line)


def wait(args) -> None:
    _, kind, start, _, arrive = _served(args.run, args.broker, args.start, args.end)
    waited = (start[kind == "pub"] - arrive[kind == "pub"]) / 1e6
    order = np.argsort(arrive[kind == "pub"])
    print(f"{args.broker}: {len(waited):,} publications arriving {args.start:,.0f}-{args.end:,.0f} s waited "
          f"{waited.mean():,.1f} s on average (the first {waited[order][0]:,.1f} s, the longest {waited.max():,.1f} s)")


def triggered(args) -> None:
    m = _table(args.run, "messages", ["broker", "sender", "kind", "triggered_by"],
               pc.field("triggered_by").is_valid() & (pc.field("kind") == "sub"))
    receivers, senders = m["broker"].to_pylist(), m["sender"].to_pylist()
    sent = Counter(senders)
    for broker in _core_brokers(args.run):
        from_whom = Counter(s for r, s in zip(receivers, senders) if r == broker)
        senders_here = ", ".join(f"{s} {n:,}" for s, n in from_whom.most_common())
        print(f"{broker}: received {sum(from_whom.values()):,} ({senders_here}); sent {sent[broker]:,}")


def load(args) -> None:
    broker, kind, _, service_ms, _ = _served(args.run, None, args.start, args.end)
    window_ms = (args.end - args.start) * 1e3
    for core in _core_brokers(args.run):
        here = broker == core
        parts = [f"{k} {np.sum(here & (kind == k)):,} x {service_ms[here & (kind == k)].mean():.1f} ms"
                 for k in KINDS if np.any(here & (kind == k))]
        print(f"{core}: {', '.join(parts)}; work arriving {service_ms[here].sum() / window_ms:.0%} of the window")


def queue(args) -> None:
    where = (pc.field("broker") == args.broker) if args.broker else pc.field("broker").isin(_core_brokers(args.run))
    m = _table(args.run, "messages", ["broker", "kind", "t_arrive_us", "t_start_us", "t_end_us", "queue_len"], where)
    peak = pc.index(m["queue_len"], pc.max(m["queue_len"])).as_py()
    broker, t_peak = m["broker"][peak].as_py(), m["t_arrive_us"][peak].as_py()
    here = m.filter(pc.equal(m["broker"], broker))
    arrive = here["t_arrive_us"].to_numpy()
    start = here["t_start_us"].to_numpy(zero_copy_only=False).astype(float)  # NaN: never served
    waiting = (arrive < t_peak) & ~(start < t_peak)  # arrived before the peak's arrival, not served by then
    served = waiting & ~np.isnan(start)
    end = here["t_end_us"].to_numpy(zero_copy_only=False).astype(float)
    kind, service_ms = np.array(here["kind"].to_pylist())[served], (end - start)[served] / 1e3
    parts = [f"{k} {np.sum(kind == k):,} x {service_ms[kind == k].mean():.1f} ms" for k in np.unique(kind)]
    print(f"{broker}: {m['queue_len'][peak].as_py():,} queued at {t_peak / 1e6:,.0f} s; of those served by the end "
          f"({', '.join(parts)}): {service_ms.mean():.1f} ms a message, {service_ms.sum() / 1e3:,.0f} s in all; "
          f"{np.sum(waiting & np.isnan(start)):,} never served")


def tables(args) -> None:
    cores = _core_brokers(args.run)
    s = _table(args.run, "samples", ["t_us", "broker", "prt_size"], pc.field("broker").isin(cores))
    t, size, broker = s["t_us"].to_numpy(), s["prt_size"].to_numpy(), np.array(s["broker"].to_pylist())
    for at in args.at:
        sample = t[t <= _us(at)].max()
        here = {b: int(v) for b, v in zip(broker[t == sample], size[t == sample])}
        print(f"at {sample / 1e6:,.0f} s: mean {np.mean(list(here.values())):,.0f}; "
              + ", ".join(f"{b} {here[b]:,}" for b in cores))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler, broker: str | None = None, start: bool = False):
        sub = commands.add_parser(name)
        sub.set_defaults(handler=handler)
        sub.add_argument("run")
        if name in ("work", "wait", "queue"):
            sub.add_argument("--broker", default=broker)
        if start:
            sub.add_argument("--from", dest="start", type=float, required=True)
        return sub

    command("work", work, broker="core-E", start=True)
    command("wait", wait, broker="core-E", start=True).add_argument("--to", dest="end", type=float)
    command("triggered", triggered)
    command("load", load, start=True).add_argument("--to", dest="end", type=float, required=True)
    command("queue", queue)
    command("tables", tables).add_argument("--at", type=float, action="append", required=True)
    args = parser.parse_args()
    if args.command == "wait" and args.end is None:
        args.end = args.start + 120.0  # the probe window: 300 probes 0.4 s apart
    args.handler(args)


if __name__ == "__main__":
    main()
