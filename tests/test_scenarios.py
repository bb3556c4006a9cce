"""The ready-made scenarios: all validate; the small burst runs show covering's and pruning's effects."""
from pathlib import Path

import pytest

from actors.results import read_table
from experiments.build import check_arguments, workloads_shared
from experiments.cli import main

from .test_analysis import false_positives_by_components

SCENARIOS = Path(__file__).resolve().parent.parent / "experiments" / "scenarios"


def _shipped(small: bool) -> list[Path]:
    """The shipped scenario files, test-sized (``*_small_*``, the quick start) or full-size."""
    return [path for path in sorted(SCENARIOS.glob("*.yaml"))
            if ("_small" in path.stem or path.stem == "quickstart") == small]


def _family(path: Path) -> str:
    """The name without its last part: the variants of one experiment, which mostly share a workload."""
    return path.stem.rsplit("_", 1)[0] if "_" in path.stem else path.stem


@pytest.fixture(scope="module")
def family_builds() -> dict:
    """The workloads the family being validated has built (one family's at a time)."""
    return {}


@pytest.mark.parametrize("path", _shipped(small=True), ids=lambda path: path.stem)
def test_test_sized_scenarios_validate(path, family_builds, capsys):
    """Files of one family, validated one after another, build a workload they share once."""
    for other in [f for f in family_builds if f != _family(path)]:
        del family_builds[other]
    with workloads_shared(family_builds.setdefault(_family(path), {})):
        assert main(["validate", str(path)]) == 0
    assert f"{path}: valid:" in capsys.readouterr().out


@pytest.mark.parametrize("path", _shipped(small=False), ids=lambda path: path.stem)
def test_full_size_scenarios_pass_every_check_short_of_building_their_workload(path):
    """Keys, values, the overlay, faults, the cost profile and the generator's arguments
    against its signature. Building the workloads (5.5 million operations for the paper-size
    mobile runs, 150 s of the suite) is left to their runs, and with it what a generator
    refuses only while generating at full size: the same generators build in the test-sized
    files above, every figure's scenarios build and run test-sized in tests/test_figures.py,
    and the generators' own tests check them at sizes of their own."""
    assert check_arguments(path)["name"] == path.stem


@pytest.fixture(scope="module")
def burst_runs(tmp_path_factory):
    runs = {}
    for mode in ("none", "lazy", "active", "packing", "selective", "incremental"):
        out = tmp_path_factory.mktemp("burst") / mode
        assert main(["run", str(SCENARIOS / f"unsub_burst_small_{mode}.yaml"), "--out", str(out)]) == 0
        runs[mode] = {t: read_table(out, t).to_pandas() for t in ("messages", "deliveries", "samples", "links")}
    return runs


def test_covering_changes_what_travels_never_who_receives(burst_runs):
    pairs = {mode: set(zip(run["deliveries"].pub_id, run["deliveries"].sub_id)) for mode, run in burst_runs.items()}
    assert len(pairs["none"]) > 500
    assert pairs["lazy"] == pairs["active"] == pairs["packing"] == pairs["none"]
    assert pairs["selective"] == pairs["incremental"] == pairs["none"]


def test_unsubscribing_roots_triggers_subscriptions_only_with_covering(burst_runs):
    triggered = {mode: run["messages"].query("kind == 'sub' and triggered_by.notna()").shape[0]
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


def _after_burst(run):
    """Message rows from the first client unsubscription on."""
    m = run["messages"]
    start = m[(m.kind == "unsub") & m.sender.isna()].t_arrive_us.min()
    return m[m.t_arrive_us >= start]


@pytest.mark.parametrize("variant", ["selective", "incremental"])
def test_pruning_keeps_the_burst_from_the_publishers_side(burst_runs, variant):
    def core_e(mode):  # the core broker next to the publishers
        m = _after_burst(burst_runs[mode])
        m = m[m.broker == "core-E"]
        return m.queue_len.max(), ((m.kind == "sub") & m.triggered_by.notna()).sum()

    queue_active, triggered_active = core_e("active")
    queue_pruned, triggered_pruned = core_e(variant)
    assert queue_pruned < queue_active * 0.8
    assert triggered_pruned < triggered_active * 0.6

    def final(mode, column):
        samples = burst_runs[mode]["samples"]
        return samples[samples.t_us == samples.t_us.max()][column].sum()

    assert final(variant, "prt_size") < final("active", "prt_size")
    assert final(variant, "preserved") > 0 and final("active", "preserved") == 0
    run = burst_runs[variant]
    copies = ((run["messages"].kind == "pub") & run["messages"].sender.notna()).sum()
    assert false_positives_by_components(run["messages"], run["deliveries"], run["links"]) <= 0.01 * copies


@pytest.mark.slow
def test_soft_links_skip_pure_forwarders_and_shorten_paths(tmp_path):
    """The soft-link paper's comparison on the test-sized sparse dataset: SH against S0, the
    same deliveries with fewer pure-forwarder copies, higher yield, fewer hops, shorter delays."""
    figures = {}
    for strategy in ("S0", "SH"):
        out = tmp_path / strategy
        assert main(["run", str(SCENARIOS / f"softlinks_small_sparse_{strategy}.yaml"), "--out", str(out)]) == 0
        messages, deliveries = (read_table(out, t).to_pandas() for t in ("messages", "deliveries"))
        copies = messages[(messages.kind == "pub") & messages.t_end_us.notna()]
        delivered_at = set(zip(deliveries.pub_id, deliveries.broker))
        useful = [(p, b) in delivered_at for p, b in zip(copies.msg_id, copies.broker)]
        figures[strategy] = {
            "pairs": set(zip(deliveries.pub_id, deliveries.sub_id)),
            "pure": useful.count(False), "yield": sum(useful) / len(useful),
            "hops": deliveries.hops.mean(), "delay": (deliveries.t_deliver_us - deliveries.t_pub_us).mean(),
            "held": read_table(out, "samples").to_pandas().soft_links.max(),
        }
    s0, sh = figures["S0"], figures["SH"]
    assert sh["pairs"] == s0["pairs"] and len(s0["pairs"]) > 10_000
    assert s0["held"] == 0 and sh["held"] > 0
    assert sh["pure"] < 0.7 * s0["pure"] and sh["yield"] > s0["yield"] + 0.1
    assert sh["hops"] < s0["hops"] - 1 and sh["delay"] < 0.85 * s0["delay"]


@pytest.mark.parametrize("fixed, moving", [("S0", "moves"), ("SH", "SH_moves")])
def test_delta_moves_keep_the_fixed_trees_deliveries(tmp_path, fixed, moving):
    """softlinks_small_dense_moves (S0) and _SH_moves (SH, adaptive links) move four primary
    links while publications flow: the deliveries are exactly those of the same workload on
    the tree that never moves."""
    runs = {}
    for name in (fixed, moving):
        out = tmp_path / name
        assert main(["run", str(SCENARIOS / f"softlinks_small_dense_{name}.yaml"), "--out", str(out)]) == 0
        runs[name] = {t: read_table(out, t).to_pandas() for t in ("deliveries", "events", "messages")}
    pairs = {name: list(zip(run["deliveries"].pub_id, run["deliveries"].sub_id)) for name, run in runs.items()}
    assert len(pairs[moving]) == len(set(pairs[moving])) and set(pairs[moving]) == set(pairs[fixed])
    assert len(pairs[fixed]) > 50_000
    assert (runs[moving]["events"].kind == "delta_move_done").sum() == 4
    pubs = runs[moving]["messages"].query("kind == 'pub'")
    across = [(sender, broker) for sender, broker in zip(pubs.sender, pubs.broker) if {sender, broker} == {"B0", "B21"}]
    assert across  # the last move's new link carries publications


@pytest.mark.slow
def test_relocation_moves_publishers_toward_their_subscribers(tmp_path):
    """The relocation paper's comparison on the test-sized enterprise scenarios: the same
    deliveries; GRAPE load 100 sends fewer publication copies than static placement, GRAPE
    delay 100 delivers sooner, over fewer hops."""
    figures = {}
    for setting in ("static", "grape_load", "grape_delay"):
        out = tmp_path / setting
        assert main(["run", str(SCENARIOS / f"relocation_small_enterprise_{setting}.yaml"), "--out", str(out)]) == 0
        messages, deliveries, events = (read_table(out, t).to_pandas() for t in ("messages", "deliveries", "events"))
        figures[setting] = {
            "pairs": set(zip(deliveries.pub_id, deliveries.sub_id)),
            "copies": ((messages.kind == "pub") & messages.t_end_us.notna()).sum(),
            "delay": (deliveries.t_deliver_us - deliveries.t_pub_us).mean(), "hops": deliveries.hops.mean(),
            "migrations": (events.kind == "publisher_migrated").sum(),
        }
    static, load, delay = figures["static"], figures["grape_load"], figures["grape_delay"]
    assert load["pairs"] == static["pairs"] == delay["pairs"] and len(static["pairs"]) > 1_000
    assert static["migrations"] == 0 and load["migrations"] > 0 and delay["migrations"] > 0
    assert load["copies"] < 0.8 * static["copies"]
    assert delay["delay"] < 0.8 * static["delay"] and delay["hops"] < static["hops"] - 0.5


@pytest.mark.ray
@pytest.mark.slow
def test_a_thousand_brokers_give_the_same_results_on_one_and_two_hosts(tmp_path, ray_session):
    tables = {}
    for hosts in (0, 2):
        out = tmp_path / f"hosts-{hosts}"
        assert main(["run", str(SCENARIOS / "scale_small_1000.yaml"), "--out", str(out),
                     "--set", f"runtime.hosts={hosts}"]) == 0
        tables[hosts] = {t: read_table(out, t).to_pandas() for t in ("deliveries", "messages")}
    assert len(tables[0]["deliveries"]) > 100
    for table, frame in tables[0].items():
        columns = sorted(frame.columns)
        ordered = lambda f: f[columns].sort_values(columns).reset_index(drop=True)  # noqa: E731
        assert ordered(tables[2][table]).equals(ordered(frame)), table
