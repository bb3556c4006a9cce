"""``pubsub-emu check``: a run's deliveries against the oracle of its own scenario, with the
contract's exceptions (moves, faults, changes in flight, the end of the run) and nothing more."""
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from actors.results import SCHEMAS, read_table
from experiments.cli import main

PUBLISHED_FROM, PUBLISHED_UNTIL, MOVE_AT = 1.0, 9.0, 5.0


def trace(move: bool = True, burst: int = 0) -> list[dict]:
    """Two publishers at the ends of a line of six brokers, three subscribers; publications
    every 20 ms from 1 s to 9 s while S2's client moves from B1 to B5 at 5 s (its new
    subscription takes about 100 ms to reach B0, and P0's publications meanwhile miss it)."""
    records = [
        {"t": 0.0, "op": "advertise", "client": "P0", "broker": "B0", "id": "A0", "filter": "[x,>,0]"},
        {"t": 0.0, "op": "advertise", "client": "P1", "broker": "B5", "id": "A1", "filter": "[x,>,0]"},
        {"t": 0.2, "op": "subscribe", "client": "C1", "broker": "B2", "id": "S1", "filter": "[x,>,10]"},
        {"t": 0.2, "op": "subscribe", "client": "C2", "broker": "B1", "id": "S2", "filter": "[x,>,0]"},
        {"t": 0.2, "op": "subscribe", "client": "C3", "broker": "B1", "id": "S3", "filter": "[x,<,50]"},
    ]
    t, n = PUBLISHED_FROM, 0
    while t < PUBLISHED_UNTIL:
        if move and abs(t - MOVE_AT) < 1e-9:
            records.append({"t": round(t, 6), "op": "move", "client": "C2", "broker": "B5"})
        records.append({"t": round(t, 6), "op": "publish", "client": f"P{n % 2}", "id": f"M{n}",
                        "content": f"[x,{n % 97 + 1}]"})
        t, n = t + 0.02, n + 1
    records += [{"t": PUBLISHED_UNTIL, "op": "publish", "client": "P0", "id": f"burst{i}", "content": "[x,20]"}
                for i in range(burst)]
    return records


def scenario(**changes) -> dict:
    found = {
        "name": "checked", "seed": 1, "duration": "12s",
        "topology": {"generator": {"name": "line", "n": 6}, "link": {"latency": "20ms"}},
        "workload": {"trace": "ops.jsonl"},
        "runtime": {"hosts": 0, "costs": "padres", "sample_interval": "1s"},
    }
    found.update(changes)
    return found


def run(write_scenario, tmp_path, name: str = "run", records=None, **changes):
    text = "\n".join(json.dumps(r) for r in (records or trace()))
    path = write_scenario(scenario(**changes), {"ops.jsonl": text}, name=f"{name}.yaml")
    out = tmp_path / name
    assert main(["run", str(path), "--out", str(out)]) == 0
    return out


def checked(capsys, *run_dirs) -> tuple[int, dict]:
    capsys.readouterr()
    status = main(["check", *map(str, run_dirs), "--json"])
    return status, json.loads(capsys.readouterr().out)


def with_deliveries(run_dir, tmp_path, change) -> object:
    """A copy of ``run_dir`` whose deliveries are ``change(rows)``."""
    copy = tmp_path / f"{run_dir.name}-edited"
    shutil.copytree(run_dir, copy)
    rows = change(read_table(run_dir, "deliveries").to_pylist())
    shutil.rmtree(copy / "deliveries")
    (copy / "deliveries").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS["deliveries"]), copy / "deliveries" / "part-0.parquet")
    return copy


def test_a_run_with_a_moving_subscriber_is_exact_and_its_move_is_the_only_excuse(write_scenario, tmp_path, capsys):
    out = run(write_scenario, tmp_path)
    status, result = checked(capsys, out)
    (report,) = result["runs"]
    assert status == 0 and result["exact"] and report["exact"]
    assert report["expected_pairs"] > 500 and report["publications"] == 401
    excused = {k: v for k, v in report["excused"].items() if v}
    assert set(excused) == {"moving client"} and 0 < excused["moving client"] < 30
    assert main(["check", str(out)]) == 0
    assert "exact" in capsys.readouterr().out


def test_planted_missing_extra_and_duplicate_deliveries_are_counted_with_examples(write_scenario, tmp_path, capsys):
    out = run(write_scenario, tmp_path)
    rows = read_table(out, "deliveries").to_pylist()
    settled = [r for r in rows if r["sub_id"] == "S1" and r["t_pub_us"] > 7_000_000]
    lost, doubled = settled[0], settled[1]
    # M1 carries x=2: S1 (x > 10) does not match it; S3 was never a subscription of this run
    wrong = dict(lost, pub_id="M1", sub_id="S1", t_pub_us=1_020_000)
    unknown = dict(lost, sub_id="S9")

    def plant(found):
        return [r for r in found if r != lost] + [doubled, wrong, unknown]

    status, result = checked(capsys, with_deliveries(out, tmp_path, plant))
    (report,) = result["runs"]
    assert status == 1 and not result["exact"]
    assert report["missing"]["count"] == 1 and report["missing"]["examples"][0]["pub_id"] == lost["pub_id"]
    assert report["bucket_s"] == 1 and report["missing"]["by_time"] == [[lost["t_pub_us"] // 1_000_000, 1]]
    assert report["duplicate"]["count"] == 1 and report["duplicate"]["examples"][0]["pub_id"] == doubled["pub_id"]
    assert report["extra"]["count"] == 2
    assert report["extra"]["why"] == {"does not match": 1}
    whys = {e.get("why") for e in report["extra"]["examples"]}
    assert whys == {"does not match", "no such publication or subscription"}


def test_a_delivery_swapped_for_another_subscription_of_the_same_publication_is_found(
        write_scenario, tmp_path, capsys):
    """The publication's deliveries keep their number; only their subscriptions differ (the
    tally's digest), and the pair-level comparison then names both pairs."""
    out = run(write_scenario, tmp_path)
    rows = read_table(out, "deliveries").to_pylist()
    # after the move settles, x <= 10 reaches S2 and S3 but not S1
    swapped = next(r for r in rows if r["sub_id"] == "S2" and r["t_pub_us"] > 7_000_000
                   and int(r["pub_id"][1:]) % 97 + 1 <= 10)
    status, result = checked(capsys, with_deliveries(out, tmp_path, lambda found: [
        dict(r, sub_id="S1") if r == swapped else r for r in found]))
    (report,) = result["runs"]
    assert status == 1 and report["deliveries"] == len(rows)
    assert report["missing"]["count"] == 1 and report["missing"]["examples"][0]["sub_id"] == "S2"
    assert report["extra"]["count"] == 1 and report["extra"]["why"] == {"does not match": 1}
    assert report["extra"]["examples"][0]["pub_id"] == swapped["pub_id"]


def test_deliveries_read_a_few_parts_at_a_time_and_compared_a_few_publications_at_a_time_are_checked_as_at_once(write_scenario, tmp_path):
    from actors.storage import RunDir
    from experiments.check import check

    out = run(write_scenario, tmp_path)
    rows = read_table(out, "deliveries").to_pylist()
    rows = rows[:-40] + [dict(rows[0], sub_id="S9"), rows[5]] + rows[-40:]  # an unknown and a duplicate, mid-table
    lost = next(r["pub_id"] for r in rows if r["t_pub_us"] > 7_000_000)
    lost_rows = sum(r["pub_id"] == lost for r in rows)
    rows = [r for r in rows if r["pub_id"] != lost]  # a publication with no rows: its group reads none
    whole = {"deliveries": pa.Table.from_pylist(rows, schema=SCHEMAS["deliveries"]), "messages": read_table(out, "messages")}

    def written_in_parts(size: int) -> None:
        for table, found in whole.items():
            shutil.rmtree(out / table)
            (out / table).mkdir()
            for n, start in enumerate(range(0, found.num_rows, size)):
                pq.write_table(found.slice(start, size), out / table / f"part-{n:05d}.parquet")

    written_in_parts(10 ** 9)
    at_once = check(RunDir(out))
    written_in_parts(100)
    in_batches = check(RunDir(out), batch_rows=150)  # the messages' windows too
    in_groups = check(RunDir(out), pairs_at_once=1)  # each differing publication compared on its own
    assert len(rows) > 600 and at_once["deliveries"] == len(rows)
    assert at_once["extra"]["count"] == 1 and at_once["duplicate"]["count"] == 1
    assert at_once["missing"]["count"] == lost_rows > 0
    assert at_once["excused"]["moving client"] == 2  # two more publications that differ, apart from the duplicate's
    assert in_batches == at_once and in_groups == at_once


def test_a_run_whose_messages_have_no_origin_column_predates_check_and_exits_2(write_scenario, tmp_path, capsys):
    out = run(write_scenario, tmp_path)
    messages = read_table(out, "messages").drop_columns(["origin"])
    shutil.rmtree(out / "messages")
    (out / "messages").mkdir()
    pq.write_table(messages, out / "messages" / "part-0.parquet")
    assert main(["check", str(out)]) == 2
    assert "predates `check`" in capsys.readouterr().err


def test_a_loss_outside_the_moves_window_is_missing_even_for_the_moving_client(write_scenario, tmp_path, capsys):
    """The move excuses the moving client's pairs while it moves, and nothing else: a lost
    delivery of its own two seconds later, or of another subscriber at the move, counts."""
    out = run(write_scenario, tmp_path)
    rows = read_table(out, "deliveries").to_pylist()
    later = next(r for r in rows if r["sub_id"] == "S2" and r["t_pub_us"] >= 7_000_000)
    other = next(r for r in rows if r["sub_id"] == "S3" and abs(r["t_pub_us"] - MOVE_AT * 1e6) < 50_000)
    status, result = checked(capsys, with_deliveries(out, tmp_path, lambda found: [
        r for r in found if r not in (later, other)]))
    (report,) = result["runs"]
    assert status == 1 and report["missing"]["count"] == 2
    assert {(e["pub_id"], e["sub_id"]) for e in report["missing"]["examples"]} == {
        (later["pub_id"], "S2"), (other["pub_id"], "S3")}


def test_a_mailbox_drop_is_missing_with_its_cause_and_a_cut_run_excuses_only_what_is_in_flight(
        write_scenario, tmp_path, capsys):
    """A one-message mailbox drops a burst of publications (missing, 'dropped: mailbox full'); a run cut at
    5 s while publications are on 20 ms links leaves the last ones in flight, and the run's
    ``in_flight`` table names them: excused, and only those."""
    dropping = run(write_scenario, tmp_path, "dropping", records=trace(burst=5),
                   runtime={"hosts": 0, "costs": "padres", "mailbox": {"capacity": 1}})
    status, result = checked(capsys, dropping)
    (report,) = result["runs"]
    assert status == 1 and report["missing"]["count"] > 0 and report["extra"]["count"] == 0
    assert set(report["missing"]["why"]) == {"dropped: mailbox full"}
    assert {e["pub_id"] for e in report["missing"]["examples"]} <= {f"burst{i}" for i in range(5)}
    cut = run(write_scenario, tmp_path, "cut", records=trace(move=False), duration="5s")
    in_flight = read_table(cut, "in_flight").to_pylist()  # copies between brokers, not operations still to come
    assert {r["kind"] for r in in_flight} == {"pub"} and all(r["t_arrive_us"] >= 5_000_000 for r in in_flight)
    assert all(r["sender"] is not None for r in in_flight)
    status, result = checked(capsys, cut)
    (report,) = result["runs"]
    assert status == 0 and report["excused"]["in flight at the end"] > 0
    assert report["not_published"] == sum(r["op"] == "publish" and r["t"] >= 5 for r in trace(move=False)) > 100
    assert set(k for k, v in report["excused"].items() if v) == {"in flight at the end"}
    assert sum(n for _, n in report["excused_by_time"]["in flight at the end"]) == report["excused"][
        "in flight at the end"]


def test_the_mean_delay_counting_pairs_in_flight_at_the_end_is_computed_from_the_oracle_pairs_left_out(
        write_scenario, tmp_path, capsys):
    """A run cut at 5 s leaves pairs in flight: the delay section's first mean is that of the
    delivered pairs, the second counts each pair left out as delivered at 5 s. Both are
    recomputed here from the trace's filters, not from the check's own sets. S4 subscribes
    at 4.95 s: its pairs still queued at the end are excused as its subscription changing
    (that excuse comes first), and still count as in flight."""
    late = {"t": 4.95, "op": "subscribe", "client": "C4", "broker": "B1", "id": "S4", "filter": "[x,>,0]"}
    records = sorted(trace(move=False) + [late], key=lambda r: r["t"])
    cut = run(write_scenario, tmp_path, "cut", records=records, duration="5s")
    status, result = checked(capsys, cut)
    (report,) = result["runs"]
    rows = read_table(cut, "deliveries").to_pylist()
    filters = {"S1": lambda x: x > 10, "S2": lambda x: x > 0, "S3": lambda x: x < 50}
    wanted = {(r["id"], s): round(r["t"] * 1e6) for r in records if r["op"] == "publish" and r["t"] < 5
              for s, matching in (filters | ({"S4": lambda x: x > 0} if r["t"] > late["t"] else {})).items()
              if matching(int(r["content"][3:-1]))}
    delivered = {(r["pub_id"], r["sub_id"]) for r in rows}
    left = [5_000_000 - t for pair, t in wanted.items() if pair not in delivered]
    waited = [r["t_deliver_us"] - r["t_pub_us"] for r in rows if (r["pub_id"], r["sub_id"]) in wanted]
    delay = report["delay"]
    assert {sub for _, sub in delivered - set(wanted)} <= {"S4"}  # reached S4 before the oracle's: excused extras
    assert status == 0 and report["excused"]["subscription changing"] > 0
    assert delay["in_flight_at_end"] == len(left) > report["excused"]["in flight at the end"] > 0
    assert main(["check", str(cut)]) == 0
    assert f"counting the {len(left):,} in flight at the end as delivered then, at least" in capsys.readouterr().out
    assert abs(delay["delivered_mean_s"] - sum(waited) / len(waited) / 1e6) < 1e-9
    assert abs(delay["mean_counting_in_flight_s"] - (sum(waited) + sum(left)) / (len(waited) + len(left)) / 1e6) < 1e-9


def test_what_is_not_a_complete_run_exits_2_naming_it(tmp_path, capsys, write_scenario):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "nothing", tmp_path / "empty"):
        assert main(["check", str(path)]) == 2
        assert f"{path}: not a run directory" in capsys.readouterr().err
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "manifest.json").write_text(json.dumps({"status": "failed", "scenario": {}}))
    assert main(["check", str(failed)]) == 2
    assert "run status is 'failed', not 'complete'" in capsys.readouterr().err


def test_a_publication_that_misses_a_subscription_withheld_behind_its_travelling_coverer_is_excused(
        write_scenario, tmp_path, capsys):
    """Lazy covering on a line: R (x > 0) leaves B5 toward the publisher at B0; C (x > 10),
    made at B4 after R went on from there, is withheld at B4 behind R. Publications from B0
    before R arrives reach neither. C had settled, but R, which covers it, was still being
    installed: excused as 'subscription changing', and nothing is missing."""
    records = [
        {"t": 0.0, "op": "advertise", "client": "P0", "broker": "B0", "id": "A0", "filter": "[x,>,0]"},
        {"t": 0.2, "op": "subscribe", "client": "CR", "broker": "B5", "id": "R", "filter": "[x,>,0]"},
        {"t": 0.25, "op": "subscribe", "client": "CC", "broker": "B4", "id": "C", "filter": "[x,>,10]"},
    ] + [{"t": round(0.26 + 0.01 * n, 6), "op": "publish", "client": "P0", "id": f"M{n}", "content": "[x,20]"}
         for n in range(30)]
    out = run(write_scenario, tmp_path, records=records, protocol={"covering": "lazy"})
    delivered = {(r["pub_id"], r["sub_id"]) for r in read_table(out, "deliveries").to_pylist()}
    withheld = read_table(out, "messages").to_pandas().query("msg_id == 'C'")
    assert list(withheld.broker) == ["B4"] and withheld.sent.tolist() == [0]  # withheld behind R
    settled_us = int(withheld.t_end_us.max())
    missed = [n for n in range(30) if ("M%d" % n, "C") not in delivered and 260_000 + 10_000 * n > settled_us]
    assert missed and ("M29", "C") in delivered  # the race happened, and R's arrival ended it
    status, result = checked(capsys, out)
    (report,) = result["runs"]
    assert status == 0 and report["missing"]["count"] == 0
    assert report["excused"]["subscription changing"] >= 2 * len(missed)  # R's pairs and C's


def test_the_oracle_leaves_the_workloads_publications_unencoded():
    """Matching caches a publication's encoding on it; the oracle matches copies, or a
    workload's millions of publications would each keep theirs while a run is checked."""
    from workloads.oracle import expected_pairs
    from workloads.trace import compile_trace

    records = trace()
    injections = compile_trace(records, {f"B{n}" for n in range(6)})
    expected = expected_pairs(injections)
    publications = [i.message.publication for i in injections if i.message.kind == "pub"]
    assert len(expected.pub) > 500 and len(publications) == 401
    assert all(p.encoded is None for p in publications)
