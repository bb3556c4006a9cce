"""``pubsub-emu check``: a run's deliveries against the delivery oracle of its own scenario.

The oracle (workloads/oracle.py) says which subscriptions each publication reaches when every
operation takes effect the moment it is issued. A run is exact when its deliveries are those
pairs, each once, except where the contract lets them differ, and each exception is named:

- *subscription changing*: the publication was in flight while its subscription, or one that
  covers it, was being installed or withdrawn (from the subscribe or unsubscribe until the last
  message that operation set off, at any broker, was handled). A covering one counts because
  covering withholds a subscription behind one already sent that covers it: until the coverer
  arrives, neither routes the publication (protocols/covering.py);
- *advertisement changing*: likewise for an advertisement or unadvertisement of its publisher;
- *moving client*: likewise for a move of its subscriber or publisher (the handoff's
  unsettled window: protocols/broker.py, client moves);
- *fault*: the publication was in flight while a fault was active or its recovery (the
  messages the fault's end set off) was running;
- *in flight at the end*: a copy of the publication was still queued, in service or on a
  link when the run ended (the run records these: ``in_flight``), and none was dropped;
- *held back at the end*: its publisher was paused (a migration under way) or its broker
  down when the run ended, so it had not entered the network.

Publications the workload would have made after the run's end (a run cut by ``duration``)
are not expected; the result counts them (``not_published``).

A publication is in flight from its publish time until the last broker that handled a copy
finished it. Which messages an operation set off is the ``origin`` column of ``messages``: the
trace sequence number of the client operation whose handling sent it, hop after hop (a fault's
recovery: minus one minus the fault's number). Nothing else is excused: a publication dropped
by a full mailbox or lost with a broker outside a fault is missing, and a duplicate is always
reported.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from actors.results import has_table, read_table, read_table_in_batches
from actors.results import write_expected as write_expected_table
from actors.storage import RunDir
from protocols.errors import InputError
from protocols.index import FilterIndex
from protocols.language import matches
from workloads.oracle import in_oracle_order, of_kind, reached_by_publication

EXCUSES = ("fault", "moving client", "subscription changing", "advertisement changing", "in flight at the end",
           "held back at the end")
EXAMPLES = 5


@dataclass
class RunData:
    """What ``check`` reads of a run besides its deliveries: the operations it came to, in the
    oracle's order (``workloads.oracle.in_oracle_order``), and their publications and
    subscriptions, numbered in that order."""

    run_dir: RunDir
    manifest: dict
    ordered: list  # the operations the run came to
    publications: list
    subscriptions: list
    injections: list  # all the workload's, by trace sequence number
    not_published: int  # publications the workload would have made after the run ended

    def issued(self, injection) -> bool:
        return _issued(self.manifest, injection)

    @cached_property
    def pub_ids(self) -> pa.Array:
        return _ids(self.publications)

    @cached_property
    def sub_ids(self) -> pa.Array:
        """The subscriptions' ids, a subscription's at its number (a trace never reuses one)."""
        return _ids(self.subscriptions)

    @property
    def width(self) -> int:
        """A pair's code is its publication's number times this, plus its subscription's."""
        return max(len(self.subscriptions), 1)

    def reached(self, asked: np.ndarray | None = None) -> Iterator[np.ndarray | None]:
        """The oracle: per publication, in order, the numbers of the subscriptions it reaches
        (of those ``asked``: ``workloads.oracle.reached_by_publication``)."""
        return reached_by_publication(self.ordered, self.manifest["scenario"]["protocol"].get("check_conformance", True),
                                      asked)


def _issued(manifest: dict, injection) -> bool:
    """Whether the run came to this operation (a run cut by ``duration`` stops before its time)."""
    return manifest["scenario"].get("duration") is None or injection.t_us < manifest["sim_end_us"]


def run_directories(paths: list[str]) -> list[RunDir]:
    """The run directories at ``paths``: runs (directories or URIs), or sweep and figure
    directories, which stand for their complete runs."""
    from experiments.sweep import run_dirs

    found = []
    for path in paths:
        for run in run_dirs(path):
            try:
                run_dir = RunDir(run)
            except ValueError as exc:
                raise InputError(f"{run}: {exc}") from None
            if not run_dir.is_file("manifest.json"):
                raise InputError(f"{run}: not a run directory (no manifest.json), nor a sweep or figure directory")
            found.append(run_dir)
    return found


def load_run(run_dir: RunDir, injections: list | None = None) -> RunData:
    """A complete run's manifest and the workload its scenario builds (or ``injections``, the
    workload the run was given, where the caller holds it), in the oracle's order."""
    from experiments.build import rebuild_workload

    try:
        manifest = run_dir.read_json("manifest.json")
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir.path('manifest.json')}: not readable JSON ({exc})") from None
    if manifest.get("status") != "complete":
        raise InputError(f"{run_dir}: run status is {manifest.get('status')!r}, not 'complete': nothing to check")
    messages = run_dir.names("messages", "part-*.parquet")
    if messages and "origin" not in run_dir.read_schema(f"messages/{messages[0]}").names:
        raise InputError(f"{run_dir}: the run predates `check` (its messages have no origin column): run it again")
    if injections is None:
        _, injections = rebuild_workload(manifest, str(run_dir.path("manifest.json")))
    issued = in_oracle_order([i for i in injections if _issued(manifest, i)])
    publications = of_kind(issued, "pub")
    not_published = sum(i.message.kind == "pub" for i in injections) - len(publications)
    return RunData(run_dir, manifest, issued, publications, of_kind(issued, "sub"), injections, not_published)


PAIRS_AT_ONCE = 100_000_000  # pairs (delivered and expected) compared at once: about 4 GB


def check(run_dir: RunDir, injections: list | None = None, keep_expected: bool = False,
          batch_rows: int = 4_000_000, pairs_at_once: int = PAIRS_AT_ONCE) -> dict:
    """The check of one run as a JSON-able mapping (``exact``, and per kind of difference its
    count, counts by publication time and the first examples); ``injections``: the run's
    workload, where the caller still holds it. ``keep_expected``: also give the run its
    ``expected`` table where it has none (``write_expected``). The deliveries are read
    ``batch_rows`` at a time, and compared ``pairs_at_once`` pairs at a time (``check_loaded``)."""
    return check_loaded(load_run(run_dir, injections), keep_expected, batch_rows, pairs_at_once)


def check_loaded(data: RunData, keep_expected: bool = False, batch_rows: int = 4_000_000,
                 pairs_at_once: int = PAIRS_AT_ONCE) -> dict:
    """``check`` of a loaded run. Memory goes with the publications and the pairs that differ,
    not with every pair: one pass over the deliveries tallies each publication's (``Tally``),
    the oracle walks the publications one at a time against it (``tally_oracle``), and only the
    publications whose tallies differ are compared pair by pair, ``pairs_at_once`` pairs or so
    at a time: per group of them, the oracle's pairs made again and their deliveries read from
    the rows that can hold them."""
    tally = tally_deliveries(data, batch_rows)
    counts, differing = tally_oracle(data, tally)
    if keep_expected:
        write_expected(data, counts)
    with _progress(data, "publications that differ", len(differing), "publications") as progress:
        differences = []
        for group in _groups(differing, tally.count + counts, pairs_at_once):
            differences.append(compare_pairs(oracle_codes(data, group), read_delivered(data, tally, group, batch_rows)))
            progress.update(len(group))
    return report(data, tally, counts, differing, Differences.of_groups(differences), batch_rows)


def write_expected(data: RunData, counts: np.ndarray | None = None) -> None:
    """The run's ``expected`` table, how many pairs the oracle says each publication the run
    made owes (``counts``, where the caller has them), where the run has none (a run with
    faults writes its own): the analysis measures what a run offered its brokers from it (the
    share delivered, the backlog)."""
    if has_table(data.run_dir, "expected"):
        return
    if counts is None:
        counts = np.array([len(reached) for reached in data.reached()], np.int64)
    write_expected_table(data.run_dir, [(i.message.id, i.t_us, n) for i, n in
                                        zip(data.publications, counts.tolist())])


@dataclass
class Tally:
    """Per publication, its delivery rows that name a publication and a subscription the
    oracle knows: how many, a digest of their subscriptions, the sum of their delays and the
    first and last publication time they carry; and the rows that name others, and how many
    rows in all. The digest is the sum, mod 2^64, of each row's subscription number scrambled
    (``_scrambled``): the same for the same multiset of subscriptions, and for a different one
    the same only by a chance of about 2^-64."""

    count: np.ndarray
    digest: np.ndarray
    delay_us: np.ndarray
    first_t_pub_us: np.ndarray
    last_t_pub_us: np.ndarray
    unknown: pa.Table
    rows: int


def tally_deliveries(data: RunData, batch_rows: int = 4_000_000) -> Tally:
    """One pass over the run's ``deliveries``, ``batch_rows`` at a time."""
    scrambled = _scrambled(len(data.subscriptions))
    n = len(data.publications)
    tally = Tally(np.zeros(n, np.int64), np.zeros(n, np.uint64), np.zeros(n, np.int64),
                  np.full(n, np.iinfo(np.int64).max), np.full(n, np.iinfo(np.int64).min), None, 0)
    unknown = []
    with _progress(data, "deliveries") as progress:
        for batch in read_table_in_batches(data.run_dir, "deliveries",
                                           ["pub_id", "sub_id", "t_pub_us", "t_deliver_us"], batch_rows):
            _tally_batch(tally, batch, data, scrambled, unknown)
            progress.update(batch.num_rows)
    tally.unknown = pa.concat_tables(unknown) if unknown else pa.table(
        {"pub_id": pa.array([], pa.string()), "sub_id": pa.array([], pa.string())})
    return tally


def _tally_batch(tally: Tally, batch: pa.Table, data: RunData, scrambled: np.ndarray, unknown: list) -> None:
    """Add a batch of delivery rows to ``tally`` (those naming what the oracle does not know to
    ``unknown``)."""
    pub, sub = positions(batch["pub_id"], data.pub_ids), positions(batch["sub_id"], data.sub_ids)
    known = (pub >= 0) & (sub >= 0)
    if not known.all():
        unknown.append(batch.select(["pub_id", "sub_id"]).filter(pa.array(~known)))
        pub, sub, batch = pub[known], sub[known], batch.filter(pa.array(known))
    t_pub = batch["t_pub_us"].to_numpy(zero_copy_only=False)
    tally.count += np.bincount(pub, minlength=len(tally.count))
    _by_publication(np.add, tally.digest, pub, scrambled[sub])
    _by_publication(np.add, tally.delay_us, pub, _delays(batch))
    _by_publication(np.minimum, tally.first_t_pub_us, pub, t_pub)
    _by_publication(np.maximum, tally.last_t_pub_us, pub, t_pub)
    tally.rows += int(known.size)


def _by_publication(ufunc: np.ufunc, totals: np.ndarray, pub: np.ndarray, values: np.ndarray) -> None:
    """``totals[pub[i]] = ufunc(totals[pub[i]], values[i])`` for every row (wrapping for unsigned
    sums), by the runs of rows of one publication: a broker writes a publication's deliveries
    together."""
    if not len(pub):
        return
    starts = np.flatnonzero(np.concatenate([[True], pub[1:] != pub[:-1]]))
    ufunc.at(totals, pub[starts], ufunc.reduceat(values.astype(totals.dtype, copy=False), starts))


def _scrambled(n: int) -> np.ndarray:
    """A 64-bit scramble (splitmix64's, one to one) of each of the numbers 0 .. n-1."""
    z = (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def tally_oracle(data: RunData, tally: Tally) -> tuple[np.ndarray, np.ndarray]:
    """Per publication the pairs the oracle expects; and the publications whose delivered rows
    differ from those pairs in number or digest, in order."""
    scrambled = _scrambled(len(data.subscriptions))
    counts = np.zeros(len(data.publications), np.int64)
    differing = []
    with _progress(data, "oracle", len(data.publications), "publications") as progress:
        for pub, reached in enumerate(data.reached()):
            counts[pub] = len(reached)
            if len(reached) != tally.count[pub] or scrambled[reached].sum() != tally.digest[pub]:
                differing.append(pub)
            progress.update()
    return counts, np.array(differing, np.int64)


def _groups(pubs: np.ndarray, pairs: np.ndarray, pairs_at_once: int) -> list[np.ndarray]:
    """``pubs`` in consecutive groups of about ``pairs_at_once`` of their ``pairs`` each (one
    publication at least)."""
    if not len(pubs):
        return []
    before = np.cumsum(pairs[pubs]) - pairs[pubs]
    group = before // max(pairs_at_once, 1)
    return np.split(pubs, np.flatnonzero(np.diff(group)) + 1)


def oracle_codes(data: RunData, pubs: np.ndarray) -> np.ndarray:
    """The oracle's pairs of the publications numbered ``pubs`` (ascending) as codes
    (publication times the subscriptions plus subscription), sorted."""
    asked = np.zeros(len(data.publications), bool)
    asked[pubs] = True
    codes = [np.zeros(0, np.int64)]
    for pub, reached in enumerate(data.reached(asked)):
        if reached is not None:
            codes.append(pub * data.width + reached)
        if pub == pubs[-1]:
            break
    return np.concatenate(codes)


@dataclass
class Delivered:
    """The delivery rows of some publications that name a subscription the oracle knows: their
    pairs' codes (as ``oracle_codes``) and delays."""

    codes: np.ndarray
    delay_us: np.ndarray


def read_delivered(data: RunData, tally: Tally, pubs: np.ndarray, batch_rows: int = 4_000_000) -> Delivered:
    """The ``deliveries`` of the publications numbered ``pubs``, read from the row groups whose
    publication times can hold them (``tally`` has each one's first and last; none read when
    they have no rows)."""
    codes, delays = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if not tally.count[pubs].any():
        return Delivered(codes[0], delays[0])
    wanted_ids = _ids([data.publications[p] for p in pubs.tolist()])
    between = [("t_pub_us", ">=", int(tally.first_t_pub_us[pubs].min())),
               ("t_pub_us", "<=", int(tally.last_t_pub_us[pubs].max()))]
    for batch in read_table_in_batches(data.run_dir, "deliveries", ["pub_id", "sub_id", "t_pub_us", "t_deliver_us"],
                                       batch_rows, filters=between):
        which, sub = positions(batch["pub_id"], wanted_ids), positions(batch["sub_id"], data.sub_ids)
        kept = (which >= 0) & (sub >= 0)
        codes.append(pubs[which[kept]] * data.width + sub[kept])
        delays.append(_delays(batch)[kept])
    return Delivered(np.concatenate(codes), np.concatenate(delays))


@dataclass
class Differences:
    """Of the pairs compared: those missing, extra, and delivered more than once (with how many
    times each); and over the delivered rows the oracle expects, their delays' sum and number."""

    missing: np.ndarray
    extra: np.ndarray
    twice: np.ndarray
    times: np.ndarray
    delay_us: int
    delivered: int

    @staticmethod
    def of_groups(groups: list["Differences"]) -> "Differences":
        arrays = [np.concatenate([np.zeros(0, np.int64), *(getattr(g, name) for g in groups)])
                  for name in ("missing", "extra", "twice", "times")]
        return Differences(*arrays, sum(g.delay_us for g in groups), sum(g.delivered for g in groups))


def compare_pairs(wanted: np.ndarray, delivered: Delivered) -> Differences:
    """The differences between the oracle's pairs (``wanted``, sorted codes) and the rows
    ``delivered``: pairs are codes, so that the sets are compared by numpy."""
    codes = delivered.codes
    delivered_wanted = _members(wanted, codes)
    found, counts = np.unique(codes, return_counts=True)
    return Differences(wanted[~_members(found, wanted)], found[~_members(wanted, found)], found[counts > 1],
                       counts[counts > 1], int(delivered.delay_us[delivered_wanted].sum()), int(delivered_wanted.sum()))


def _progress(data: RunData, what: str, total: int | None = None, unit: str = "rows") -> tqdm:
    """A progress bar on a terminal (none elsewhere) for one stage of checking a run."""
    return tqdm(total=total, desc=f"check {data.run_dir.name}: {what}", unit=unit, unit_scale=True, file=sys.stderr,
                disable=not sys.stderr.isatty(), leave=False)


def _ids(injections: list) -> pa.Array:
    return pa.array([i.message.id for i in injections], pa.string())


def _delays(deliveries: pa.Table) -> np.ndarray:
    return pc.subtract(deliveries["t_deliver_us"], deliveries["t_pub_us"]).to_numpy(zero_copy_only=False)


def report(data: RunData, tally: Tally, counts: np.ndarray, differing: np.ndarray, found: Differences,
           batch_rows: int = 4_000_000) -> dict:
    """``check``'s result: the run's tallies, the oracle's ``counts`` and the differences
    ``found`` among the ``differing`` publications. Only the pairs that differ meet the
    exceptions (``Timing``, read only when there are any, ``batch_rows`` messages at a time)."""
    width = data.width
    end_us = int(data.manifest["sim_end_us"])
    pub_t = np.array([i.t_us for i in data.publications], np.int64)
    result = {
        "run": str(data.run_dir), "publications": len(data.publications), "subscriptions": len(data.subscriptions),
        "expected_pairs": int(counts.sum()), "deliveries": tally.rows,
        "not_published": data.not_published,
        "bucket_s": _bucket_s(end_us),
    }
    miss_p, miss_s = found.missing // width, found.missing % width
    extra_p, extra_s = found.extra // width, found.extra % width
    miss_excuse, drop_causes, still, extra_reason = _explained(data, batch_rows, miss_p, miss_s, extra_p, extra_s)
    result["missing"] = _section(data, pub_t, miss_p, miss_s, miss_excuse == "", drop_causes)
    wrong = np.array([not r.startswith("excused") for r in extra_reason.tolist()], bool)
    result["extra"] = _section(data, pub_t, extra_p, extra_s, wrong, extra_reason, tally.unknown)
    result["duplicate"] = _section(data, pub_t, found.twice // width, found.twice % width,
                                   np.ones(len(found.twice), bool), [f"delivered {n} times" for n in found.times.tolist()])
    excused = {name: int(np.sum(miss_excuse == name)) for name in EXCUSES}
    for name in EXCUSES:
        excused[name] += int(np.sum(extra_reason == f"excused: {name}"))
    result["excused"] = excused
    result["excused_by_time"] = {name: _by_time(pub_t[np.concatenate([miss_p[miss_excuse == name],
                                                                       extra_p[extra_reason == f"excused: {name}"]])],
                                                result["bucket_s"]) for name in EXCUSES if excused[name]}
    result["exact"] = not (result["missing"]["count"] or result["extra"]["count"] or result["duplicate"]["count"])
    agreeing = np.ones(len(data.publications), bool)
    agreeing[differing] = False
    result["delay"] = _delay(int(tally.delay_us[agreeing].sum()) + found.delay_us,
                             int(tally.count[agreeing].sum()) + found.delivered, end_us - pub_t[miss_p[still]])
    return result


def _explained(data: RunData, batch_rows: int, miss_p: np.ndarray, miss_s: np.ndarray, extra_p: np.ndarray,
               extra_s: np.ndarray) -> tuple:
    """Per missing pair its excuse ("" for none) and its publication's drop causes, which of
    them were still queued at the end (whatever excuse came first: a change in flight may name
    it before the end does), and per extra pair its reason; ``Timing`` is read only when
    some pair is missing or extra."""
    if not len(miss_p) and not len(extra_p):
        return np.zeros(0, object), [], np.zeros(0, bool), np.zeros(0, object)
    timing = Timing(data, batch_rows)
    still = (timing.pub_end[miss_p] >= timing.forever) & ~timing.pub_dropped[miss_p]
    return (timing.excuses(miss_p, miss_s, in_flight_counts=True), timing.drop_causes(miss_p), still,
            _extra_reasons(data, timing, extra_p, extra_s))


def _members(sorted_values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query, whether it is one of ``sorted_values``: by binary search, which holds no more
    than the queries' positions (``np.isin`` sorts a copy of both arrays together)."""
    if not len(sorted_values):
        return np.zeros(len(queries), bool)
    at = np.searchsorted(sorted_values, queries)
    np.minimum(at, len(sorted_values) - 1, out=at)
    return sorted_values[at] == queries


def _delay(delivered_us: int, delivered: int, waited_us: np.ndarray) -> dict:
    """The mean delay of the pairs the oracle expects and the run delivered (``delivered_us``
    over ``delivered``: each copy's, as the analysis counts them), and the same mean with each
    pair still in flight at the end counted as delivered at the end (``waited_us``: how long
    each had waited by then). A run that ends with a backlog leaves its slowest pairs out of
    the first, which then falls the more it leaves queued; the second is a lower bound on the
    mean over every pair the run owed."""
    in_flight_us = float(waited_us.sum())
    counted = delivered + len(waited_us)
    return {"delivered_mean_s": delivered_us / delivered / 1e6 if delivered else None,
            "in_flight_at_end": int(len(waited_us)),
            "mean_counting_in_flight_s": (delivered_us + in_flight_us) / counted / 1e6 if counted else None}


def positions(values, value_set: pa.Array) -> np.ndarray:
    """Each value's position in ``value_set``, -1 where it is not there."""
    return _ints(pc.index_in(values, value_set=value_set), -1).astype(np.int64)


def _ints(column, missing) -> np.ndarray:
    """A column as a numpy array, ``missing`` where it is null."""
    return pc.fill_null(column, missing).to_numpy(zero_copy_only=False)


def _max_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` (ascending) and each one's largest value."""
    if not len(keys):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    found, first = np.unique(keys[order], return_index=True)
    return found, np.maximum.reduceat(values[order], first)


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of arrays, each of the two concatenated."""
    return (np.concatenate([np.zeros(0, np.int64), *(k for k, _ in parts)]),
            np.concatenate([np.zeros(0, np.int64), *(v for _, v in parts)]))


class Timing:
    """When each publication was in flight, and the unsettled windows of the operations and
    faults that excuse a difference, read from the run's ``messages`` (``batch_rows`` at a
    time), ``in_flight`` and ``events``."""

    def __init__(self, data: RunData, batch_rows: int = 4_000_000) -> None:
        self.data = data
        self._all_subscriptions: FilterIndex | None = None  # every subscription's filter, made when first asked
        self._coverers_of: dict[int, np.ndarray] = {}  # subscription -> those covering it, as asked
        run_dir, manifest = data.run_dir, data.manifest
        self.end_us = int(manifest["sim_end_us"])
        self.forever = self.end_us + 1  # an end beyond the run: still in flight when it ended
        self.pub_start = np.array([i.t_us for i in data.publications], np.int64)
        self.pub_end = self.pub_start.copy()
        self.dropped_causes: dict[int, set[str]] = {}
        self._is_advertising = np.array([i.message.kind in ("adv", "unadv") for i in data.injections] + [False], bool)
        settling, routing = [], []  # per batch: (origin, end) and (subscription, advertisement, end), reduced
        columns = ["kind", "msg_id", "t_arrive_us", "t_end_us", "dropped", "cause", "origin"]
        with _progress(data, "messages") as progress:
            for messages in read_table_in_batches(run_dir, "messages", columns, batch_rows):
                ends = self._ends(messages)
                self._copies_done(messages, ends)
                settling.append(self._settling(messages, ends))
                routing.append(self._routing(messages, ends))
                progress.update(messages.num_rows)
        in_flight = read_table(run_dir, "in_flight", ["kind", "msg_id", "t_arrive_us", "origin"])
        self._copies_waiting(in_flight)
        still = _ints(in_flight["origin"].drop_null(), 0).astype(np.int64)  # their operations are not settled
        settling.append(_max_by_key(still, np.full(len(still), self.forever, np.int64)))
        routing.append(self._routing(in_flight, np.full(in_flight.num_rows, self.forever, np.int64)))
        self.pub_dropped = np.zeros(len(data.publications), bool)
        self.pub_dropped[list(self.dropped_causes)] = True
        self._windows(dict(zip(*(a.tolist() for a in _max_by_key(*_joined(settling))))), _joined(routing))

    # ------------------------------------------------------------------ publications

    def _copies_done(self, messages: pa.Table, ends: np.ndarray) -> None:
        """When each publication's copies among ``messages`` were done with, and the causes of
        those dropped."""
        is_copy = _ints(pc.equal(messages["kind"], "pub"), False)
        copies, ends = messages.filter(pa.array(is_copy)), ends[is_copy]
        which = positions(copies["msg_id"], self.data.pub_ids)
        ok = which >= 0
        np.maximum.at(self.pub_end, which[ok], ends[ok])
        dropped = _ints(copies["dropped"], False) & ok
        causes = copies["cause"].filter(pa.array(dropped)).to_pylist()
        for p, cause in zip(which[dropped].tolist(), causes):
            self.dropped_causes.setdefault(p, set()).add(cause or "dropped")

    def _copies_waiting(self, in_flight: pa.Table) -> None:
        """Publications with a copy on a link at the end are in flight after it; those whose
        client still held them were not let into the network (``pub_held``)."""
        waiting = in_flight.filter(pc.equal(in_flight["kind"], "pub"))
        late = positions(waiting["msg_id"], self.data.pub_ids)
        on_link = _ints(pc.is_valid(waiting["t_arrive_us"]), False)
        self.pub_end[late[(late >= 0) & on_link]] = self.forever
        self.pub_held = np.zeros(len(self.data.publications), bool)
        self.pub_held[late[(late >= 0) & ~on_link]] = True

    def _ends(self, rows: pa.Table) -> np.ndarray:
        """Per message row, when its broker was done with it: its service's end, its arrival
        for a dropped one, after the run for one queued or in service when it ended (a service
        that ends at the run's end has not taken effect: its completion is not run)."""
        end = _ints(rows["t_end_us"], self.forever)
        end = np.where(_ints(rows["dropped"], False), _ints(rows["t_arrive_us"], 0), end)
        return np.where(end >= self.end_us, self.forever, end)

    def drop_causes(self, pubs: np.ndarray) -> list[str]:
        """Per publication, what became of copies that never arrived, or ''."""
        return ["dropped: " + ", ".join(sorted(self.dropped_causes[p])) if p in self.dropped_causes else ""
                for p in pubs.tolist()]

    # ------------------------------------------------------------------ windows

    def _settling(self, messages: pa.Table, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per operation (its trace sequence number; a fault's recovery: minus one minus its
        number) that set off some of these messages other than publications, the last end."""
        caused = _ints(pc.and_(pc.is_valid(messages["origin"]), pc.not_equal(messages["kind"], "pub")), False)
        return _max_by_key(_ints(messages["origin"], 0)[caused].astype(np.int64), ends[caused])

    def _routing(self, rows: pa.Table, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A subscription is also being installed while an advertisement's arrival sends it on
        toward the new publisher (its rows with that advertisement's origin): per subscription
        and advertisement among ``rows`` (as a key: subscription number times the trace's
        length plus one, plus the advertisement's sequence number), the last end. Under
        congestion that can be long after the subscription was made."""
        width = len(self.data.injections) + 1
        origin = _ints(rows["origin"], -1).astype(np.int64)
        by_advertisement = np.where((origin >= 0) & (origin < width - 1), origin, width - 1)
        keep = self._is_advertising[by_advertisement] & _ints(pc.is_in(rows["kind"], pa.array(["sub", "unsub"])),
                                                               False)
        sub = positions(rows["msg_id"].filter(pa.array(keep)), self.data.sub_ids)
        known = sub >= 0
        return _max_by_key(sub[known] * width + origin[keep][known], ends[keep][known])

    def _windows(self, settled: dict[int, int], routed: tuple[np.ndarray, np.ndarray]) -> None:
        """The unsettled windows, keyed by subscription (its own operations, and advertisements
        sending it on: ``routed``, from ``_routing``) and by client (advertisement changes,
        moves), and the fault windows; ``settled``: per operation, when the last message it set
        off was done with."""
        injections = self.data.injections
        number_of_sub = {i.message.id: n for n, i in enumerate(self.data.subscriptions)}
        by_sub, by_client, moves = [], [], []
        for seq, injection in enumerate(injections):
            message = injection.message
            kind = message.kind
            if kind == "pub" or not self.data.issued(injection):
                continue
            window = (injection.t_us, max(settled.get(seq, injection.t_us), injection.t_us))
            if kind in ("sub", "unsub"):
                by_sub.append((number_of_sub[message.id], *window))
            elif kind in ("adv", "unadv"):
                by_client.append((message.client, *window))
            else:  # detach, attach: a move
                moves.append((message.client, *window))
        clients = sorted({c for c, *_ in by_client + moves} | {i.message.client for i in injections})
        self.client_number = {c: n for n, c in enumerate(clients)}
        keys, last = _max_by_key(*routed)
        width = len(injections) + 1
        by_sub += [(s, injections[o].t_us, e) for s, o, e in zip((keys // width).tolist(), (keys % width).tolist(),
                                                                  last.tolist())]
        self.sub_windows = Windows(by_sub, self.forever)
        self.adv_windows = Windows([(self.client_number[c], s, e) for c, s, e in by_client], self.forever)
        self.move_windows = Windows([(self.client_number[c], s, e) for c, s, e in moves], self.forever)
        self.fault_windows = Windows([(0, s, max(e, settled.get(-1 - n, e))) for n, s, e in self._faults()],
                                     self.forever)

    def _faults(self) -> list[tuple[int, int, int]]:
        """(fault number, start, end) of every fault the run recorded (an end after the run
        for one still active)."""
        events = read_table(self.data.run_dir, "events", ["t_us", "kind", "detail"])
        started, ended = {}, {}
        for t, kind, detail in zip(*(events[c].to_pylist() for c in ("t_us", "kind", "detail"))):
            if kind in ("fault_started", "fault_ended"):
                number = json.loads(detail)["fault"]
                (started if kind == "fault_started" else ended)[number] = t
        return [(n, t, ended.get(n, self.forever)) for n, t in sorted(started.items())]

    def excuses(self, pubs: np.ndarray, subs: np.ndarray, in_flight_counts: bool) -> np.ndarray:
        """Per pair, the first exception (``EXCUSES``) that covers it, or ''."""
        reason = np.full(len(pubs), "", object)
        if not len(pubs):
            return reason
        start, end = self.pub_start[pubs], self.pub_end[pubs]
        data = self.data
        number = self.client_number
        subscriber = np.array([number[data.subscriptions[s].message.client] for s in subs.tolist()], np.int64)
        publisher = np.array([number[data.publications[p].message.client] for p in pubs.tolist()], np.int64)
        tests = [
            ("fault", self.fault_windows.overlap(np.zeros(len(pubs), np.int64), start, end)),
            ("moving client", self.move_windows.overlap(subscriber, start, end)
             | self.move_windows.overlap(publisher, start, end)),
            ("subscription changing", self.sub_windows.overlap(subs, start, end)),
            ("advertisement changing", self.adv_windows.overlap(publisher, start, end)),
        ]
        if in_flight_counts:
            tests.append(("in flight at the end", (end >= self.forever) & ~self.pub_dropped[pubs]))
            tests.append(("held back at the end", self.pub_held[pubs] & ~self.pub_dropped[pubs]))
        undecided = ~np.logical_or.reduce([hit for _, hit in tests])  # a covering one's change: the last resort
        tests[2] = ("subscription changing", tests[2][1] | self._coverer_changing(subs, start, end, undecided))
        for name, hit in reversed(tests):
            reason[hit] = name
        return reason

    def _coverer_changing(self, subs: np.ndarray, start: np.ndarray, end: np.ndarray,
                          undecided: np.ndarray) -> np.ndarray:
        """Per pair (only the ``undecided`` ones are looked at): another subscription that covers
        the pair's was being installed or withdrawn while the publication was in flight."""
        hit = np.zeros(len(subs), bool)
        for i in np.flatnonzero(undecided).tolist():
            coverers = self._coverers(int(subs[i]))
            if len(coverers):
                hit[i] = self.sub_windows.overlap(coverers, np.full(len(coverers), start[i]),
                                                  np.full(len(coverers), end[i])).any()
        return hit

    def _coverers(self, sub: int) -> np.ndarray:
        """The numbers of the other subscriptions whose filters cover ``sub``'s."""
        if sub in self._coverers_of:
            return self._coverers_of[sub]
        if self._all_subscriptions is None:
            self._all_subscriptions = FilterIndex()
            for n, injection in enumerate(self.data.subscriptions):
                self._all_subscriptions.add(n, injection.message.filter)
        found = self._all_subscriptions.covering(self.data.subscriptions[sub].message.filter)
        self._coverers_of[sub] = np.array(sorted(n for n in found if n != sub), np.int64)
        return self._coverers_of[sub]


class Windows:
    """Time windows per key; ``overlap`` says which [start, end] intervals meet one of their
    key's windows (vectorised: windows sorted by key and start, a running maximum of ends)."""

    def __init__(self, windows: list[tuple[int, int, int]], forever: int) -> None:
        self.span = forever + 1
        found = np.array(windows, np.int64).reshape(-1, 3)
        found = found[np.lexsort((found[:, 1], found[:, 0]))]
        self.keys = found[:, 0]
        base = self.keys * self.span
        self.starts = base + np.minimum(found[:, 1], forever)
        self.ends = np.maximum.accumulate(base + np.minimum(found[:, 2], forever)) if len(found) else base

    def overlap(self, keys: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        if not len(self.keys):
            return np.zeros(len(keys), bool)
        base = keys * self.span
        last = np.searchsorted(self.starts, base + end, side="right") - 1
        at = np.maximum(last, 0)
        return (last >= 0) & (self.keys[at] == keys) & (self.ends[at] >= base + start)


def _extra_reasons(data: RunData, timing: Timing, pubs: np.ndarray, subs: np.ndarray) -> np.ndarray:
    """Per delivered pair the oracle does not expect: why it is wrong ('does not match',
    'subscription not present', 'publication not advertised'), or 'excused: ...' when the
    subscription or its publisher's advertisements were changing while it was in flight."""
    reasons = np.full(len(pubs), "", object)
    excuse = timing.excuses(pubs, subs, in_flight_counts=False)
    for i, (p, s) in enumerate(zip(pubs.tolist(), subs.tolist())):
        publication = data.publications[p].message.publication
        if not matches(data.subscriptions[s].message.filter, publication):
            reasons[i] = "does not match"
        elif excuse[i]:
            reasons[i] = f"excused: {excuse[i]}"
        else:
            reasons[i] = "subscription not present or publication not advertised when published"
    return reasons


def _section(data: RunData, pub_t: np.ndarray, pubs: np.ndarray, subs: np.ndarray, counted: np.ndarray,
             reasons, unknown: pa.Table | None = None) -> dict:
    """One kind of difference: the pairs ``counted`` (the others are excused), by
    publication time, with the first examples (earliest publications first)."""
    counted = np.asarray(counted, bool)
    reasons = np.asarray(reasons, object) if len(pubs) else np.zeros(0, object)
    pubs, subs, reasons = pubs[counted], subs[counted], reasons[counted]
    bucket_s = _bucket_s(int(data.manifest["sim_end_us"]))
    order = np.lexsort((subs, pub_t[pubs]))[:EXAMPLES]
    examples = [{"pub_id": data.publications[p].message.id, "sub_id": data.subscriptions[s].message.id,
                 "t_pub_s": pub_t[p] / 1e6, **({"why": r} if r and not r.startswith("excused") else {})}
                for p, s, r in zip(pubs[order].tolist(), subs[order].tolist(), reasons[order].tolist())]
    count = int(len(pubs))
    times = pub_t[pubs]
    if unknown is not None and unknown.num_rows:
        count += unknown.num_rows
        rows = unknown.slice(0, EXAMPLES).to_pylist()
        examples += [{"pub_id": r["pub_id"], "sub_id": r["sub_id"], "why": "no such publication or subscription"}
                     for r in rows][:max(0, EXAMPLES - len(examples))]
    section = {"count": count, "by_time": _by_time(times, bucket_s), "examples": examples}
    why = [r for r in reasons.tolist() if r]
    if why:
        section["why"] = {r: why.count(r) for r in sorted(set(why))}
    return section


def _bucket_s(end_us: int) -> float:
    """A round bucket width (1, 2 or 5 times a power of ten seconds) giving at most 20 buckets."""
    target = max(end_us / 1e6 / 20, 1e-3)
    power = 10 ** math.floor(math.log10(target))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= target)


def _by_time(times_us: np.ndarray, bucket_s: float) -> list[list]:
    """[[bucket start in seconds, count], ...] of the buckets that hold any."""
    if not len(times_us):
        return []
    buckets, counts = np.unique((np.asarray(times_us) / 1e6 // bucket_s).astype(np.int64), return_counts=True)
    return [[round(b * bucket_s, 6), int(n)] for b, n in zip(buckets.tolist(), counts.tolist())]


# ---------------------------------------------------------------------- the report

def summary_line(result: dict) -> str:
    """One line: exact (with what was excused) or what differed."""
    excused = {k: v for k, v in result["excused"].items() if v}
    excused_text = "; excused: " + ", ".join(f"{v:,} {k}" for k, v in excused.items()) if excused else ""
    head = f"{result['expected_pairs']:,} pairs expected, {result['deliveries']:,} delivered"
    if result["exact"]:
        return f"exact ({head}{excused_text})"
    parts = [f"{result[k]['count']:,} {k}" for k in ("missing", "extra", "duplicate") if result[k]["count"]]
    return f"NOT exact: {', '.join(parts)} ({head}{excused_text})"


def format_report(result: dict) -> str:
    lines = [f"{result['run']}: {summary_line(result)}"]
    delay = result.get("delay") or {}
    if delay.get("in_flight_at_end") and delay.get("delivered_mean_s") is not None:
        lines.append(f"  mean delay {delay['delivered_mean_s']:.4g} s over the pairs delivered; counting the "
                     f"{delay['in_flight_at_end']:,} in flight at the end as delivered then, at least "
                     f"{delay['mean_counting_in_flight_s']:.4g} s")
    for kind in ("missing", "extra", "duplicate"):
        section = result[kind]
        if not section["count"]:
            continue
        lines.append(f"  {kind}: {section['count']:,}")
        for why, n in section.get("why", {}).items():
            lines.append(f"    {n:,} {why}")
        by_time = ", ".join(f"{t:g}s: {n:,}" for t, n in section["by_time"])
        lines.append(f"    by publication time ({result['bucket_s']:g} s buckets): {by_time}")
        for e in section["examples"]:
            at = f" published at {e['t_pub_s']:g} s" if "t_pub_s" in e else ""
            why = f" ({e['why']})" if "why" in e else ""
            lines.append(f"    e.g. {e['pub_id']} -> {e['sub_id']}{at}{why}")
    return "\n".join(lines)


def main(paths: list[str], as_json: bool) -> int:
    results = [check(run_dir) for run_dir in run_directories(paths)]
    exact = all(r["exact"] for r in results)
    if as_json:
        print(json.dumps({"exact": exact, "runs": results}, indent=2))
    else:
        print("\n".join(format_report(r) for r in results))
    return 0 if exact else 1
