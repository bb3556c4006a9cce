"""Emulator recovery: checkpoints, hosts lost mid-run (Ray's kill and the OS's), a driver killed
and resumed; every recovered run's tables equal those of an uninterrupted run."""
import itertools
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest

import topologies
from actors import coordinator, transports
from actors.coordinator import host_specs
from actors.engine import Injected
from actors.host import BrokerHost
from actors.partition import partition
from actors.results import STREAMED, read_table
from experiments.cli import main
from experiments.build import resolve
from protocols.language import attributes_of

from .conftest import PROJECT_ROOT

GRAPH = topologies.random_tree(6, 1)
EDGES = sorted(tuple(sorted(e)) for e in GRAPH.edges)
HUB = max(sorted(GRAPH), key=GRAPH.degree)


def scenario(**runtime) -> dict:
    """Six brokers under congestion (mailboxes of 5) and a fault of every kind: a checkpoint
    holds queues, crashed brokers, down links and delayed messages."""
    return {
        "name": "recovery", "seed": 2, "duration": "10s",
        "topology": {"generator": {"name": "random_tree", "n": 6, "seed": 1}, "link": {"latency": "50ms"}},
        "workload": {"generator": {"name": "random_mix", "operations": 400, "spacing": 0.02}},
        "protocol": {"covering": "active"},
        "runtime": {"hosts": 0, "costs": "padres", "mailbox": {"capacity": 5}, **runtime},
        "faults": [
            {"t": "2s", "kind": "crash", "broker": HUB, "restart_after": "3s"},
            {"t": "3s", "kind": "link_down", "a": EDGES[1][0], "b": EDGES[1][1], "until": "6s"},
            {"t": "0s", "kind": "loss", "a": EDGES[3][0], "b": EDGES[3][1], "probability": 0.3, "until": "7s"},
            {"t": "0s", "kind": "delay", "a": EDGES[4][0], "b": EDGES[4][1], "extra": "20ms", "jitter": "30ms",
             "until": "8s"},
            {"t": "1s", "kind": "slow", "broker": EDGES[0][0], "factor": 10, "until": "5s"},
        ],
    }


def tables(run_dir) -> dict[str, list]:
    return {table: sorted(read_table(run_dir, table).to_pylist(), key=lambda r: json.dumps(r, default=str))
            for table in STREAMED}


def manifest_of(run_dir) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The tables of the scenario run in this process without checkpoints."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    path = folder / "scenario.json"
    path.write_text(json.dumps(scenario()))
    coordinator.run(resolve(path), folder / "run", progress=False)
    found = tables(folder / "run")
    assert sum(m["dropped"] for m in found["messages"]) > 20 and len(found["deliveries"]) > 500
    return found


def test_a_checkpointed_run_equals_an_uninterrupted_one_and_keeps_no_checkpoints(write_scenario, tmp_path,
                                                                               uninterrupted):
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(scenario(checkpoint_every="1s"))), "--out", str(out)]) == 0
    assert tables(out) == uninterrupted
    assert manifest_of(out)["checkpoints"] == 9  # at 1 s, 2 s, ... 9 s: none at the end
    assert not (out / "checkpoints").exists()
    epochs = {int(p.name.split("-")[1]) for p in (out / "messages").glob("part-*.parquet")}
    assert len(epochs) >= 8  # results committed per checkpoint epoch (the last seconds are idle)


def test_a_checkpoint_holds_the_operations_to_come_as_their_numbers(write_scenario, tmp_path):
    """At 4 s (the hub crashed at 2 s and restarts at 5 s) the engine's state pickles without
    the client operations still to come, only their sequence numbers, and with the seven that
    arrived at the crashed hub and wait for its restart; the host's injections make the others
    again, key for key, and a workload that lacks one is refused."""
    spec = resolve(write_scenario(scenario()))
    (tmp_path / "run").mkdir()
    host_spec = host_specs(spec, tmp_path / "run", 1, partition(spec.graph, 1))[0]
    engine = BrokerHost(host_spec).engine
    engine.run_until(4_000_000)
    to_come = sorted(entry[-1].origin for entry in engine.heap if type(entry[-1]) is Injected)
    keys = sorted(entry[:-1] for entry in engine.heap)
    assert len(to_come) > 100 and len(keys) > len(to_come)  # completions and faults' transitions besides
    held = {name: [a.key for a in server.held] for name, server in engine.servers.items()}
    assert sum(type(a) is Injected for server in engine.servers.values() for a in server.held) == 7

    restored = pickle.loads(pickle.dumps(engine))
    assert not any(type(entry[-1]) is Injected for entry in restored.heap)
    assert {name: [a.key for a in server.held] for name, server in restored.servers.items()} == held
    assert list(restored.to_come) == to_come
    restored.reinject(host_spec.injections)
    assert sorted(entry[:-1] for entry in restored.heap) == keys

    older = pickle.loads(pickle.dumps(engine))  # a checkpoint written when events were (key, item) pairs
    older.__setstate__(attributes_of(older) | {"heap": [(entry[:-1], entry[-1]) for entry in older.heap]})
    older.reinject(host_spec.injections)
    assert sorted((entry[:-1], type(entry[-1]).__name__) for entry in older.heap) == sorted(
        (entry[:-1], type(entry[-1]).__name__) for entry in restored.heap)

    again = pickle.loads(pickle.dumps(engine))
    with pytest.raises(ValueError, match=f"operation {to_come[-1]}"):
        again.reinject([i for i in host_spec.injections if i.seq != to_come[-1]])


def kill_host_on_chunk(monkeypatch, chunks: set[int], how: str, host: int = 1) -> list[int]:
    """Kill host ``host`` just before the chunks numbered ``chunks`` (counting from 1) start;
    returns the list the chunks it killed on are appended to."""
    import ray

    killed, calls = [], itertools.count(1)
    run_chunk = transports.RayTransport.run_chunk

    def killing_run_chunk(transport, statuses, stop, lookahead):
        number = next(calls)
        if number in chunks:
            actor = transport.actors[host]
            if how == "ray.kill":
                ray.kill(actor)
            else:  # the worker process dies as if the OS killed it (out of memory, a lost node)
                os.kill(ray.get(actor.__ray_call__.remote(lambda host: os.getpid())), signal.SIGKILL)
            killed.append(number)
        return run_chunk(transport, statuses, stop, lookahead)

    monkeypatch.setattr(transports.RayTransport, "run_chunk", killing_run_chunk)
    return killed


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("how, checkpoint_every, restored_t_us", [
    ("ray.kill", "2s", 4_000_000), ("SIGKILL", "2s", 4_000_000), ("ray.kill", None, 0)])
def test_a_lost_host_is_restored_from_the_latest_checkpoint(write_scenario, tmp_path, monkeypatch, ray_session,
                                                            uninterrupted, how, checkpoint_every, restored_t_us):
    killed = kill_host_on_chunk(monkeypatch, {5}, how)  # the chunk from 4 s to 5 s
    out = tmp_path / "run"
    path = write_scenario(scenario(hosts=2, checkpoint_every=checkpoint_every))
    assert main(["run", str(path), "--out", str(out)]) == 0
    assert killed == [5]
    manifest = manifest_of(out)
    assert manifest["status"] == "complete"
    assert [(r["host"], r["restored_t_us"]) for r in manifest["recoveries"]] == [(1, restored_t_us)]
    assert tables(out) == uninterrupted
    assert not (out / "checkpoints").exists()


@pytest.mark.ray
def test_a_run_fails_once_it_lost_hosts_more_often_than_allowed(write_scenario, tmp_path, monkeypatch, ray_session):
    kill_host_on_chunk(monkeypatch, {2, 3}, "ray.kill", host=0)
    out = tmp_path / "run"
    path = write_scenario(scenario(hosts=2, checkpoint_every="1s", max_recoveries=1))
    assert main(["run", str(path), "--out", str(out)]) == 1
    manifest = manifest_of(out)
    assert manifest["status"] == "failed" and "runtime.max_recoveries" in manifest["error"]
    assert len(manifest["recoveries"]) == 1
    assert (out / "checkpoints" / "run.pkl").exists()  # failed: it can still be resumed


DRIVER = """
import os, signal, sys
from actors import checkpoints, coordinator
from experiments.build import resolve

take = checkpoints.Checkpoints.take

def take_then_die(self, *args):
    taken = take(self, *args)
    if taken.epoch == 3:  # the driver dies after its third checkpoint, at 6 s
        os.kill(os.getpid(), signal.SIGKILL)
    return taken

checkpoints.Checkpoints.take = take_then_die
coordinator.run(resolve(sys.argv[1], sys.argv[3:]), sys.argv[2], progress=False)  # then overrides
"""


def test_a_killed_driver_resumes_from_its_latest_checkpoint(write_scenario, tmp_path, uninterrupted, capsys):
    out = tmp_path / "run"
    path = write_scenario(scenario(checkpoint_every="2s"))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    died = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(path), str(out)], env=env,
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert manifest_of(out)["status"] == "running"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch-00003", "run.pkl"]
    assert main(["run", "--resume", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    manifest = manifest_of(out)
    assert manifest["status"] == "complete" and manifest["resumed"] == 1 and manifest["checkpoints"] == 4
    assert tables(out) == uninterrupted
    assert not (out / "checkpoints").exists()


def sweep_point_killed_after_its_third_checkpoint(write_scenario, tmp_path):
    """A one-point sweep whose run's driver died after its checkpoint at 6 s, as a stopped sweep
    leaves it: (scenario path, sweep directory, the point)."""
    from experiments.sweep import _record, parse_grid, points

    path = write_scenario(scenario(checkpoint_every="2s"))
    out = tmp_path / "sweep"
    (point,) = points(path, parse_grid(["protocol.covering=active"]), 1, "recovery", 2, [])
    _record([point], out)  # as the sweep started
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    died = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(path), str(out / point.name),
                           *point.overrides], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert died.returncode == -signal.SIGKILL, died.stderr
    return path, out, point


@pytest.mark.ray
def test_a_sweep_run_again_resumes_a_point_stopped_mid_run(write_scenario, tmp_path, ray_session, uninterrupted,
                                                          capsys):
    """A sweep (a figure's runs too) stopped while a point ran: the same sweep again continues
    that point from its latest checkpoint, and its tables are an uninterrupted run's."""
    path, out, point = sweep_point_killed_after_its_third_checkpoint(write_scenario, tmp_path)
    assert main(["sweep", str(path), "--grid", "protocol.covering=active", "--out", str(out)]) == 0
    assert f"sweep: {point.name}: resumed from its checkpoint at 6 s simulated" in capsys.readouterr().err
    manifest = manifest_of(out / point.name)
    assert manifest["resumed"] == 1 and manifest["name"] == "recovery-covering-active"
    assert tables(out / point.name) == uninterrupted
    (recorded,) = json.loads((out / "sweep.json").read_text())["points"]
    assert recorded["status"] == "complete" and recorded["resumed"] and recorded["wall_s"] == manifest["wall_s"]


@pytest.mark.ray
def test_a_sweep_point_whose_resume_failed_starts_over_the_next_time(write_scenario, tmp_path, ray_session,
                                                                      uninterrupted):
    path, out, point = sweep_point_killed_after_its_third_checkpoint(write_scenario, tmp_path)
    (out / point.name / "checkpoints" / "epoch-00003" / "host-0000.pkl").write_bytes(b"damaged")
    command = ["sweep", str(path), "--grid", "protocol.covering=active", "--out", str(out)]
    assert main(command) == 1
    (recorded,) = json.loads((out / "sweep.json").read_text())["points"]
    assert recorded["status"] == "failed" and recorded["resumed"]
    assert main(command) == 0  # started over
    (recorded,) = json.loads((out / "sweep.json").read_text())["points"]
    assert recorded["status"] == "complete" and "resumed" not in recorded
    assert "resumed" not in manifest_of(out / point.name) and tables(out / point.name) == uninterrupted


def test_resume_refuses_what_it_cannot_continue(write_scenario, tmp_path, capsys):
    path = write_scenario({**scenario(), "duration": "1s"})
    complete = tmp_path / "complete"
    assert main(["run", str(path), "--out", str(complete)]) == 0
    failed = tmp_path / "failed"
    (failed / "deliveries").mkdir(parents=True)
    (failed / "manifest.json").write_text(json.dumps({"name": "x", "status": "failed"}))
    cases = [
        (["run", "--resume", str(complete)], "the run is complete"),
        (["run", "--resume", str(tmp_path / "missing")], "not a run directory"),
        (["run", "--resume", str(failed)], "kept no checkpoints (set runtime.checkpoint_every"),
        (["run", str(path), "--resume", str(failed)], "give no scenario, --out or --set"),
        (["run"], "name a scenario file, or --resume RUN_DIR"),
        (["run", str(path), "--set", "runtime.checkpoint_every=0"], "runtime.checkpoint_every: a duration must be positive"),
        (["run", str(path), "--set", "runtime.max_recoveries=-1"], "runtime.max_recoveries: expected a non-negative"),
    ]
    capsys.readouterr()
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert manifest_of(failed) == {"name": "x", "status": "failed"}  # nothing touched
