"""Runs on a multi-node Ray cluster (three nodes on this machine) and the cluster-launcher file."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from actors.coordinator import run
from actors.transports import relays
from actors.partition import host_weights, partition
from actors.results import read_table
from experiments.build import resolve
from tests.conftest import PROJECT_ROOT

SCENARIO = PROJECT_ROOT / "experiments" / "scenarios" / "relocation_small_enterprise_grape_load.yaml"
TABLES = ("deliveries", "delivery_groups", "messages", "samples", "events")

# a cluster of a head and worker nodes on this machine: argv[3] the head's CPUs, argv[4] the
# workers (one CPU each), the rest scenario overrides
ON_A_CLUSTER = """
import json, sys
import ray
from ray.cluster_utils import Cluster
from actors.coordinator import run
from actors.transports import ray_runtime_env
from experiments.build import resolve

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": int(sys.argv[3]), "include_dashboard": False})
workers = [cluster.add_node(num_cpus=1) for _ in range(int(sys.argv[4]))]
cluster.wait_for_nodes()
ray.init(address=cluster.address, runtime_env=ray_runtime_env(), log_to_driver=False, logging_level="ERROR")
try:
    manifest = run(resolve(sys.argv[1], sys.argv[5:]), sys.argv[2], progress=False)
    print(json.dumps({"manifest": manifest, "head": cluster.head_node.node_id,
                      "workers": [w.node_id for w in workers],
                      "cpus": {n["NodeID"]: n["Resources"].get("CPU", 0) for n in ray.nodes()}}))
finally:
    ray.shutdown()
    cluster.shutdown()
"""


def on_a_cluster(run_dir, head_cpus: int, workers: int, *overrides: str) -> dict:
    """Run SCENARIO on a cluster of a head and ``workers`` nodes started for it; the manifest,
    the head's and the workers' node ids and every node's CPUs."""
    command = [sys.executable, "-c", ON_A_CLUSTER, str(SCENARIO), str(run_dir), str(head_cpus), str(workers), *overrides]
    result = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def rows(run_dir) -> dict:
    key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
    return {t: sorted(read_table(run_dir, t).to_pylist(), key=key) for t in TABLES}


@pytest.mark.ray
@pytest.mark.slow
def test_hosts_spread_over_the_worker_nodes_and_results_match_one_process(tmp_path):
    # a head without CPUs and two workers of one CPU; hosts: auto with a CPU each
    found = on_a_cluster(tmp_path / "cluster", 0, 2, "runtime.hosts=auto", "runtime.cpus_per_host=1")
    manifest = found["manifest"]
    assert manifest["hosts"] == 2  # every CPU but the driver's node's (the head has none)
    assert sorted(manifest["host_nodes"]) == sorted(found["workers"])  # one host on each worker
    assert found["head"] not in manifest["host_nodes"]
    weights = host_weights(manifest["host_nodes"], found["cpus"])  # partitioned knowing where hosts run
    brokers = {r["broker"]: r["host"] for r in read_table(tmp_path / "cluster", "brokers").to_pylist()}
    assert weights == [1.0, 1.0] and brokers == partition(resolve(SCENARIO).graph, 2, weights)
    run(resolve(SCENARIO), tmp_path / "local", progress=False)
    assert rows(tmp_path / "cluster") == rows(tmp_path / "local")


@pytest.mark.ray
@pytest.mark.slow
def test_hosts_reserving_no_cpus_spread_one_per_node_and_exchange_directly(tmp_path):
    # three nodes of one CPU, the head among them; three hosts that reserve nothing
    found = on_a_cluster(tmp_path / "cluster", 1, 2, "runtime.hosts=3")
    manifest = found["manifest"]
    assert sorted(manifest["host_nodes"]) == sorted([found["head"], *found["workers"]])  # one host on each node
    assert not relays(manifest["host_nodes"])  # so the three exchange their batches pair by pair
    assert manifest["windows"] > 100  # and did, many times
    run(resolve(SCENARIO), tmp_path / "local", progress=False)
    assert rows(tmp_path / "cluster") == rows(tmp_path / "local")


def test_hosts_sharing_nodes_relay_through_host_zero_and_hosts_on_nodes_of_their_own_exchange_directly():
    assert relays(["n1"] * 3) and relays(["n1", "n1", "n2"])  # calls would compete for the same CPUs
    assert not relays(["n1", "n2", "n3"]) and not relays(["n1", "n1"])  # two hosts: one call each way anyway


def test_cluster_yaml_is_valid_for_the_installed_ray_and_keeps_hosts_off_the_head():
    import jsonschema
    import ray

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    config = yaml.safe_load((PROJECT_ROOT / "cluster.yaml").read_text())
    jsonschema.validate(config, schema)
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--num-cpus=0" in head_start  # with runtime.cpus_per_host, no host fits on the head
    assert "--dashboard-host=127.0.0.1" in head_start  # the dashboard stays on the head itself


@pytest.mark.ray
def test_runs_leave_no_host_actor_or_placement_group_behind(tmp_path, ray_session, monkeypatch):
    from ray._private.state import actors
    from ray.util import placement_group_table

    from actors import transports

    def alive_hosts() -> int:
        return sum(1 for a in actors().values() if a["ActorClassName"] == "BrokerHost" and a["State"] != "DEAD")

    before = alive_hosts()
    spec = resolve(SCENARIO, ["runtime.hosts=2", "runtime.cpus_per_host=0.5"])
    assert run(spec, tmp_path / "done", progress=False)["status"] == "complete"
    monkeypatch.setattr(transports.RayTransport, "PLACEMENT_TIMEOUT_S", 2)
    failing = resolve(SCENARIO, ["runtime.hosts=2", "runtime.cpus_per_host=64"])  # more CPUs than there are
    with pytest.raises(RuntimeError, match="do not fit the cluster"):
        run(failing, tmp_path / "failed", progress=False)
    assert json.loads((tmp_path / "failed" / "manifest.json").read_text())["status"] == "failed"
    assert alive_hosts() == before
    assert all(group["state"] == "REMOVED" for group in placement_group_table().values())


@pytest.mark.ray
def test_hosts_kept_serve_the_next_run_and_are_killed_on_leaving(tmp_path, ray_session):
    """Within ``hosts_kept`` a second run starts no host process, and gives the same tables."""
    from ray._private.state import actors

    from actors.transports import hosts_kept

    def alive_hosts() -> set[str]:
        return {i for i, a in actors().items() if a["ActorClassName"] == "BrokerHost" and a["State"] != "DEAD"}

    before = alive_hosts()
    spec = resolve(SCENARIO, ["runtime.hosts=2"])
    with hosts_kept():
        run(spec, tmp_path / "first", progress=False)
        kept = alive_hosts() - before
        run(spec, tmp_path / "second", progress=False)
        assert len(kept) == 2 and alive_hosts() - before == kept
    assert alive_hosts() == before
    assert rows(tmp_path / "first") == rows(tmp_path / "second")
