"""Streaming a run's tables to Parquet, as DESIGN.md section 9 lays them out.

Each host buffers rows per table and writes them as part files
``TABLE/part-EPOCH-HOST-SEQ.parquet``; a part is written under a temporary name and renamed,
so a reader never sees half a file. Epochs advance at snapshots: restoring a snapshot
deletes the host's parts of later epochs, so a restored run rewrites nothing twice.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMAS = {
    "messages": pa.schema([
        ("broker", pa.string()), ("sender", pa.string()), ("kind", pa.string()), ("msg_id", pa.string()),
        ("t_arrive_us", pa.int64()), ("t_start_us", pa.int64()), ("t_end_us", pa.int64()),
        ("queue_len", pa.int32()), ("sent", pa.int32()), ("dropped", pa.bool_()), ("cause", pa.string()),
        ("batch_size", pa.int32()),
        # the protocol message that set this one off (an unsubscription releasing covered ones)
        ("triggered_by", pa.string()),
    ]),
    "deliveries": pa.schema([
        ("pub_id", pa.string()), ("sub_id", pa.string()), ("client", pa.string()), ("broker", pa.string()),
        ("t_pub_us", pa.int64()), ("t_deliver_us", pa.int64()), ("hops", pa.int32()),
    ]),
    "samples": pa.schema([
        ("t_us", pa.int64()), ("broker", pa.string()), ("queue_len", pa.int32()), ("prt_size", pa.int32()),
        ("srt_size", pa.int32()), ("busy_us", pa.int64()),
        # protocol columns (null where the protocol has none): pruning's preserved entries and
        # the size of its statistics window at the subscribers' brokers; soft links held
        ("preserved", pa.int32()), ("window_entries", pa.int32()), ("window_bytes", pa.int64()),
        ("soft_links", pa.int32()),
        # the share of the interval a broker's uplink was busy (null: no uplink limit)
        ("uplink_utilisation", pa.float64()),
    ]),
    "events": pa.schema([("t_us", pa.int64()), ("broker", pa.string()), ("kind", pa.string()), ("detail", pa.string())]),
    "brokers": pa.schema([("broker", pa.string()), ("role", pa.string()), ("host", pa.int32())]),
    # runs with faults: per publication, the subscriptions the delivery oracle says it matches
    "expected": pa.schema([("pub_id", pa.string()), ("t_pub_us", pa.int64()), ("subscribers", pa.int32())]),
    "links": pa.schema([("a", pa.string()), ("b", pa.string()), ("latency_us", pa.int64())]),
}
PROTOCOL_SAMPLE_COLUMNS = ("preserved", "window_entries", "window_bytes", "soft_links")
STREAMED = ("messages", "deliveries", "samples", "events")
KEY_COLUMNS = {
    "messages": ["broker", "t_arrive_us", "sender", "kind", "msg_id"],
    "deliveries": ["pub_id", "sub_id"],
    "samples": ["t_us", "broker"],
    "events": ["t_us", "broker", "kind", "detail"],
    "brokers": ["broker"],
    "links": ["a", "b"],
}


def write_table(path: Path, table: str, rows: dict[str, list]) -> None:
    """Write one complete part file atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    pq.write_table(pa.table(rows, schema=SCHEMAS[table]), tmp)
    os.replace(tmp, path)


class TableWriter:
    """Row buffers of one host, flushed to part files when large and at epoch ends."""

    def __init__(self, run_dir: Path, host: int, flush_rows: int = 200_000) -> None:
        self.run_dir = Path(run_dir)
        self.host = host
        self.flush_rows = flush_rows
        self.epoch = 0
        self.sequence = 0
        self.rows: dict[str, list[tuple]] = {t: [] for t in STREAMED}

    def append(self, table: str, *values) -> None:
        """One row, its values in the order of the table's columns."""
        rows = self.rows[table]
        rows.append(values)
        if len(rows) >= self.flush_rows:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self.rows[table]
        if not rows:
            return
        name = f"part-{self.epoch:05d}-{self.host:04d}-{self.sequence:06d}.parquet"
        self.sequence += 1
        columns = dict(zip(SCHEMAS[table].names, map(list, zip(*rows))))
        write_table(self.run_dir / table / name, table, columns)
        self.rows[table] = []

    def flush(self) -> None:
        for table in STREAMED:
            self._flush(table)

    def next_epoch(self) -> int:
        """Commit everything buffered and start a new epoch; returns the new epoch."""
        self.flush()
        self.epoch += 1
        self.sequence = 0
        return self.epoch

    def discard_after(self, epoch: int) -> None:
        """Delete this host's parts from ``epoch`` on (a restore goes back to its start)."""
        for table in STREAMED:
            for part in (self.run_dir / table).glob(f"*part-*-{self.host:04d}-*.parquet*"):
                if int(part.name.split("-")[1]) >= epoch:  # a dead host's temporary files too
                    part.unlink()
        self.epoch, self.sequence = epoch, 0
        self.rows = {t: [] for t in STREAMED}


def write_manifest(run_dir: Path, manifest: dict) -> None:
    tmp = Path(run_dir) / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    os.replace(tmp, Path(run_dir) / "manifest.json")


def read_table(run_dir: Path, table: str) -> pa.Table:
    """All parts of one table of a run (an empty table with the schema when there are none)."""
    folder = Path(run_dir) / table
    parts = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not parts:
        return SCHEMAS[table].empty_table()
    return pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default")
