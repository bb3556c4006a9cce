"""The ready-made scenarios: all validate; the small burst runs show covering's effects."""
from pathlib import Path

import pytest

from actors.results import read_table
from experiments.cli import main

SCENARIOS = Path(__file__).resolve().parent.parent / "experiments" / "scenarios"


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_validate(path, capsys):
    assert main(["validate", str(path)]) == 0
    assert "valid:" in capsys.readouterr().out


@pytest.fixture(scope="module")
def burst_runs(tmp_path_factory):
    runs = {}
    for mode in ("none", "lazy", "active", "packing"):
        out = tmp_path_factory.mktemp("burst") / mode
        assert main(["run", str(SCENARIOS / f"unsub_burst_small_{mode}.yaml"), "--out", str(out)]) == 0
        runs[mode] = {t: read_table(out, t).to_pandas() for t in ("messages", "deliveries", "samples")}
    return runs


def test_covering_changes_what_travels_never_who_receives(burst_runs):
    pairs = {mode: set(zip(run["deliveries"].pub_id, run["deliveries"].sub_id)) for mode, run in burst_runs.items()}
    assert len(pairs["none"]) > 500
    assert pairs["lazy"] == pairs["active"] == pairs["packing"] == pairs["none"]


def test_unsubscribing_roots_triggers_subscriptions_only_with_covering(burst_runs):
    triggered = {mode: run["messages"].query("kind == 'sub' and cause.notna()").shape[0]
                 for mode, run in burst_runs.items()}
    assert triggered["none"] == 0
    assert triggered["lazy"] > 100 and triggered["active"] > 100
    batches = burst_runs["packing"]["messages"].query("kind == 'sub_batch'")
    assert len(batches) > 0 and batches.batch_size.sum() >= triggered["active"] * 0.9


def test_covering_shrinks_tables_and_packing_sends_fewer_messages(burst_runs):
    def table_size(mode):  # routing-table entries over all brokers when the tables are built
        samples = burst_runs[mode]["samples"]
        return samples[samples.t_us == 40_000_000].prt_size.sum()

    assert table_size("active") < table_size("lazy") < table_size("none")
    count = {mode: len(run["messages"]) for mode, run in burst_runs.items()}
    assert count["packing"] < count["active"]
