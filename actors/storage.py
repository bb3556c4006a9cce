"""Run directories on any storage pyarrow's filesystems open: a local path, or a URI such as
``file:///data/runs/x``, ``s3://bucket/runs/x``, ``gs://bucket/runs/x`` or
``hdfs://namenode/runs/x``. Hosts on other nodes open the same location and write their own
parts; every file is written under a temporary name and moved into place, so a reader never
sees half of one (on object stores a put is whole anyway)."""
from __future__ import annotations

import copyreg
import fnmatch
import io
import json
import os
import pickle
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


# Columns of a few distinct values, each written with a dictionary; the others (ids, times, counts)
# plain. A dictionary over a column of mostly distinct ids doubles the cost of writing a messages
# table and makes its file larger (bench/LOG.md, session 72).
FEW_VALUES = frozenset({"broker", "sender", "kind", "cause", "triggered_by", "role"})


def is_uri(location) -> bool:
    return "://" in str(location)


def write_parquet_to(table: pa.Table, where) -> None:
    """``table`` as a Parquet file into ``where`` (a path or a stream)."""
    pq.write_table(table, where, use_dictionary=[name for name in table.column_names if name in FEW_VALUES])


def _array_from_buffer(typecode: str, data) -> array:
    values = array(typecode)
    values.frombytes(data)
    return values


def _array_as_buffer(values: array):
    """An ``array.array`` pickled from its own memory: its default pickling copies its bytes, and
    the pickler's memo keeps every such copy until the dump ends (a checkpoint of the index's
    column arrays held them all twice)."""
    return _array_from_buffer, (values.typecode, pickle.PickleBuffer(values))


def dump_state(value, stream) -> None:
    """Pickle a host's state (or any value) into ``stream``, arrays without copies."""
    pickler = pickle.Pickler(stream, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, array: _array_as_buffer}
    pickler.dump(value)


class RunDir:
    """One run directory; ``location`` is a URI as the user gave it, or an absolute path."""

    def __init__(self, location: str | Path) -> None:
        self.location = str(location) if is_uri(location) else os.path.abspath(location)  # the same on every host
        if is_uri(self.location):
            try:
                self.fs, root = pafs.FileSystem.from_uri(self.location)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
                raise ValueError(f"{self.location}: not a location pyarrow can open ({exc})") from None
        else:
            self.fs, root = pafs.LocalFileSystem(), os.path.abspath(self.location)
        self.root = root.rstrip("/")

    def __reduce__(self):  # hosts reopen the location (and its credentials) where they run
        return RunDir, (self.location,)

    def __str__(self) -> str:
        return self.location

    @property
    def name(self) -> str:
        return self.root.rsplit("/", 1)[-1]

    def path(self, relative: str = "") -> str:
        return f"{self.root}/{relative}" if relative else self.root

    def spark_path(self, relative: str = "") -> str:
        """The location as Spark's Hadoop filesystems name it (``s3a://`` for S3)."""
        location = self.location.rstrip("/") + (f"/{relative}" if relative else "")
        return "s3a://" + location[len("s3://"):] if location.startswith("s3://") else location

    # ------------------------------------------------------------------ questions

    def _info(self, relative: str = ""):
        return self.fs.get_file_info(self.path(relative))

    def exists(self, relative: str = "") -> bool:
        return self._info(relative).type != pafs.FileType.NotFound

    def is_dir(self, relative: str = "") -> bool:
        return self._info(relative).type == pafs.FileType.Directory

    def is_file(self, relative: str = "") -> bool:
        return self._info(relative).type == pafs.FileType.File

    def names(self, folder: str = "", pattern: str = "*") -> list[str]:
        """Sorted names of the entries directly in ``folder`` matching ``pattern`` (none when
        the folder does not exist)."""
        selector = pafs.FileSelector(self.path(folder), allow_not_found=True)
        return sorted(i.base_name for i in self.fs.get_file_info(selector) if fnmatch.fnmatch(i.base_name, pattern))

    # ------------------------------------------------------------------ changes

    def make(self, folder: str = "") -> None:
        self.fs.create_dir(self.path(folder), recursive=True)

    def delete(self, relative: str) -> None:
        if self.is_dir(relative):
            self.fs.delete_dir(self.path(relative))
        elif self.exists(relative):
            self.fs.delete_file(self.path(relative))

    def _commit(self, relative: str, write) -> None:
        """``write(stream)`` into a temporary file beside ``relative``, then move it into place."""
        folder, _, name = relative.rpartition("/")
        if folder:
            self.make(folder)
        tmp = f"{folder}/.{name}.tmp" if folder else f".{name}.tmp"
        with self.fs.open_output_stream(self.path(tmp)) as stream:
            write(stream)
        self.fs.move(self.path(tmp), self.path(relative))

    def write_bytes(self, relative: str, data: bytes) -> None:
        self._commit(relative, lambda stream: stream.write(data))

    def write_parquet(self, relative: str, table: pa.Table) -> None:
        self._commit(relative, lambda stream: write_parquet_to(table, stream))

    def write_pickle(self, relative: str, value) -> None:
        self._commit(relative, lambda stream: dump_state(value, stream))

    def write_json(self, relative: str, data) -> None:
        self.write_bytes(relative, json.dumps(data, indent=2, sort_keys=True, default=str).encode())

    def read_bytes(self, relative: str) -> bytes:
        with self.fs.open_input_stream(self.path(relative)) as stream:
            return stream.read()

    def read_pickle(self, relative: str):
        with self.fs.open_input_file(self.path(relative)) as stream:
            return pickle.load(stream)

    def read_json(self, relative: str):
        return json.loads(self.read_bytes(relative))

    def read_schema(self, relative: str) -> pa.Schema:
        return pq.read_schema(self.path(relative), filesystem=self.fs)

    def read_parquet(self, relative: str, columns: list[str] | None = None, filters=None) -> pa.Table:
        """The file's table, or those of ``columns`` it holds; only its rows that pass
        ``filters`` (``pyarrow.parquet.read_table``'s: row groups whose statistics rule them out
        are not read)."""
        if columns is not None:
            held = self.read_schema(relative).names
            columns = [c for c in columns if c in held]
        return pq.read_table(self.path(relative), filesystem=self.fs, columns=columns, filters=filters)


class Collected:
    """Where a host's files go when the nodes share no storage (``output.collect: driver``): held
    in memory until the driver takes them (``take``) and writes them into the run directory."""

    def __init__(self) -> None:
        self.files: list[tuple[str, bytes]] = []

    def write_parquet(self, relative: str, table: pa.Table) -> None:
        buffer = pa.BufferOutputStream()
        write_parquet_to(table, buffer)
        self.files.append((relative, buffer.getvalue().to_pybytes()))

    def write_pickle(self, relative: str, value) -> None:
        stream = io.BytesIO()
        dump_state(value, stream)
        self.files.append((relative, stream.getvalue()))

    def names(self, folder: str = "", pattern: str = "*") -> list[str]:
        return []  # the driver deletes what a restore discards

    def take(self) -> list[tuple[str, bytes]]:
        files, self.files = self.files, []
        return files
