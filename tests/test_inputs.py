"""Every invalid input stops before anything runs: exit 2, one message naming the place."""
import json

import pytest

from experiments.cli import main

GOOD_TRACE = [
    {"t": 0, "op": "advertise", "client": "P", "broker": "B0", "id": "A1", "filter": "[x,>,0]"},
    {"t": 1, "op": "subscribe", "client": "S", "broker": "B2", "id": "S1", "filter": "[x,>,1]"},
    {"t": 2, "op": "publish", "client": "P", "id": "M1", "content": "[x,3]"},
]


def scenario(**top):
    base = {"name": "bad", "topology": {"generator": {"name": "line", "n": 3}}, "workload": {"trace": "ops.jsonl"},
            "runtime": {"hosts": 0, "costs": "zero"}, "output": {"dir": "runs"}}
    base.update(top)
    return base


def trace_with(line_number: int, record) -> str:
    lines = [json.dumps(r) for r in GOOD_TRACE]
    lines.insert(line_number - 1, record if isinstance(record, str) else json.dumps(record))
    return "\n".join(lines)


CASES = [
    ("yaml syntax", None, "name: x\ntopology: [unclosed\n", {}, "scenario.yaml:3"),
    ("not a mapping", None, "- just\n- a list\n", {}, "a scenario is a YAML mapping"),
    ("missing name", {k: v for k, v in scenario().items() if k != "name"}, None, {}, "missing required key 'name'"),
    ("misspelt key", scenario(runtim={"hosts": 0}), None, {}, "runtim: unknown key; did you mean 'runtime'?"),
    ("misspelt nested", scenario(runtime={"mailbox": {"capcity": 3}}), None, {},
     "runtime.mailbox.capcity: unknown key; did you mean 'capacity'?"),
    ("bad hosts", scenario(runtime={"hosts": -1}), None, {}, "runtime.hosts: expected 0, a positive number"),
    ("bad overflow", scenario(runtime={"mailbox": {"overflow": "explode"}}), None, {},
     "runtime.mailbox.overflow: expected 'drop' or 'block'"),
    ("bad capacity type", scenario(runtime={"mailbox": {"capacity": "big"}}), None, {},
     "runtime.mailbox.capacity: expected an integer"),
    ("bad duration", scenario(duration="5 parsecs"), None, {}, "duration: expected a duration such as 2s"),
    ("zero latency", scenario(topology={"generator": {"name": "line"}, "link": {"latency": 0}}), None, {},
     "topology.link.latency: a duration must be positive"),
    ("two topologies", scenario(topology={"generator": {"name": "line"}, "edgelist": "x.edges"}), None, {},
     "topology: give exactly one of 'edgelist' or 'generator'"),
    ("unknown generator", scenario(topology={"generator": {"name": "ring"}}), None, {},
     "topology.generator.name: unknown generator 'ring' (known: balanced_tree, enterprise49, enterprise55, gt_itm, line, random_tree, regions, star, transit_stub)"),
    ("unknown parameter", scenario(topology={"generator": {"name": "line", "size": 3}}), None, {},
     "topology.generator.size: unknown parameter of generator 'line' (parameters: n)"),
    ("parameter type", scenario(topology={"generator": {"name": "line", "n": "three"}}), None, {},
     "topology.generator.n: expected int, got 'three'"),
    ("tree too small", scenario(topology={"generator": {"name": "balanced_tree", "fanout": 4, "depth": 3,
                                                        "brokers": 100}}), None, {},
     "topology.generator.brokers: expected 0 (all) to 85 for fanout 4 and depth 3, got 100"),
    ("null parameter", scenario(topology={"generator": {"name": "line", "n": None}}), None, {},
     "topology.generator.n: expected int, got None"),  # null only where a parameter may be absent
    ("missing trace", scenario(workload={"trace": "nowhere.jsonl"}), None, {},
     "nowhere.jsonl not found (a trace file's path is relative to the scenario's directory)"),
    ("bad filter", scenario(), None, {"ops.jsonl": trace_with(2, {"t": 0.5, "op": "subscribe", "client": "T",
                                                                  "broker": "B1", "id": "S9", "filter": "[x,>>,1]"})},
     "ops.jsonl:2: filter predicate 1 [x,>>,1] at position 1: unknown operator '>>'"),
    ("time backwards", scenario(), None, {"ops.jsonl": trace_with(4, {"t": 1.5, "op": "publish", "client": "P",
                                                                      "id": "M2", "content": "[x,1]"})},
     "ops.jsonl:4: time goes backwards (1.5 after 2)"),
    ("unknown broker", scenario(), None, {"ops.jsonl": trace_with(1, {"t": 0, "op": "subscribe", "client": "T",
                                                                      "broker": "B7", "id": "S9", "filter": "[x,>,1]"})},
     "ops.jsonl:1: unknown broker 'B7'"),
    ("not json", scenario(), None, {"ops.jsonl": trace_with(3, "{oops")}, "ops.jsonl:3: not valid JSON"),
    ("unknown unsubscribe", scenario(), None, {"ops.jsonl": trace_with(4, {"t": 3, "op": "unsubscribe",
                                                                           "client": "S", "id": "S5"})},
     "ops.jsonl:4: unsubscribe of 'S5', which client 'S' does not hold"),
    ("duplicate id", scenario(), None, {"ops.jsonl": trace_with(4, {"t": 3, "op": "publish", "client": "P",
                                                                    "id": "M1", "content": "[x,1]"})},
     "ops.jsonl:4: publish id 'M1' was used before"),
    ("cyclic overlay", scenario(topology={"edgelist": "net.edges"}), None, {"net.edges": "B0 B1\nB1 B2\nB2 B0\n"},
     "net.edges: the overlay must be acyclic (only protocol.multitree routes on a graph with cycles); cycle through"),
    ("disconnected overlay", scenario(topology={"edgelist": "net.edges"}), None, {"net.edges": "B0 B1\nB2 B3\n"},
     "net.edges: the overlay is disconnected"),
    ("bad edge line", scenario(topology={"edgelist": "net.edges"}), None, {"net.edges": "B0 B1\nB1\n"},
     "net.edges:2: expected 'A B' or 'A B LATENCY'"),
    ("bad edge latency", scenario(topology={"edgelist": "net.edges"}), None, {"net.edges": "B0 B1 fast\nB1 B2\n"},
     "net.edges:1: expected a duration"),
    ("unknown covering", scenario(protocol={"covering": "eager"}), None, {},
     "protocol.covering: expected one of none, lazy, active, packing, got 'eager'"),
    ("unknown profile", scenario(runtime={"costs": "cheap"}), None, {}, "runtime.costs: no profile 'cheap'"),
    ("pruning without covering", scenario(protocol={"pruning": {"variant": "selective"}}), None, {},
     "protocol.pruning: needs protocol.covering active or packing, not 'none' (a pruned subscription"),
    ("bad pruning key", scenario(protocol={"covering": "active", "pruning": {"treshold": 0.9}}), None, {},
     "protocol.pruning.treshold: unknown key"),
    ("bad pruning window", scenario(protocol={"covering": "active", "pruning": {"window": "soon"}}), None, {},
     "protocol.pruning.window: expected a duration"),
    ("soft links with packing", scenario(protocol={"covering": "packing", "soft_links": {}}), None, {},
     "protocol.soft_links: needs protocol.covering none, lazy or active, not 'packing'"),
    ("soft links with pruning", scenario(protocol={"covering": "active", "pruning": {}, "soft_links": {}}), None,
     {}, "protocol.soft_links: does not compose with protocol.pruning"),
    ("bad strategy", scenario(protocol={"soft_links": {"strategy": "S3"}}), None, {},
     "protocol.soft_links.strategy: expected one of S0, S1, S2, SH, got 'S3'"),
    ("bad soft links key", scenario(protocol={"soft_links": {"fan_out": 3}}), None, {},
     "protocol.soft_links.fan_out: unknown key"),
    ("bad round", scenario(protocol={"soft_links": {"round": "often"}}), None, {},
     "protocol.soft_links.round: expected a duration"),
    ("soft link too far", scenario(topology={"generator": {"name": "line", "n": 6}},
                                   protocol={"soft_links": {"delta": 2, "links": {"B0": {"soft": ["B3"]}}}}),
     None, {}, "protocol.soft_links.links.B0.soft: B3 is not within delta=2 hops of B0"),
    ("soft link to a neighbour", scenario(protocol={"soft_links": {"links": {"B1": {"soft": ["B0"]}}}}), None, {},
     "protocol.soft_links.links.B1.soft: B0 is B1 itself or a primary neighbour"),
    ("soft link from nowhere", scenario(protocol={"soft_links": {"links": {"B9": {"soft": ["B0"]}}}}), None, {},
     "protocol.soft_links.links.B9: no broker 'B9' in the topology"),
    ("too many soft links", scenario(topology={"generator": {"name": "line", "n": 6}},
                                     protocol={"soft_links": {"fanout": 2, "links": {"B0": {"soft": ["B2", "B3"]}}}}),
     None, {}, "protocol.soft_links.links.B0.soft: B0 has 1 primary links, so at most 1 soft links fit in fanout=2"),
    ("move with S1 and covering", scenario(topology={"generator": {"name": "line", "n": 5}}, protocol={
        "covering": "lazy", "soft_links": {"strategy": "S1", "moves": [{"at": "1s", "broker": "B0", "from": "B1",
                                                                         "to": "B3"}]}}), None, {},
     "protocol.soft_links: its moves under strategy S1 are not combined with protocol.covering 'lazy'"),
    ("move without a time", scenario(protocol={"soft_links": {
        "strategy": "S0", "moves": [{"broker": "B0", "from": "B1", "to": "B2"}]}}), None, {},
     "protocol.soft_links.moves[0]: expected a mapping with exactly the keys at, broker, from and to"),
    ("move from a non-neighbour", scenario(topology={"generator": {"name": "line", "n": 5}}, protocol={"soft_links": {
        "strategy": "S0", "moves": [{"at": "1s", "broker": "B0", "from": "B1", "to": "B3"},
                                    {"at": "2s", "broker": "B0", "from": "B1", "to": "B4"}]}}), None, {},
     "protocol.soft_links.moves[1].from: B1 is not a primary neighbour of B0 when the move comes"),
    ("move beyond delta", scenario(topology={"generator": {"name": "line", "n": 6}}, protocol={"soft_links": {
        "strategy": "S0", "delta": 3, "moves": [{"at": "1s", "broker": "B0", "from": "B1", "to": "B4"}]}}), None, {},
     "protocol.soft_links.moves[0].to: B4 is 4 hops from B0, beyond delta=3"),
    ("move to the other side", scenario(topology={"generator": {"name": "line", "n": 6}}, protocol={"soft_links": {
        "strategy": "S0", "moves": [{"at": "1s", "broker": "B2", "from": "B3", "to": "B0"}]}}), None, {},
     "protocol.soft_links.moves[0].to: B0 is not beyond B3 on B3's side of B2"),
    ("move with faults", scenario(topology={"generator": {"name": "line", "n": 4}}, protocol={"soft_links": {
        "strategy": "S0", "moves": [{"at": "1s", "broker": "B0", "from": "B1", "to": "B2"}]}},
        faults=[{"t": "1s", "kind": "link_down", "a": "B1", "b": "B2", "until": "2s"}]), None, {},
     "protocol.soft_links: its moves are not combined with faults"),
    ("move with moving clients", scenario(topology={"generator": {"name": "line", "n": 4}},
                                          workload={"generator": {"name": "random_mix", "operations": 50}},
                                          protocol={"soft_links": {"strategy": "S0", "moves": [
                                              {"at": "1s", "broker": "B0", "from": "B1", "to": "B2"}]}}), None, {},
     "protocol.soft_links: its moves are not combined with a workload whose clients move"),
    ("bad relocation algorithm", scenario(protocol={"relocation": {"algorithm": "grapes"}}), None, {},
     "protocol.relocation.algorithm: expected one of grape, pop, got 'grapes'"),
    ("bad relocation key", scenario(protocol={"relocation": {"treshold": 5}}), None, {},
     "protocol.relocation.treshold: unknown key"),
    ("bad relocation weight", scenario(protocol={"relocation": {"weight": 150}}), None, {},
     "protocol.relocation.weight: expected a percentage from 0 to 100, got 150"),
    ("bad relocation window", scenario(protocol={"relocation": {"window": "0s"}}), None, {},
     "protocol.relocation.window: a duration must be positive"),
    ("relocation with soft links", scenario(protocol={"relocation": {}, "soft_links": {}}), None, {},
     "protocol.relocation: does not compose with protocol.soft_links"),
    ("bad multitree algorithm", scenario(protocol={"multitree": {"algorithm": "MULTI"}}), None, {},
     "protocol.multitree.algorithm: expected one of MULT, MULT2, SINGLE, SPT, OPT, SemCast, SemCast-filtered, got 'MULTI'"),
    ("bad multitree sample", scenario(protocol={"multitree": {"sample": 0}}), None, {},
     "protocol.multitree.sample: expected a probability in (0, 1], got 0"),
    ("bad multitree improvement", scenario(protocol={"multitree": {"improvement": -0.1}}), None, {},
     "protocol.multitree.improvement: expected a relative improvement in [0, 1), got -0.1"),
    ("bad multitree plan", scenario(protocol={"multitree": {"plan": "later"}}), None, {},
     "protocol.multitree.plan: expected one of online, offline, got 'later'"),
    ("bad multitree span", scenario(protocol={"multitree": {"span": "graph"}}), None, {},
     "protocol.multitree.span: expected one of union, overlay, got 'graph'"),
    ("bad multitree unsampled", scenario(protocol={"multitree": {"unsampled": "nearest"}}), None, {},
     "protocol.multitree.unsampled: expected one of base, largest, got 'nearest'"),
    ("bad multitree recompute", scenario(protocol={"multitree": {"recompute": "0s"}}), None, {},
     "protocol.multitree.recompute: a duration must be positive"),
    ("unknown multitree coordinator", scenario(protocol={"multitree": {"coordinator": "B9"}}), None, {},
     "protocol.multitree.coordinator: 'B9' is not a broker of the overlay"),
    ("multitree with covering", scenario(protocol={"multitree": {}, "covering": "active"}), None, {},
     "protocol.multitree: needs protocol.covering none, not 'active' (it routes on its own trees)"),
    ("multitree with relocation", scenario(protocol={"multitree": {}, "relocation": {}}), None, {},
     "protocol.multitree: does not compose with protocol.relocation (it routes on its own trees)"),
    ("missing quotes", scenario(workload={"generator": {"name": "stock_quotes", "quotes": "nowhere"}}), None, {},
     "workload.generator.quotes: "),
    ("bad cpus per host", scenario(runtime={"hosts": 2, "cpus_per_host": "one"}), None, {},
     "runtime.cpus_per_host: expected a non-negative number of CPUs, got 'one'"),
    ("bad uplink", scenario(topology={"generator": {"name": "line", "n": 3}, "uplink": {"capacity": "fast"}}), None,
     {}, "topology.uplink.capacity: expected messages per second"),
    ("faults not a list", scenario(faults={"t": 1}), None, {}, "faults: expected a list of {t, kind, ...} mappings"),
    ("unknown fault kind", scenario(faults=[{"t": 1, "kind": "meteor"}]), None, {},
     "faults[0].kind: expected one of crash, link_down, partition, loss, delay, slow, got 'meteor'"),
    ("fault unknown broker", scenario(faults=[{"t": 1, "kind": "crash", "broker": "B9"}]), None, {},
     "faults[0].broker: unknown broker 'B9'"),
    ("fault not a link", scenario(faults=[{"t": 1, "kind": "link_down", "a": "B0", "b": "B2"}]), None, {},
     "faults[0]: B0 - B2 is not a link of the overlay"),
    ("fault negative time", scenario(faults=[{"t": -1, "kind": "slow", "broker": "B1", "factor": 2}]), None, {},
     "faults[0].t: a time must be non-negative, got -1"),
    ("fault ends before it starts", scenario(faults=[{"t": "5s", "kind": "link_down", "a": "B0", "b": "B1",
                                                      "until": "2s"}]), None, {},
     "faults[0].until: must come after t ('5s'), got '2s'"),
    ("loss probability", scenario(faults=[{"t": 0, "kind": "loss", "a": "B0", "b": "B1", "probability": 1.5}]),
     None, {}, "faults[0].probability: expected a number in [0, 1], got 1.5"),
    ("fault missing key", scenario(faults=[{"t": 0, "kind": "delay", "a": "B0", "b": "B1"}]), None, {},
     "faults[0].extra: missing (a delay fault needs t, a, b, extra)"),
    ("fault unknown key", scenario(faults=[{"t": 0, "kind": "crash", "broker": "B1", "until": "3s"}]), None, {},
     "faults[0].until: unknown key for a crash fault (expected: t, kind, broker, restart_after)"),
    ("faults contradict", scenario(faults=[{"t": "1s", "kind": "crash", "broker": "B1", "restart_after": "5s"},
                                           {"t": "3s", "kind": "crash", "broker": "B1"}]), None, {},
     "faults[1]: overlaps faults[0], another crash on B1"),
    ("partition twice", scenario(faults=[{"t": 0, "kind": "partition", "groups": [["B0"], ["B1", "B0"]]}]), None,
     {}, "faults[0].groups[1]: B0 is in two groups"),
    ("faults with multitree", scenario(protocol={"multitree": {}}, faults=[{"t": 0, "kind": "crash", "broker": "B1"}]),
     None, {}, "protocol.multitree: does not compose with faults (its trees are not resynchronised"),
    ("misspelt protocol setting", scenario(protocol={"soft_links": {"stratgy": "S1"}}), None, {},
     "protocol.soft_links.stratgy: unknown key (did you mean 'strategy'? known: adaptive, block"),
    ("negative generator time", scenario(workload={"generator": {"name": "random_mix", "spacing": -1}}), None, {},
     "workload.generator.spacing: -1: a time in seconds, expected 0 or more"),
    ("generator refuses one parameter", scenario(topology={"generator": {"name": "line", "n": 4}}, workload={
        "generator": {"name": "covering_degree", "degree": 5, "subscriptions": 3}}), None, {},
     "workload.generator.subscriptions: 3: expected at least degree + 1 (6)"),
    ("fault duration", scenario(faults=[{"t": "soon", "kind": "crash", "broker": "B1"}]), None, {},
     "scenario.yaml: faults[0].t: expected a duration such as 2s"),
    ("extends missing", None, "extends: base.yaml\nname: x\n", {}, "scenario.yaml: extends: scenario file"),
    ("extends cycle", None, "extends: a.yaml\n", {"a.yaml": "extends: scenario.yaml\n"}, "extends itself"),
]


@pytest.mark.parametrize("label, data, text, files, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(tmp_path, capsys, monkeypatch, label, data, text, files, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE))
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    path = tmp_path / "scenario.yaml"
    path.write_text(text if text is not None else json.dumps(data))
    assert main(["validate", str(path)]) == 2
    assert message in capsys.readouterr().err
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_bad_overrides_and_out_directory(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    path.write_text(json.dumps(scenario()))
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE))
    assert main(["run", str(path), "--set", "runtime.hosts"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert main(["run", str(path), "--set", "runtime.hots=2"]) == 2
    assert "did you mean 'hosts'" in capsys.readouterr().err
    assert main(["run", str(path), "--set", "workload={trace: [ops.jsonl}"]) == 2
    assert "--set 'workload={trace: [ops.jsonl}': the value is not valid YAML" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["run", str(path), "--out", str(tmp_path / "full")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "scenario file not found" in capsys.readouterr().err


def test_every_error_of_a_scenario_is_listed_at_once(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    data = scenario()
    data["topolgy"] = data.pop("topology")
    data["runtime"] = {"hots": 2}
    path.write_text(json.dumps(data))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pubsub-emu: error: 3 errors:\n")
    assert "missing required key 'topology'" in err and "topolgy: unknown key; did you mean 'topology'?" in err
    assert "runtime.hots: unknown key; did you mean 'hosts'?" in err
    data = scenario()
    data["protocol"] = {"covering": "actve", "pruning": {"variant": "selective"}}
    data["runtime"] = {"hosts": -1, "mailbox": {"capacity": 0}}
    path.write_text(json.dumps(data))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pubsub-emu: error: 4 errors:\n") and "Traceback" not in err
    for message in ("protocol.covering: expected one of", "runtime.hosts: expected 0", "runtime.mailbox.capacity",
                    "protocol.pruning: needs protocol.covering active or packing"):
        assert message in err


def test_extends_merges_mapping_by_mapping(tmp_path):
    from experiments.scenario import load

    (tmp_path / "base.yaml").write_text("name: base\nseed: 3\nworkload: {generator: {name: random_mix, operations: 50}}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\nworkload: {generator: {operations: 9}}\n")
    assert load(tmp_path / "child.yaml", ["seed=4"]) == {
        "name": "child", "seed": 4, "workload": {"generator": {"name": "random_mix", "operations": 9}}}


def test_good_trace_validates(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    path.write_text(json.dumps(scenario()))
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE))
    assert main(["validate", str(path)]) == 0
    assert "valid: 3 brokers, 3 operations" in capsys.readouterr().out


def test_scenarios_that_share_a_workload_build_it_once_inside_workloads_shared(tmp_path):
    """Same workload section, seed, overlay and trace file: one build; another seed, another
    overlay or a trace file that changed: a build of its own; outside the context: always."""
    from experiments.build import resolve, workloads_shared

    generated = {"generator": {"name": "random_mix", "operations": 40}}
    files = {
        "a": scenario(workload=generated),
        "b": scenario(workload=generated, protocol={"covering": "active"}, runtime={"hosts": 0, "costs": "padres"}),
        "seed": scenario(workload=generated, seed=3),
        "overlay": scenario(workload=generated, topology={"generator": {"name": "line", "n": 4}}),
        "trace": scenario(),
    }
    for name, content in files.items():
        (tmp_path / f"{name}.yaml").write_text(json.dumps(content))
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE))
    with workloads_shared():
        a, b, seed, overlay, trace = (resolve(tmp_path / f"{name}.yaml").injections for name in files)
        assert b is a and seed is not a and overlay is not a and seed != a
        with workloads_shared():  # a context inside another shares its builds
            assert resolve(tmp_path / "b.yaml").injections is a
        assert resolve(tmp_path / "trace.yaml").injections is trace
        (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE[:2]))
        assert len(resolve(tmp_path / "trace.yaml").injections) == 2
    assert resolve(tmp_path / "a.yaml").injections is not resolve(tmp_path / "b.yaml").injections


def test_validate_takes_several_files_and_stops_at_the_first_invalid_one(tmp_path, capsys):
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD_TRACE))
    (tmp_path / "good.yaml").write_text(json.dumps(scenario()))
    (tmp_path / "bad.yaml").write_text(json.dumps(scenario(runtim={"hosts": 0})))
    assert main(["validate", str(tmp_path / "good.yaml"), str(tmp_path / "good.yaml")]) == 0
    assert capsys.readouterr().out.count("good.yaml: valid: 3 brokers, 3 operations") == 2
    assert main(["validate", str(tmp_path / "good.yaml"), str(tmp_path / "bad.yaml")]) == 2
    captured = capsys.readouterr()
    assert "good.yaml: valid:" in captured.out and "runtim: unknown key" in captured.err
