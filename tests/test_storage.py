"""Run directories on cluster storage: URIs that pyarrow's filesystems open (a local file:// URI
here), and hosts that write nothing themselves (output.collect: driver)."""
import io
import json
import pickle
import tracemalloc
from array import array

import numpy as np
import pyarrow.parquet as pq
import pytest

from actors import coordinator
from actors.results import SCHEMAS, TableWriter, read_table
from actors.storage import Collected, RunDir, dump_state
from experiments.cli import main

from .test_recovery import kill_host_on_chunk, scenario, tables, uninterrupted  # noqa: F401 (a fixture)


def test_a_run_directory_given_as_a_uri_is_written_and_read_through_it(write_scenario, tmp_path, capsys,
                                                                      uninterrupted):
    uri = f"file://{tmp_path}/on-storage/run"
    assert main(["run", str(write_scenario(scenario())), "--out", uri]) == 0
    assert capsys.readouterr().out.strip() == uri
    assert tables(uri) == uninterrupted
    assert RunDir(uri).read_json("manifest.json")["status"] == "complete"
    assert (tmp_path / "on-storage" / "run" / "deliveries").is_dir()
    assert main(["run", str(write_scenario(scenario())), "--out", uri]) == 2  # not empty: refused
    assert "already exists and is not an empty directory" in capsys.readouterr().err


def test_output_dir_may_be_a_uri(write_scenario, tmp_path, capsys):
    path = write_scenario({**scenario(), "duration": "1s"})
    assert main(["run", str(path), "--set", f"output.dir=file://{tmp_path}/runs"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"file://{tmp_path}/runs/recovery-")
    assert read_table(printed, "messages").num_rows > 0


def test_locations_pyarrow_cannot_open_are_input_errors(write_scenario, capsys):
    path = write_scenario({**scenario(), "duration": "1s"})
    assert main(["run", str(path), "--out", "nosuch://bucket/run"]) == 2
    assert "--out nosuch://bucket/run: nosuch://bucket/run: not a location pyarrow can open" in capsys.readouterr().err
    assert main(["run", str(path), "--set", "output.collect=nodes"]) == 2
    assert "output.collect: expected 'hosts'" in capsys.readouterr().err


def test_collected_files_stay_in_memory_until_taken():
    collected = Collected()
    writer = TableWriter(collected, host=3, flush_rows=2)
    writer.append("events", 5, "B1", "x", "{}")
    writer.append("events", 6, "B1", "y", "{}")  # a full buffer: one part
    assert [path for path, _ in collected.files] == ["events/part-00000-0003-000000.parquet"]
    writer.discard_after(0)  # nothing of the run directory to delete here: the driver does
    assert [path for path, _ in collected.take()] == ["events/part-00000-0003-000000.parquet"]
    assert collected.take() == []


def test_a_state_with_arrays_comes_back_equal_and_sharing_what_it_shared(tmp_path):
    shared = array("q", [3, -1, 2**40])
    state = {"a": shared, "again": shared, "empty": array("d"), "bytes": array("B", b"\x00\xff"),
             "floats": array("d", [0.5, -2.25]), "nested": [(array("i", range(5)), "x")]}
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_pickle("checkpoints/host.pkl", state)
    loaded = run_dir.read_pickle("checkpoints/host.pkl")
    assert loaded == state and loaded["a"] is loaded["again"]
    assert [type(v) for v in loaded.values()][:5] == [array] * 5
    collected = Collected()
    collected.write_pickle("host.pkl", state)
    assert pickle.loads(collected.take()[0][1]) == state


def test_pickling_a_state_copies_none_of_its_arrays():
    """The default pickling of an array copies its bytes, and the pickler holds the copy to the
    dump's end: every checkpoint held its state's arrays twice (54 of the 122 MB a dump of the
    reduced mobile run's state held, bench/LOG.md)."""
    big = array("q", range(2_000_000))  # 16 MB

    class Discard(io.RawIOBase):
        def write(self, data):
            return memoryview(data).nbytes

    tracemalloc.start()
    try:
        dump_state({"column": big}, Discard())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(big) * big.itemsize / 10


def test_rows_given_one_by_one_and_as_runs_share_a_part(tmp_path):
    writer = TableWriter(RunDir(tmp_path), host=0, flush_rows=6)
    writer.append("deliveries", "M1", "S1", "c1", "B1", 10, 20, 1)
    writer.extend_run("deliveries", 2, ("M2", ("S1", "S2"), np.array(["c1", None], object), "B2", 30, 40, 2))
    assert list(tmp_path.glob("deliveries/*.parquet")) == []  # 3 rows buffered
    # a column given per row in one run and once in another
    writer.extend_run("deliveries", 3, ("M3", np.array(["S3", "S4", "S5"], object), "c3", "B3", 50, [60, 61, 62], 3))
    writer.append("deliveries", "M4", "S6", "c6", "B4", 70, 80, 4)
    writer.flush()
    writer.extend_run("deliveries", 0, ("M9", [], [], "B9", 90, 90, 9))  # no rows: no part
    writer.flush()
    rows = read_table(tmp_path, "deliveries").to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        ("M1", "S1", "c1", "B1", 10, 20, 1), ("M2", "S1", "c1", "B2", 30, 40, 2), ("M2", "S2", None, "B2", 30, 40, 2),
        ("M3", "S3", "c3", "B3", 50, 60, 3), ("M3", "S4", "c3", "B3", 50, 61, 3), ("M3", "S5", "c3", "B3", 50, 62, 3),
        ("M4", "S6", "c6", "B4", 70, 80, 4)]
    assert len(list(tmp_path.glob("deliveries/*.parquet"))) == 2
    assert read_table(tmp_path, "deliveries").schema == SCHEMAS["deliveries"]


def test_runs_whose_columns_are_arrays_in_every_run_are_joined_in_their_order(tmp_path):
    """The engine's runs: a publication's deliveries at a broker, their ids and clients as arrays."""
    writer = TableWriter(RunDir(tmp_path), host=0, flush_rows=100)
    writer.extend_run("deliveries", 2, ("M1", np.array(["S1", "S2"], object), np.array(["c1", None], object),
                                        "B1", 10, 20, 1))
    writer.extend_run("deliveries", 1, ("M2", np.array(["S3"], object), np.array(["c3"], object), "B2", 30, 40, 2))
    writer.flush()
    assert [tuple(r.values()) for r in read_table(tmp_path, "deliveries").to_pylist()] == [
        ("M1", "S1", "c1", "B1", 10, 20, 1), ("M1", "S2", None, "B1", 10, 20, 1), ("M2", "S3", "c3", "B2", 30, 40, 2)]


def test_only_columns_of_few_values_are_written_with_a_dictionary(tmp_path):
    """Broker names and kinds repeat; ids and times do not, and a dictionary over them costs twice
    the writing of a messages table for a larger file."""
    writer = TableWriter(RunDir(tmp_path), host=0)
    for i in range(300):
        writer.append("messages", f"B{i % 3}", None, "pub", f"M{i}", i, i, i + 1, 0, 1, False, None, None, None, None)
    writer.flush()
    [part] = tmp_path.glob("messages/*.parquet")
    row_group = pq.ParquetFile(part).metadata.row_group(0)
    dictionary = {row_group.column(i).path_in_schema: row_group.column(i).has_dictionary_page
                  for i in range(row_group.num_columns)}
    assert dictionary["broker"] and dictionary["kind"]
    assert not dictionary["msg_id"] and not dictionary["t_arrive_us"]
    assert read_table(tmp_path, "messages").column("broker").to_pylist()[:4] == ["B0", "B1", "B2", "B0"]


@pytest.mark.ray
@pytest.mark.slow
def test_hosts_that_share_no_storage_send_their_files_to_the_driver(write_scenario, tmp_path, monkeypatch,
                                                                     ray_session, uninterrupted):
    """Hosts get no run directory at all, so every part and checkpoint went through the driver;
    a lost host is restored from a checkpoint the driver read back."""
    original, given = coordinator.host_specs, []
    monkeypatch.setattr(coordinator, "host_specs",
                        lambda spec, run_dir, *rest: given.append(run_dir) or original(spec, run_dir, *rest))
    killed = kill_host_on_chunk(monkeypatch, {5}, "ray.kill")
    out = tmp_path / "run"
    path = write_scenario({**scenario(hosts=2, checkpoint_every="2s"), "output": {"collect": "driver"}})
    assert main(["run", str(path), "--out", str(out)]) == 0
    assert given == [None] and killed == [5]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(r["host"], r["restored_t_us"]) for r in manifest["recoveries"]] == [(1, 4_000_000)]
    assert tables(out) == uninterrupted
    assert {p.name.split("-")[2] for p in (out / "messages").glob("part-*")} == {"0000", "0001"}
    assert not (out / "checkpoints").exists()
