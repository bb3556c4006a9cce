"""The runtime end to end: exact deliveries, determinism across hosting, accounting, snapshots."""
import gc
import json
import os
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow.compute as pc
import pytest

from actors.checkpoints import Checkpoint, Checkpoints
from actors.coordinator import cross_host_lookahead, host_specs, run
from actors.transports import LocalTransport
from actors.costs import load_profile
from actors.host import FULL_COLLECTION_EVERY, BrokerHost
from actors.partition import boundary_distances, partition
from actors.results import read_table
from experiments.cli import main
from experiments.build import resolve
from workloads.generators import random_mix

from .oracle import expected_deliveries


def small_scenario(**changes) -> dict:
    scenario = {
        "name": "small",
        "seed": 3,
        "topology": {"generator": {"name": "random_tree", "n": 9, "seed": 2}, "link": {"latency": "1ms"}},
        "workload": {"generator": {"name": "random_mix", "publishers": 3, "subscribers": 8, "operations": 250,
                                   "spacing": 0.05}},
        "runtime": {"hosts": 0, "costs": "zero", "sample_interval": "1s"},
    }
    for dotted, value in changes.items():
        node = scenario
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return scenario


def _local_hosts(specs) -> LocalTransport:
    transport = LocalTransport()
    transport.start(specs)
    return transport


def sorted_rows(run_dir, table):
    rows = read_table(run_dir, table).to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


PROTOCOLS = {
    "none": {"covering": "none"},
    "active": {"covering": "active"},
    "selective": {"covering": "active", "pruning": {"variant": "selective", "min_count": 0}},
    # congestion thresholds low enough that unsubscriptions wait for the ticks
    "incremental": {"covering": "packing", "pruning": {"variant": "incremental", "congested_queue": 1,
                                                       "congestion_trigger": 1}},
}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_cli_run_delivers_exactly_what_the_oracle_expects(write_scenario, tmp_path, capsys, protocol):
    path = write_scenario(small_scenario(protocol=PROTOCOLS[protocol]))
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["hosts"] == 0 and manifest["brokers"] == 9
    deliveries = read_table(out, "deliveries").to_pylist()
    pairs = [(d["pub_id"], d["sub_id"]) for d in deliveries]
    assert len(pairs) == len(set(pairs))
    records = random_mix([f"B{i}" for i in range(9)], seed=3, publishers=3, subscribers=8, operations=250,
                         spacing=0.05)
    assert set(pairs) == expected_deliveries(records) and len(pairs) > 50
    assert all(d["t_deliver_us"] >= d["t_pub_us"] + 1000 * d["hops"] for d in deliveries)
    kinds = {"advertise": ["adv"], "unadvertise": ["unadv"], "subscribe": ["sub"], "unsubscribe": ["unsub"],
             "publish": ["pub"], "move": ["detach", "attach"]}  # a move detaches the client, then attaches it
    times: dict[str, list[float]] = {}
    for record in records:
        for kind in kinds[record["op"]]:
            times.setdefault(kind, []).append(record["t"])
    assert {"sub", "unsub", "pub", "detach"} <= set(times)
    assert manifest["injected"] == {kind: {"count": len(t), "first_s": pytest.approx(min(t)),
                                           "last_s": pytest.approx(max(t))} for kind, t in sorted(times.items())}


def test_accounting_balances_with_drops_under_a_burst(write_scenario, tmp_path):
    burst = [{"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"},
             {"t": 0.01, "op": "subscribe", "client": "S", "broker": "B2", "id": "S1", "filter": "[x,>,0]"}]
    burst += [{"t": 0.1, "op": "publish", "client": "P", "id": f"M{i}", "content": f"[x,{i + 1}]"} for i in range(40)]
    trace = "\n".join(json.dumps(r) for r in burst)
    for overflow in ("drop", "block"):
        scenario = small_scenario(topology={"generator": {"name": "line", "n": 3}}, workload={"trace": "ops.jsonl"},
                                  duration="0.15s")
        scenario["runtime"] = {"hosts": 0, "costs": {"base": {"default": 1500}},  # 1.5 ms a message
                               "mailbox": {"capacity": 5, "overflow": overflow}}
        out = tmp_path / overflow
        assert main(["run", str(write_scenario(scenario, {"ops.jsonl": trace})), "--out", str(out)]) == 0
        messages = read_table(out, "messages").to_pandas()
        dropped = messages[messages.dropped]
        queued = messages[~messages.dropped & messages.t_start_us.isna()]
        processed = messages[messages.t_start_us.notna()]
        assert len(messages) == len(dropped) + len(queued) + len(processed)
        if overflow == "drop":
            assert len(dropped) > 0 and (dropped.queue_len >= 5).all()
        else:
            assert len(dropped) == 0 and len(queued) > 5  # waiting on the link beyond the capacity
        last = read_table(out, "samples").to_pandas().query("t_us == 150000")
        assert last.queue_len.sum() == len(queued)
        busy = processed.assign(end=processed.t_end_us.clip(upper=150000))
        spent = (busy.end - busy.t_start_us).groupby(busy.broker).sum()
        sampled = read_table(out, "samples").to_pandas().groupby("broker").busy_us.sum()
        assert spent.to_dict() == sampled[spent.index].to_dict()


def test_a_run_in_one_process_leaves_no_encoding_on_the_callers_workload(write_scenario, tmp_path):
    """Routing tables keep a publication's encoding on it (protocols/index.py): the
    publications the caller's workload holds for the whole run must not carry it, or every
    publication ever published would keep its encoding, three times its own size."""
    spec = resolve(write_scenario(small_scenario()))
    manifest = run(spec, tmp_path / "run", progress=False)
    publications = [i.message.publication for i in spec.injections if i.message.kind == "pub"]
    assert manifest["status"] == "complete" and len(publications) > 50
    assert read_table(tmp_path / "run", "deliveries").num_rows > 0
    assert all(p.encoded is None for p in publications)


def test_samples_every_interval_and_at_the_end(write_scenario, tmp_path):
    out = tmp_path / "run"
    path = write_scenario(small_scenario(duration="3.5s", runtime__sample_interval="1s"))
    assert main(["run", str(path), "--out", str(out)]) == 0
    times = sorted(set(read_table(out, "samples").column("t_us").to_pylist()))
    assert times == [1_000_000, 2_000_000, 3_000_000, 3_500_000]


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["none", "incremental"])
def test_identical_results_across_host_counts(write_scenario, tmp_path, ray_session, protocol):
    scenario = small_scenario(runtime={"costs": "padres", "mailbox": {"capacity": 50}, "sample_interval": "2s"},
                              topology={"generator": {"name": "random_tree", "n": 7, "seed": 5},
                                        "link": {"latency": "2ms"}}, protocol=PROTOCOLS[protocol])
    scenario["workload"]["generator"].update(operations=300, spacing=0.002)  # busy: queues build up
    path = write_scenario(scenario)
    results = {}
    for hosts in (0, 1, 2, "all"):
        out = tmp_path / f"hosts-{hosts}"
        assert main(["run", str(path), "--out", str(out), "--set", f"runtime.hosts={hosts}"]) == 0
        results[hosts] = {t: sorted_rows(out, t) for t in ("deliveries", "messages", "samples", "events")}
    assert max(r["queue_len"] for r in results[0]["messages"]) > 3
    if protocol == "incremental":  # unsubscriptions waited, and the run went on to the tick that sent them
        assert any(e["kind"] == "unsubscription_deferred" for e in results[0]["events"])
        assert max(r["t_arrive_us"] for r in results[0]["messages"] if r["kind"] == "unsub") >= 2_000_000
    for hosts in (1, 2, "all"):
        for table in results[0]:
            assert results[hosts][table] == results[0][table], f"{table} differs with hosts={hosts}"
    if protocol == "none":  # a run cut while messages are on links between hosts: the same in_flight
        cut = {}
        for hosts in (0, 2, "all"):
            out = tmp_path / f"cut-{hosts}"
            assert main(["run", str(path), "--out", str(out), "--set", f"runtime.hosts={hosts}",
                         "--set", "duration=0.3s"]) == 0
            cut[hosts] = {t: sorted_rows(out, t) for t in ("deliveries", "messages", "in_flight")}
        assert cut[0]["in_flight"] and cut[2] == cut[0] and cut["all"] == cut[0]


def test_snapshot_restore_gives_identical_remaining_output(write_scenario, tmp_path):
    spec = resolve(write_scenario(small_scenario(runtime__costs="padres", duration="14s")))
    full, resumed = tmp_path / "full", tmp_path / "resumed"

    def hosts_for(run_dir):
        run_dir.mkdir()
        return _local_hosts(host_specs(spec, run_dir, 2, partition(spec.graph, 2)))

    reference = hosts_for(full)
    for until in range(1_000_000, 14_000_001, 1_000):  # 1 ms windows: the cross-host lookahead
        reference.run_window(until)
    reference.finish(14_000_000)

    interrupted = hosts_for(resumed)
    for until in range(1_000_000, 6_000_001, 1_000):
        interrupted.run_window(until)
    snapshots = [f"host-{host}.pkl" for host in range(2)]  # in the run directory
    assert interrupted.checkpoint(snapshots) == [1, 1]
    for until in range(6_001_000, 9_000_001, 1_000):  # work that the restore throws away
        interrupted.run_window(until)
    interrupted.finish(9_000_000)
    interrupted.restore(Checkpoint(1, 6_000_000, 0.0, snapshots))
    for until in range(6_001_000, 14_000_001, 1_000):
        interrupted.run_window(until)
    interrupted.finish(14_000_000)
    for table in ("deliveries", "messages", "samples", "events", "in_flight"):
        assert sorted_rows(resumed, table) == sorted_rows(full, table), table
    assert read_table(full, "deliveries").num_rows > 50


def test_hosts_collect_their_whole_heap_rarely_and_a_callers_process_after_as_before(
        write_scenario, tmp_path, monkeypatch):
    """Full garbage collections walk a host's whole heap, which grows all run long: hosts run
    with them rare, in a process of their own (a Ray actor) for good, in the caller's process
    (hosts: 0) only while the run lasts."""
    before = gc.get_threshold()
    assert before[2] != FULL_COLLECTION_EVERY
    during, run_window = [], BrokerHost.run_window

    def observed(host, until, *batches):
        during.append(gc.get_threshold())
        return run_window(host, until, *batches)

    monkeypatch.setattr(BrokerHost, "run_window", observed)  # (Engine's methods are compiled)
    run(resolve(write_scenario(small_scenario())), tmp_path / "run", progress=False)
    assert during and set(during) == {before[:2] + (FULL_COLLECTION_EVERY,)}
    assert gc.get_threshold() == before
    try:
        BrokerHost()  # as Ray makes a host actor
        assert gc.get_threshold() == before[:2] + (FULL_COLLECTION_EVERY,)
    finally:
        gc.set_threshold(*before)


def test_hosts_count_the_time_they_wait_behind_a_busier_host(write_scenario, tmp_path):
    """Two hosts exchanging windows over their channels (as Ray's hosts do; here threads), one
    of them 3 ms slower every window: the other counts those milliseconds as time behind the
    busiest host, within its waiting, and the slow one counts next to none."""
    spec = resolve(write_scenario(small_scenario(runtime__costs="padres", duration="14s")))
    (tmp_path / "run").mkdir()
    placement = partition(spec.graph, 2)
    hosts = [BrokerHost(s) for s in host_specs(spec, tmp_path / "run", 2, placement)]
    receive = hosts[1].receive  # (inside the window's busy time; the engine's methods may be compiled)

    def slower(*batches):
        time.sleep(0.003)
        receive(*batches)

    hosts[1].receive = slower
    key = os.urandom(16)
    addresses = [host.listen(key) for host in hosts]
    _in_threads([(host.connect, (addresses, False, key)) for host in hosts])
    statuses = [host.status() for host in hosts]
    _in_threads([(host.run_chunk, (statuses, 14_000_000, cross_host_lookahead(spec, 2, placement))) for host in hosts])
    fast, slow = (host.status() for host in hosts)
    for host in hosts:
        host.channels.close()
    assert fast.windows == slow.windows > 100
    assert 0.9 * 0.003 * fast.windows <= fast.behind_s <= fast.waiting_s
    assert slow.behind_s < fast.behind_s / 4


def _in_threads(calls) -> None:
    """Run ``(function, args)`` calls at once, each in a thread; re-raise a failure as soon as
    one fails (the others may then wait for it for good)."""
    pool = ThreadPoolExecutor(len(calls))
    futures = [pool.submit(function, *args) for function, args in calls]
    done, running = wait(futures, timeout=120, return_when=FIRST_EXCEPTION)
    pool.shutdown(wait=False)
    for future in done:
        future.result()
    assert not running, "a host never finished"


def test_run_records_failure_in_manifest(write_scenario, tmp_path, monkeypatch):
    spec = resolve(write_scenario(small_scenario()))

    def explode(*args, **kwargs):
        raise RuntimeError("host lost")

    monkeypatch.setattr("actors.coordinator.drive", explode)
    with pytest.raises(RuntimeError):
        run(spec, tmp_path / "failed")
    manifest = json.loads((tmp_path / "failed" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "host lost" in manifest["error"]
    assert read_table(tmp_path / "failed", "brokers").num_rows == 9


def test_a_stop_signal_that_surfaces_as_another_error_is_reported_as_the_stop(write_scenario, tmp_path, monkeypatch,
                                                                              capsys):
    # the exit a signal handler raises inside a C call can come out as that call's own error (numba's
    # dispatcher: "SystemError: ... returned a result with an exception set"); the run reports the stop
    from actors import coordinator

    monkeypatch.setattr(coordinator, "_stop_requests", [])

    def interrupted(*args, **kwargs):
        coordinator.request_stop("run stopped by SIGTERM")
        raise SystemError("CPUDispatcher(<function ask>) returned a result with an exception set")

    monkeypatch.setattr("actors.coordinator.drive", interrupted)
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(small_scenario())), "--out", str(out)]) == 1
    assert "pubsub-emu: run stopped by SIGTERM\n" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"].startswith("run stopped by SIGTERM (surfacing as SystemError: CPUDispatcher")


def test_links_and_brokers_tables(write_scenario, tmp_path):
    out = tmp_path / "run"
    edges = "B0 B1 5ms\nB1 B2\n"
    scenario = small_scenario(topology={"edgelist": "net.edges", "link": {"latency": "2ms"}})
    assert main(["run", str(write_scenario(scenario, {"net.edges": edges})), "--out", str(out)]) == 0
    links = read_table(out, "links").to_pylist()
    assert links == [{"a": "B0", "b": "B1", "latency_us": 5000}, {"a": "B1", "b": "B2", "latency_us": 2000}]
    brokers = read_table(out, "brokers")
    assert brokers.column("broker").to_pylist() == ["B0", "B1", "B2"]
    assert pc.all(pc.equal(brokers.column("host"), 0)).as_py()


def test_packed_burst_is_one_row_charged_per_item(write_scenario, tmp_path):
    from .test_covering import burst_records

    trace = "\n".join(json.dumps(r) for r in burst_records(10))
    scenario = small_scenario(topology={"generator": {"name": "line", "n": 4}}, workload={"trace": "ops.jsonl"},
                              protocol={"covering": "packing"})
    scenario["runtime"] = {"hosts": 0, "costs": "padres"}
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(scenario, {"ops.jsonl": trace})), "--out", str(out)]) == 0
    messages = read_table(out, "messages").to_pandas()
    batches = messages[messages.kind == "sub_batch"]
    assert len(batches) == 3 and (batches.batch_size == 10).all() and (batches.triggered_by == "ROOT").all()
    per_subscription = load_profile("padres").base["sub"]
    assert ((batches.t_end_us - batches.t_start_us) >= 10 * per_subscription).all()
    assert messages[messages.kind == "pub"].batch_size.isna().all()
    assert read_table(out, "deliveries").num_rows == 10


def test_a_run_stopped_by_sigterm_is_recorded_as_failed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from .conftest import PROJECT_ROOT

    scenario = PROJECT_ROOT / "experiments" / "scenarios" / "unsub_burst_active.yaml"
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "experiments.cli", "run", str(scenario), "--out", str(out),
                                "--set", "runtime.hosts=0"], cwd=PROJECT_ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=180)  # drains stderr: a full pipe would block the run's exit
    assert process.returncode == 1
    assert "run stopped by SIGTERM" in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "SIGTERM" in manifest["error"]


def test_hosts_split_at_long_links_where_latencies_differ():
    import networkx as nx

    from actors.partition import cut_links

    graph = nx.Graph()
    for region in "ab":
        for leaf in range(4):
            graph.add_edge(f"{region}-hub", f"{region}{leaf}", latency_us=1_000)
    graph.add_edge("a-hub", "b-hub", latency_us=40_000)
    placement = partition(graph, 2)
    assert {placement[n] for n in graph if n.startswith("a")} != {placement[n] for n in graph if n.startswith("b")}
    assert cut_links(graph, placement) == 1
    nx.set_edge_attributes(graph, 1_000, "latency_us")  # all alike: depth-first chunks, as before
    assert partition(graph, 2) == {n: 0 if n in {"a-hub", "a0", "a1", "a2", "a3"} else 1 for n in graph}


def test_hosts_sharing_a_nodes_cpus_get_brokers_in_proportion():
    from collections import Counter

    import networkx as nx

    import topologies
    from actors.partition import cut_links, host_weights

    # three hosts on node a (4 CPUs): a core each; two on b (1 CPU): half a core each
    weights = host_weights(["a", "a", "a", "b", "b"], {"a": 4, "b": 1})
    assert weights == [1.0, 1.0, 1.0, 0.5, 0.5]
    graph = topologies.random_tree(80, 3)
    nx.set_edge_attributes(graph, 1_000, "latency_us")
    assert sorted(Counter(partition(graph, 5, weights).values()).items()) == [(0, 20), (1, 20), (2, 20), (3, 10),
                                                                              (4, 10)]
    assert partition(graph, 5, [0.5] * 5) == partition(graph, 5)  # equal weights: the even split
    regions = nx.Graph()  # four regions of 10 behind 50 ms links, whole regions on hosts by share
    for region in range(4):
        regions.add_edges_from(((f"hub{region}", f"r{region}-{leaf}") for leaf in range(9)), latency_us=1_000)
        if region:
            regions.add_edge("hub0", f"hub{region}", latency_us=50_000)
    placement = partition(regions, 3, [1, 1, 0.5])
    assert sorted(Counter(placement.values()).items()) == [(0, 20), (1, 10), (2, 10)]
    assert cut_links(regions, placement) == 2  # two of the three long links; no short one


def test_windows_reach_past_service_times_and_distances_to_the_boundary(write_scenario, tmp_path):
    """Two hosts with 1 ms between them, services of at least 4 ms: a window ends 1 ms after
    the earliest time a broker could send to the other host. Counting the smallest service
    time, and then the way from each broker to its host's boundary, each leaves far fewer
    windows than the bound without them (earliest event + 1 ms); the results are one host's."""
    from actors import coordinator

    scenario = small_scenario(runtime={"hosts": 0, "costs": {"base": {"default": 4000}}}, duration="6s")
    spec = resolve(write_scenario(scenario))
    placement = partition(spec.graph, 2)
    windows = {}
    for bound in ("event", "service", "boundary"):
        run_dir = tmp_path / f"two-hosts-{bound}"
        run_dir.mkdir()
        transport = _local_hosts(host_specs(spec, run_dir, 2, placement))
        for host in transport.hosts:
            if bound != "boundary":
                host.engine.to_boundary = [0] * len(host.engine.to_boundary)
            if bound == "event":
                host.engine.min_service = 0
        calls = windows[bound] = []
        run_window = transport.run_window
        transport.run_window = lambda until: calls.append(until) or run_window(until)
        lookahead = coordinator.cross_host_lookahead(spec, 2, placement)
        coordinator.drive(spec, transport, lookahead, Checkpoints(run_dir, None, 2, 0), {}, lambda: 0.0, False)
    # 1,195, 675 and 493 windows when written
    assert len(windows["service"]) < 0.6 * len(windows["event"])
    assert len(windows["boundary"]) < 0.85 * len(windows["service"])
    one_host = tmp_path / "one-host"
    run(spec, one_host, progress=False)
    for table in ("deliveries", "messages", "samples", "events"):
        for bound in windows:
            assert sorted_rows(tmp_path / f"two-hosts-{bound}", table) == sorted_rows(one_host, table), (table, bound)


def test_distances_to_a_hosts_boundary_follow_links_and_least_services():
    """e - a - b | c - d, with x alone on a third host: b and c hand messages over at once;
    a is one link and one least service away, e two; x never sends to another host."""
    overlay = {"a": ["b", "e"], "b": ["a", "c"], "c": ["b", "d"], "d": ["c"], "e": ["a"], "x": []}
    host_of = {"a": 0, "b": 0, "e": 0, "c": 1, "d": 1, "x": 2}
    latency = {}
    for a, b, us in (("a", "b", 1000), ("b", "c", 9000), ("c", "d", 2000), ("a", "e", 3000)):
        latency[a, b] = latency[b, a] = us
    assert boundary_distances(overlay, host_of, latency, 500) == {
        "a": 1500, "b": 0, "c": 0, "d": 2500, "e": 5000, "x": float("inf")}


def test_a_send_to_another_host_from_inside_a_host_is_refused(write_scenario, tmp_path):
    """A broker promised to be away from its host's boundary that sends to another host
    anyway (a stack sending beyond overlay neighbours without saying so) stops the run
    rather than let a message land in another host's past."""
    spec = resolve(write_scenario(small_scenario()))
    transport = _local_hosts(host_specs(spec, tmp_path, 2, partition(spec.graph, 2)))
    for host in transport.hosts:
        host.engine.to_boundary = [1] * len(host.engine.to_boundary)
    with pytest.raises(RuntimeError, match="has no overlay neighbour there"):
        transport.run_window(spec.duration_us or 60_000_000)


def test_an_uplink_sends_one_message_after_another(write_scenario, tmp_path):
    ops = [{"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A", "filter": "[x,>,0]"},
           {"t": 0.01, "op": "subscribe", "client": "S", "broker": "B2", "id": "S1", "filter": "[x,>,0]"}]
    ops += [{"t": 0.1, "op": "publish", "client": "P", "id": f"M{i}", "content": f"[x,{i + 1}]"} for i in range(40)]
    scenario = small_scenario(topology={"generator": {"name": "line", "n": 3}, "uplink": {"capacity": 100}},
                              workload={"trace": "ops.jsonl"}, duration="2s")
    out = tmp_path / "run"
    path = write_scenario(scenario, {"ops.jsonl": "\n".join(json.dumps(r) for r in ops)})
    assert main(["run", str(path), "--out", str(out)]) == 0
    arrivals = sorted(m["t_arrive_us"] for m in read_table(out, "messages").to_pylist()
                      if m["kind"] == "pub" and m["broker"] == "B1")
    # 10 ms a message on the uplink, then the 1 ms link
    assert arrivals == [100_000 + 10_000 * (i + 1) + 1_000 for i in range(40)]
    samples = {(s["t_us"], s["broker"]): s["uplink_utilisation"] for s in read_table(out, "samples").to_pylist()}
    assert samples[(1_000_000, "B0")] == pytest.approx(0.41)  # the advertisement and 40 publications
    assert samples[(2_000_000, "B0")] == 0.0
    bad = write_scenario(small_scenario(topology={"generator": {"name": "line", "n": 3}, "uplink": {"capacity": 0}}),
                         name="bad.yaml")
    assert main(["validate", str(bad)]) == 2


def test_hosts_waiting_only_for_their_neighbours_as_estimated_give_one_hosts_results(
        write_scenario, tmp_path, monkeypatch):
    """``bench_windows.py --neighbours`` estimates hosts that wait only for the hosts they
    share links with (issue 40, not built). Four hosts in rounds: no message reaches a host
    before the time it has reached (the estimate checks each batch; a promise without the
    inputs a host has not yet seen, or one its neighbours read in the round it is made, fails
    there), the tables are one host's, and the longest chain of rounds through neighbours
    holds fewer events than the same rounds in lockstep."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_windows

    scenario = small_scenario(runtime={"hosts": 0, "costs": "padres", "mailbox": {"capacity": 50}},
                              topology={"generator": {"name": "random_tree", "n": 24, "seed": 4},
                                        "link": {"latency": "2ms"}})
    scenario["workload"]["generator"].update(operations=400, spacing=0.002)
    path = write_scenario(scenario)
    (tmp_path / "neighbours").mkdir()
    rounds = bench_windows.neighbour_rounds(path, 4, [], tmp_path / "neighbours")
    one_host = tmp_path / "one-host"
    run(resolve(path), one_host, progress=False)
    for table in ("deliveries", "messages", "samples", "events"):
        assert sorted_rows(tmp_path / "neighbours", table) == sorted_rows(one_host, table), table
    assert rounds["critical_events"] < rounds["lockstep_events"]
