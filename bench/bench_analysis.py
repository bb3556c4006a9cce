"""Analysis benchmark (issue 6): a synthetic run with 10 million ``messages`` rows analysed by
``pubsub-emu analyze`` (local Spark), target under 2 minutes on 2 cores.

The run imitates a one-hour burst experiment on a 100-broker random tree: publications flood
a random subtree each (one message row per broker reached, a delivery at some of them),
subscriptions and unsubscriptions with ``cause`` on a share of them, samples every second.

    python bench/bench_analysis.py [--rows 10000000] [--keep DIR]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.results import SCHEMAS, write_table  # noqa: E402

BROKERS = 100
HOUR_US = 3600 * 1_000_000
COPIES_PER_PUB = 8


def synthetic_run(run_dir: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    tree = nx.random_labeled_tree(BROKERS, seed=seed)
    names = np.array([f"B{i:03d}" for i in range(BROKERS)])
    write_table(run_dir, "links/part-0.parquet", "links",
                {"a": [names[a] for a, b in tree.edges], "b": [names[b] for a, b in tree.edges],
                 "latency_us": [1000] * (BROKERS - 1)})
    roles = ["core" if i < 5 else "edge" for i in range(BROKERS)]
    write_table(run_dir, "brokers/part-0.parquet", "brokers",
                {"broker": list(names), "role": roles, "host": [0] * BROKERS})
    chunk = 1_000_000
    for part, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        messages, deliveries = _chunk(rng, tree, names, start, n)
        pq.write_table(messages, run_dir / "messages" / f"part-00000-0000-{part:06d}.parquet")
        pq.write_table(deliveries, run_dir / "deliveries" / f"part-00000-0000-{part:06d}.parquet")
        pq.write_table(_groups(deliveries), run_dir / "delivery_groups" / f"part-00000-0000-{part:06d}.parquet")
    t = np.repeat(np.arange(1, 3601, dtype=np.int64) * 1_000_000, BROKERS)
    queue = rng.poisson(3, t.size).astype(np.int32)
    columns = {"t_us": t, "broker": np.tile(names, 3600), "queue_len": queue,
               "prt_size": rng.integers(100, 5000, t.size, dtype=np.int32),
               "srt_size": np.full(t.size, 40, np.int32), "busy_us": rng.integers(0, 1_000_000, t.size)}
    schema = SCHEMAS["samples"]  # protocol columns (preserved entries, soft links, ...) stay null
    samples = pa.table([columns.get(f.name, pa.nulls(t.size, f.type)) for f in schema], schema=schema)
    pq.write_table(samples, run_dir / "samples" / "part-00000-0000-999999.parquet")
    manifest = {"name": "synthetic", "seed": seed, "status": "complete", "sim_end_us": HOUR_US,
                "brokers": BROKERS, "hosts": 1, "events": rows, "scenario": {}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def _chunk(rng, tree, names, start: int, n: int):
    """``n`` message rows: publication copies along BFS paths of random roots, plus 10% subs."""
    pubs = n * 9 // 10 // COPIES_PER_PUB
    roots = rng.integers(0, BROKERS, pubs)
    paths = {r: list(nx.bfs_edges(tree, r))[:COPIES_PER_PUB - 1] for r in np.unique(roots)}
    pub_ids = np.array([f"M{start + i}" for i in range(pubs)])
    t_pub = np.sort(rng.integers(0, HOUR_US, pubs))
    broker, sender, msg, t_arrive = [], [], [], []
    for i, r in enumerate(roots):
        hops = paths[r]
        broker += [names[r]] + [names[b] for _, b in hops]
        sender += [None] + [names[a] for a, _ in hops]
        msg += [pub_ids[i]] * (len(hops) + 1)
        t_arrive += [t_pub[i] + 1000 * k for k in range(len(hops) + 1)]
    copies = len(broker)
    subs = n - copies
    broker += list(names[rng.integers(0, BROKERS, subs)])
    sender += list(names[rng.integers(0, BROKERS, subs)])
    msg += [f"S{start + i}" for i in range(subs)]
    t_arrive += list(rng.integers(0, HOUR_US, subs))
    kind = ["pub"] * copies + list(rng.choice(["sub", "unsub", "sub_batch"], subs))
    t_arrive = np.array(t_arrive, dtype=np.int64)
    service = rng.integers(100, 5000, n)
    triggered_by = [None] * copies + [f"S{x}" if x % 3 == 0 else None for x in range(subs)]
    messages = pa.table({
        "broker": broker, "sender": sender, "kind": kind, "msg_id": msg, "t_arrive_us": t_arrive,
        "t_start_us": t_arrive, "t_end_us": t_arrive + service, "queue_len": rng.poisson(3, n).astype(np.int32),
        "sent": rng.integers(0, 3, n, dtype=np.int32), "dropped": np.zeros(n, bool), "cause": [None] * n,
        "batch_size": [None] * copies + [5 if k == "sub_batch" else None for k in kind[copies:]],
        "triggered_by": triggered_by, "origin": [None] * n,
    }, schema=SCHEMAS["messages"])
    delivered = rng.random(copies) < 0.3
    d_idx = np.flatnonzero(delivered)
    deliveries = pa.table({
        "pub_id": np.array(msg[:copies])[d_idx], "sub_id": [f"S{i}" for i in d_idx],
        "client": [f"c{i}" for i in d_idx], "broker": np.array(broker[:copies])[d_idx],
        "t_pub_us": np.repeat(t_pub, [len(paths[r]) + 1 for r in roots])[d_idx],
        "t_deliver_us": t_arrive[d_idx] + service[d_idx], "hops": rng.integers(0, 8, d_idx.size, dtype=np.int32),
    }, schema=SCHEMAS["deliveries"])
    return messages, deliveries


def _groups(deliveries: pa.Table) -> pa.Table:
    """The ``delivery_groups`` the emulator writes beside ``deliveries``."""
    keys = ["pub_id", "broker", "t_pub_us", "t_deliver_us", "hops"]
    counted = deliveries.group_by(keys).aggregate([("sub_id", "count")])
    schema = SCHEMAS["delivery_groups"]
    return pa.table([*(counted[k] for k in keys), counted["sub_id_count"].cast(pa.int32())], schema=schema)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keep", type=Path, help="write the synthetic run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        if not (run_dir / "manifest.json").exists():
            for table in ("messages", "deliveries", "delivery_groups", "samples"):
                (run_dir / table).mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            synthetic_run(run_dir, args.rows)
            print(f"synthetic run with {args.rows:,} message rows written in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "experiments.cli", "analyze", str(run_dir), "--out",
                        str(Path(tmp) / "report")], check=True, cwd=Path(__file__).resolve().parent.parent)
        print(f"analysed in {time.perf_counter() - started:.0f} s wall (target: 120 s)")


if __name__ == "__main__":
    main()
