"""Streaming a run's tables to Parquet, as DESIGN.md section 9 lays them out.

Each host buffers rows per table and writes them as part files
``TABLE/part-EPOCH-HOST-SEQ.parquet``; a part is written under a temporary name and renamed,
so a reader never sees half a file. Epochs advance at snapshots: restoring a snapshot
deletes the host's parts of later epochs, so a restored run rewrites nothing twice.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from .storage import Collected, RunDir

SCHEMAS = {
    "messages": pa.schema([
        ("broker", pa.string()), ("sender", pa.string()), ("kind", pa.string()), ("msg_id", pa.string()),
        ("t_arrive_us", pa.int64()), ("t_start_us", pa.int64()), ("t_end_us", pa.int64()),
        ("queue_len", pa.int32()), ("sent", pa.int32()), ("dropped", pa.bool_()), ("cause", pa.string()),
        ("batch_size", pa.int32()),
        # the protocol message that set this one off (an unsubscription releasing covered ones)
        ("triggered_by", pa.string()),
        # the trace sequence number of the client operation whose handling sent it, hop after
        # hop (a fault's recovery: -1 - the fault's number); null for what a broker sent on its own
        ("origin", pa.int64()),
    ]),
    # messages still on a link when the run ended (t_arrive_us: when they would have
    # arrived), and client operations held back (null t_arrive_us: their client was paused or
    # their broker crashed)
    "in_flight": pa.schema([
        ("broker", pa.string()), ("sender", pa.string()), ("kind", pa.string()), ("msg_id", pa.string()),
        ("t_arrive_us", pa.int64()), ("origin", pa.int64()),
    ]),
    "deliveries": pa.schema([
        ("pub_id", pa.string()), ("sub_id", pa.string()), ("client", pa.string()), ("broker", pa.string()),
        ("t_pub_us", pa.int64()), ("t_deliver_us", pa.int64()), ("hops", pa.int32()),
    ]),
    # the deliveries counted per publication, broker, time and hops, written as they are made: an
    # analysis reads these rows, tens of millions at the papers' sizes, not billions of deliveries
    # (a key may have more than one row: two services at one broker can end at the same time)
    "delivery_groups": pa.schema([
        ("pub_id", pa.string()), ("broker", pa.string()), ("t_pub_us", pa.int64()), ("t_deliver_us", pa.int64()),
        ("hops", pa.int32()), ("deliveries", pa.int32()),
    ]),
    "samples": pa.schema([
        ("t_us", pa.int64()), ("broker", pa.string()), ("queue_len", pa.int32()), ("prt_size", pa.int32()),
        ("srt_size", pa.int32()), ("busy_us", pa.int64()),
        # protocol columns (null where the protocol has none): pruning's preserved entries and
        # the size of its statistics window at the subscribers' brokers; soft links held, and
        # the brokers they could be held to with a gain (protocols/softlinks.py gainful_peers);
        # the values relocation's trace state holds (protocols/relocation.py trace_state)
        ("preserved", pa.int32()), ("window_entries", pa.int32()), ("window_bytes", pa.int64()),
        ("soft_links", pa.int32()), ("gainful_peers", pa.int32()), ("trace_state", pa.int32()),
        # the share of the interval a broker's uplink was busy (null: no uplink limit)
        ("uplink_utilisation", pa.float64()),
    ]),
    "events": pa.schema([("t_us", pa.int64()), ("broker", pa.string()), ("kind", pa.string()), ("detail", pa.string())]),
    "brokers": pa.schema([("broker", pa.string()), ("role", pa.string()), ("host", pa.int32())]),
    # runs with faults: per publication, the subscriptions the delivery oracle says it matches
    "expected": pa.schema([("pub_id", pa.string()), ("t_pub_us", pa.int64()), ("subscribers", pa.int32())]),
    "links": pa.schema([("a", pa.string()), ("b", pa.string()), ("latency_us", pa.int64())]),
    # soft links with covering_sets: the paper's covering sets measured after the run (protocols/covering_sets.py)
    "covering_sets": pa.schema([
        ("t_us", pa.int64()), ("broker", pa.string()), ("entries", pa.int32()), ("wst_anchors", pa.int32()),
        ("covering_set_size", pa.int32()), ("publications", pa.int32()), ("predicate_evaluations", pa.int64()),
        ("evaluations_per_publication", pa.float64()),
    ]),
}
PROTOCOL_SAMPLE_COLUMNS = ("preserved", "window_entries", "window_bytes", "soft_links", "gainful_peers", "trace_state")
STREAMED = ("messages", "deliveries", "delivery_groups", "samples", "events", "in_flight")


def has_table(run_dir, table: str) -> bool:
    """Whether a run directory holds any complete part file of ``table``."""
    return bool(as_run_dir(run_dir).names(table, "*.parquet"))


def write_expected(run_dir, owed: list[tuple[str, int, int]]) -> None:
    """A run's ``expected`` table from (publication id, publication time, deliveries it owes)."""
    write_table(run_dir, "expected/part-0.parquet", "expected", {
        "pub_id": [p for p, _, _ in owed], "t_pub_us": [t for _, t, _ in owed], "subscribers": [n for _, _, n in owed]})


def write_table(run_dir, relative: str, table: str, rows: dict[str, list]) -> None:
    """Write one complete part file ``relative`` of a run directory (a path, URI or RunDir)."""
    as_run_dir(run_dir).write_parquet(relative, pa.table(rows, schema=SCHEMAS[table]))


def as_run_dir(run_dir) -> RunDir | Collected:
    """A path or URI opened as a RunDir; a RunDir, or a host's Collected files, as it is."""
    return run_dir if isinstance(run_dir, (RunDir, Collected)) else RunDir(run_dir)


class TableWriter:
    """Buffers of one host's rows, flushed to part files when large and at epoch ends. Rows
    come one by one (``append``, ``extend``) or as runs (``extend_run``: rows that share most of
    their values, such as a publication's deliveries at one broker)."""

    def __init__(self, run_dir: str | RunDir | Collected, host: int, flush_rows: int = 200_000) -> None:
        self.run_dir = as_run_dir(run_dir)
        self.host = host
        self.flush_rows = flush_rows
        self.epoch = 0
        self.sequence = 0
        self._empty_buffers()

    def _empty_buffers(self) -> None:
        self.rows: dict[str, list[tuple]] = {t: [] for t in STREAMED}
        self.runs: dict[str, list[tuple[int, tuple]]] = {t: [] for t in STREAMED}
        self.run_rows: dict[str, int] = dict.fromkeys(STREAMED, 0)

    def append(self, table: str, *values) -> None:
        """One row, its values in the order of the table's columns."""
        rows = self.rows[table]
        rows.append(values)
        if len(rows) >= self.flush_rows:
            self._flush(table)

    def extend(self, table: str, rows: list[tuple]) -> None:
        """Rows, each its values in the order of the table's columns."""
        buffered = self.rows[table]
        buffered += rows
        if len(buffered) >= self.flush_rows:
            self._flush(table)

    def extend_run(self, table: str, count: int, columns: tuple) -> None:
        """``count`` rows given as columns in the order of the table's columns, each a list,
        tuple or numpy array of the rows' values, or one value that every row of the run has.
        Kept as given (the caller must not change them afterwards) and laid out in numpy and
        Arrow at the flush: expanded and converted value by value in Python, the deliveries of
        a paper-size run cost a large share of its time (bench/LOG.md, session 58)."""
        if not count:
            return
        self.runs[table].append((count, columns))
        self.run_rows[table] += count
        if len(self.rows[table]) + self.run_rows[table] >= self.flush_rows:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows, runs = self.rows[table], self.runs[table]
        if not rows and not runs:
            return
        name = f"part-{self.epoch:05d}-{self.host:04d}-{self.sequence:06d}.parquet"
        self.sequence += 1
        schema = SCHEMAS[table]
        parts = []
        if rows:  # rows -> columns in Arrow's converter: transposing in Python cost 3 us a row
            parts.append(pa.Table.from_struct_array(pa.array(rows, type=pa.struct(list(schema)))))
        if runs:
            parts.append(_runs_table(runs, schema))
        self.run_dir.write_parquet(f"{table}/{name}", parts[0] if len(parts) == 1 else pa.concat_tables(parts))
        self.rows[table], self.runs[table], self.run_rows[table] = [], [], 0

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
        discard_parts(self.run_dir, self.host, epoch)
        self.epoch, self.sequence = epoch, 0
        self._empty_buffers()


_PER_ROW = (list, tuple, np.ndarray)  # a run's column given value by value (else one value for the run)
_OBJECT = np.dtype(object)


def _runs_table(runs: list[tuple[int, tuple]], schema: pa.Schema) -> pa.Table:
    """The rows of ``runs`` (see ``TableWriter.extend_run``) as one table: a column every run
    gives one value for is those values repeated, any other the runs' values joined (one
    value repeated where a run gave one), all through numpy object arrays, which Arrow
    converts several times faster than lists (the engine's runs give object arrays, joined
    as they are)."""
    counts, given_by_run = zip(*runs)
    run_of_row = None
    arrays = []
    for field, given in zip(schema, zip(*given_by_run, strict=True), strict=True):  # a column of every run
        kinds = set(map(type, given))
        if not any(issubclass(kind, _PER_ROW) for kind in kinds):
            if run_of_row is None:
                run_of_row = pa.array(np.repeat(np.arange(len(runs)), counts))
            arrays.append(pa.array(given, type=field.type).take(run_of_row))
            continue
        if kinds == {np.ndarray} and {values.dtype for values in given} == {_OBJECT}:
            arrays.append(pa.array(np.concatenate(given), type=field.type))
            continue
        parts = [np.asarray(values, object) if isinstance(values, _PER_ROW) else np.full(count, values, object)
                 for values, count in zip(given, counts)]
        arrays.append(pa.array(np.concatenate(parts), type=field.type))
    return pa.table(arrays, schema=schema)


def discard_parts(run_dir: RunDir | Collected, host: int, epoch: int) -> None:
    """Delete the parts ``host`` wrote in ``epoch`` and later ones (and a dead host's temporary files)."""
    if isinstance(run_dir, Collected):
        return  # nothing written yet: the driver deletes what a restore discards
    for table in STREAMED:
        for name in run_dir.names(table, f"*part-*-{host:04d}-*.parquet*"):
            if int(name.split("-")[1]) >= epoch:
                run_dir.delete(f"{table}/{name}")


def write_manifest(run_dir: str | Path | RunDir, manifest: dict) -> None:
    (run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)).write_json("manifest.json", manifest)


def read_table(run_dir, table: str, columns: list[str] | None = None) -> pa.Table:
    """All parts of one table of a run (an empty table with the schema when there are none),
    or only ``columns`` of it (those of them the run wrote)."""
    run_dir = as_run_dir(run_dir)
    parts = run_dir.names(table, "part-*.parquet")
    if not parts:
        return _empty(table, columns)
    return pa.concat_tables([run_dir.read_parquet(f"{table}/{p}", columns) for p in parts], promote_options="default")


def read_table_in_batches(run_dir, table: str, columns: list[str], rows: int = 4_000_000, filters=None):
    """``read_table``'s rows in its order, as consecutive tables of about ``rows`` rows each
    (whole part files; one empty table with the schema when there are none), for a reader that
    need not hold a large run's table at once; only the rows that pass ``filters``
    (``RunDir.read_parquet``'s)."""
    run_dir = as_run_dir(run_dir)
    parts = run_dir.names(table, "part-*.parquet")
    if not parts:
        yield _empty(table, columns)
        return
    batch, held = [], 0
    for part in parts:
        batch.append(run_dir.read_parquet(f"{table}/{part}", columns, filters))
        held += batch[-1].num_rows
        if held >= rows:
            yield pa.concat_tables(batch, promote_options="default")
            batch, held = [], 0
    if batch:
        yield pa.concat_tables(batch, promote_options="default")


def _empty(table: str, columns: list[str] | None) -> pa.Table:
    empty = SCHEMAS[table].empty_table()
    return empty if columns is None else empty.select([c for c in columns if c in empty.column_names])
