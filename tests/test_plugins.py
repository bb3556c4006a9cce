"""Protocols as plug-ins: a package installed beside the emulator (examples/flooding) adds a
protocol with no edit to the emulator; it is listed, validated by the rules it declares, runs,
and delivers exactly."""
import importlib
import json
import subprocess
import sys
from importlib import metadata

import pytest

from actors.results import read_table
from actors.storage import RunDir
from experiments.check import check
from experiments.cli import main
from protocols import plugins
from tests.conftest import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "flooding"


@pytest.fixture(scope="module")
def flooding():
    """The example package installed (as a user would: pip, no edit to the emulator)."""
    if not any(e.name == "flooding" for e in metadata.entry_points(group=plugins.GROUP)):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(EXAMPLE)],
                       check=True, capture_output=True)
        importlib.invalidate_caches()  # this process finds the new package without a restart
    plugins.installed.cache_clear()
    yield plugins.installed()["flooding"]
    plugins.installed.cache_clear()


def scenario(**protocol) -> dict:
    return {
        "name": "flooding", "seed": 2, "duration": "8s",
        "topology": {"generator": {"name": "random_tree", "n": 12, "seed": 2}, "link": {"latency": "5ms"}},
        "workload": {"generator": {"name": "random_mix", "operations": 500, "spacing": 0.01, "moves": True}},
        "protocol": protocol,
        "runtime": {"hosts": 0, "costs": "padres"},
        "faults": [{"t": "1s", "kind": "crash", "broker": "B3", "restart_after": "0.5s"}],
    }


def test_the_installed_protocols_are_listed_with_paper_settings_and_composition(flooding, capsys):
    assert main(["protocols"]) == 0
    listed = capsys.readouterr().out
    heads = [line.split(" (", 1)[0] for line in listed.splitlines() if not line.startswith(" ")]
    assert heads == ["flooding", "multitree", "relocation", "pruning", "soft_links", "covering"]  # stacking order
    block = listed.split("flooding (pubsub-emu-flooding): ", 1)[1].split("\nmultitree", 1)[0]
    assert "paper: Design and Evaluation of a Wide-Area Event Notification Service" in block
    assert "composes: with protocol.covering none: publications flood" in block
    assert "settings (protocol.pruning: {...}, null for off): variant='selective'" in listed
    assert "window=120s" in listed and "values: none, lazy, active, packing (default none)" in listed


def test_a_refused_composition_says_what_the_plugin_declares(flooding, write_scenario, capsys):
    path = write_scenario(scenario(flooding={}, covering="active"))
    assert main(["validate", str(path)]) == 2
    assert ("protocol.flooding: needs protocol.covering none, not 'active' (publications flood the overlay and "
            "subscriptions stay where they were made: there is nothing to cover)") in capsys.readouterr().err
    path = write_scenario(scenario(flooding={"ttl": 3}))
    assert main(["validate", str(path)]) == 2
    assert "protocol.flooding.ttl: unknown key" in capsys.readouterr().err


def test_flooding_against_the_base_broker_is_exact_and_costs_a_copy_on_every_link(flooding, write_scenario,
                                                                                   tmp_path, capsys):
    """The comparison the example is for: the same workload (moving clients, a broker that
    crashes) under the base broker and under flooding; both exact; flooding sends no
    subscription between brokers and every conforming publication to every broker."""
    runs = {}
    for label, protocol in (("base", {}), ("flooding", {"flooding": {}})):
        out = tmp_path / label
        assert main(["run", str(write_scenario(scenario(**protocol), name=f"{label}.yaml")), "--out", str(out)]) == 0
        runs[label] = read_table(out, "messages").to_pandas()
        result = check(RunDir(out))
        assert result["exact"] and result["expected_pairs"] > 2000, json.dumps(result["missing"])
    capsys.readouterr()
    assert main(["check", str(tmp_path / "base"), str(tmp_path / "flooding")]) == 0
    base, flood = runs["base"], runs["flooding"]
    between = lambda m, kind: ((m.kind == kind) & m.sender.notna()).sum()  # noqa: E731
    assert between(flood, "sub") == between(flood, "unsub") == 0 < between(base, "sub")
    copies = flood[(flood.kind == "pub") & flood.t_end_us.notna() & (flood.t_arrive_us > 2_000_000)]
    reached = copies.groupby("msg_id").broker.nunique()
    assert (reached == 12).mean() > 0.9  # after the crash: every broker gets every publication
    assert between(flood, "pub") > 1.3 * between(base, "pub")
