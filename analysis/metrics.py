"""The papers' metrics as Spark DataFrame aggregations over the tables of one or several runs.

Every function takes the DataFrames of ``runs.read_tables`` (all runs at once, told apart by
the ``run`` column) and returns a small aggregated DataFrame; only those are collected.
Times in results are seconds of virtual time (``*_s``); time buckets are labelled by their
start; a bucket's width (``width``) is the same for every run, or each run's own where runs of
several reports are analysed at once (``bucket_width``). Definitions a reader might wonder about:

- a publication copy is a ``pub`` row of ``messages`` (one per broker it reached, the
  publisher's own broker included); it is *processed* when the broker served it;
- a *pure forwarder* copy is a processed copy at a broker that delivered that publication to
  no local client; *yield* = processed copies that led to a local delivery / all processed;
- a copy received over the overlay link a->b is a *false positive* when no delivery of that
  publication happened at any broker beyond the link (b's side of the tree);
- queue peaks are the longest queues arriving messages found (``queue_len`` of ``messages``);
  *drain time* is how long after the peak the longest queue of any broker took to fall back to
  its level before the first client unsubscription (the burst), at bucket resolution; null if
  it never did. ``queue_over_time`` shows the queues at the samples instead.
"""
from __future__ import annotations

import networkx as nx
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis.runs import local_frame

US = 1_000_000
PROBE_PREFIX = "probe-"  # the ids the covering_degree workload gives its delay probes
# A join by broadcast ships the smaller side whole to every task, built in the driver: only below
# this many rows (the paper-size mobile runs' 9.3 million publishers outgrew the default 4-GB driver; a
# sort-merge join then costs a shuffle of the other side instead).
BROADCAST_ROWS = 1_000_000


def _publications(runs) -> int | None:
    """The publications ``runs`` injected, by their manifests (None: a manifest from before they
    recorded it)."""
    injected = [run.manifest.get("injected") for run in runs]
    if None in injected:
        return None
    return sum(int((kinds.get("pub") or {}).get("count") or 0) for kinds in injected)


def _delay_s():
    return (F.col("t_deliver_us") - F.col("t_pub_us")) / US


def _delay_stats(groups: DataFrame, keys: list, means: tuple = ()) -> DataFrame:
    """Per ``keys``, over delivery groups (``n`` deliveries each, see ``with_derived``): the
    deliveries, their mean, 10th, 50th and 90th percentile and largest delay (exact: a
    percentile is the least delay with at least that share of the deliveries at or below
    it), and per column of ``means`` its mean over the deliveries (``mean_<column>``). Each
    distinct delay per key is one row, however many deliveries share it."""
    by_delay = groups.groupBy(*keys, _delay_s().alias("delay_s")).agg(
        F.sum("n").alias("n"), *[F.sum(F.col("n") * F.col(c)).alias(f"sum_{c}") for c in means])
    per_key = Window.partitionBy(*keys)
    upto = per_key.orderBy("delay_s").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ranked = by_delay.withColumn("at_or_below", F.sum("n").over(upto)).withColumn("total", F.sum("n").over(per_key))

    def percentile(tenths: int):
        reached = F.col("at_or_below") * 10 >= F.col("total") * tenths
        return F.min(F.when(reached, F.col("delay_s"))).alias(f"p{tenths}0_s")

    return ranked.groupBy(*keys).agg(
        F.sum("n").alias("deliveries"), (F.sum(F.col("n") * F.col("delay_s")) / F.sum("n")).alias("mean_s"),
        percentile(1), percentile(5), percentile(9), F.max("delay_s").alias("max_s"),
        *[(F.sum(f"sum_{c}") / F.sum("n")).alias(f"mean_{c}") for c in means],
    )


def _with_roles(frame: DataFrame, t: dict) -> DataFrame:
    """``frame`` (with run and broker columns) and each broker's topology role."""
    return frame.join(t["brokers"].select("run", "broker", "role"), ["run", "broker"], "left")


def _per_role_and_all(frame: DataFrame, keys: list, aggregates: list) -> DataFrame:
    """``aggregates`` grouped by ``keys`` and role (``none`` for brokers without one), plus
    the same over every broker as role ``all``."""
    frame = frame.withColumn("role", F.coalesce("role", F.lit("none")))
    overall = frame.groupBy(*keys).agg(*aggregates).withColumn("role", F.lit("all"))
    return frame.groupBy(*keys, "role").agg(*aggregates).unionByName(overall)


def _ratio(numerator: str, denominator: str):
    """numerator / denominator, null where the denominator is 0 (Spark's ANSI mode raises)."""
    return F.when(F.col(denominator) != 0, F.col(numerator) / F.col(denominator))


def _nothing(frame: DataFrame) -> DataFrame:
    """``frame``'s columns and no rows, without running it: Spark plans a limit of 0 as an
    empty relation (a metric of a feature no run uses costs no job)."""
    return frame.limit(0)


def _scenario_key(runs, *keys: str) -> bool:
    """Whether some run's resolved scenario sets the nested key ``keys``."""
    for run in runs:
        value = run.manifest.get("scenario") or {}
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value:
            return True
    return False


def bucket_width(widths_us: dict[str, int]):
    """The time bucket in microseconds of each row's run: a number when every run has the
    same, else a column that picks the run's own with one set lookup per distinct width (a
    comparison per run made every row's cost grow with the runs, and with some 300 runs the
    generated code outgrew the JVM's 64 KB method limit, so Spark fell back to interpreting)."""
    runs_by_width: dict[int, list[str]] = {}
    for run, width_us in widths_us.items():
        runs_by_width.setdefault(width_us, []).append(run)
    (first_us, _), *others = runs_by_width.items()
    if not others:
        return first_us
    width = F.lit(first_us)
    for width_us, runs in others:
        width = F.when(F.col("run").isin(*runs), width_us).otherwise(width)
    return width


def _bucket(column: str, width):
    return (F.floor(F.col(column) / width) * width / US).alias("t_s")


def delay_over_time(t: dict, width) -> DataFrame:
    """Delivery delay per bucket of delivery time."""
    groups = t["delivery_groups"].withColumn("t_s", _bucket("t_deliver_us", width))
    return _delay_stats(groups, ["run", "t_s"])


def delay_distribution(t: dict) -> DataFrame:
    """Deliveries per delay bin (ten bins per decade, from 1 us) and the cumulative fraction."""
    exponent = F.floor(F.log10(F.greatest(_delay_s(), F.lit(1e-6))) * 10) / 10
    counts = t["delivery_groups"].groupBy("run", F.pow(F.lit(10.0), exponent).alias("delay_s")).agg(
        F.sum("n").alias("count"))
    per_run = Window.partitionBy("run")
    cumulative = per_run.orderBy("delay_s").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return counts.withColumn("cdf", F.sum("count").over(cumulative) / F.sum("count").over(per_run))


def with_derived(t: dict, width) -> dict:
    """The tables plus cached ones several metrics share, so ``messages`` is scanned twice
    and the delivery groups once instead of once per metric:
    ``publishers`` (run, pub_id, publisher_broker): where each publication entered the overlay;
    ``delivery_groups`` (run, pub_id, broker, t_pub_us, t_deliver_us, hops, n): the deliveries
    counted per publication, broker and time (``runs.read_tables`` reads them: a broker delivers
    a publication to all its matching subscribers at once, so a publication matching many there
    is one row; a key may have several, each metric adds them up);
    ``message_counts``: per run, broker, kind, origin (``from_client``) and time bucket of
    arrival, the messages arrived, processed, dropped, triggered (``triggered_by`` set: their items,
    and ``triggered_messages``: the messages) and their items (a batch counts its content), the
    longest queue found and the first arrival."""
    m = t["messages"]
    publishers = (m.where((m.kind == "pub") & m.sender.isNull())
                  .select("run", F.col("msg_id").alias("pub_id"), F.col("broker").alias("publisher_broker")))
    items = F.coalesce("batch_size", F.lit(1))
    counts = m.groupBy("run", "broker", "kind", m.sender.isNull().alias("from_client"),
                       _bucket("t_arrive_us", width)).agg(
        F.count(F.lit(1)).alias("arrived"),
        F.count("t_end_us").alias("processed"),
        F.sum(F.col("dropped").cast("int")).alias("dropped"),
        F.sum(F.when(m.triggered_by.isNotNull(), items).otherwise(0)).alias("triggered"),
        F.count(m.triggered_by).alias("triggered_messages"),
        F.sum(items).alias("items"),
        F.max("queue_len").alias("max_queue"),
        F.min("t_arrive_us").alias("first_us"),
    )
    return {**t, "publishers": publishers.cache(), "message_counts": counts.cache(),
            "delivery_groups": t["delivery_groups"].cache()}


def delay_by_pair(t: dict, runs) -> DataFrame:
    """Delivery delay per (publisher broker, subscriber broker), and ``pair_cdf``: the share of
    the run's pairs whose mean delay is at most this pair's (the soft-link paper's Fig. 10)."""
    publishers, publications = t["publishers"], _publications(runs)
    if publications is not None and publications < BROADCAST_ROWS:  # else Spark's own size threshold decides
        publishers = F.broadcast(publishers)
    groups = (t["delivery_groups"].join(publishers, ["run", "pub_id"], "left")
              .withColumnRenamed("broker", "subscriber_broker"))
    stats = _delay_stats(groups, ["run", "publisher_broker", "subscriber_broker"])
    return stats.withColumn("pair_cdf", F.cume_dist().over(Window.partitionBy("run").orderBy("mean_s")))


def queue_over_time(t: dict) -> DataFrame:
    """Mean and largest input queue over all brokers, and the mean over core brokers, per sample."""
    s = _with_roles(t["samples"], t)
    core = F.when(F.col("role") == "core", F.col("queue_len"))
    return s.groupBy("run", (F.col("t_us") / US).alias("t_s")).agg(
        F.mean("queue_len").alias("mean_queue"), F.max("queue_len").alias("max_queue"),
        F.mean(core).alias("mean_core_queue"))


def queue_per_broker(t: dict) -> DataFrame:
    """Every broker's queue at every sample, with its role (large: written, not plotted)."""
    return (_with_roles(t["samples"], t)
            .select("run", (F.col("t_us") / US).alias("t_s"), "broker", "role", "queue_len"))


def table_size_over_time(t: dict) -> DataFrame:
    """Mean PRT and SRT size per role (``all``: every broker) per sample; preserved entries too."""
    sizes = [F.mean("prt_size").alias("mean_prt"), F.mean("srt_size").alias("mean_srt"),
             F.sum("preserved").alias("preserved")]
    s = _with_roles(t["samples"], t).withColumn("t_s", F.col("t_us") / US)
    return _per_role_and_all(s, ["run", "t_s"], sizes)


def links_over_time(t: dict) -> DataFrame:
    """Per sample: the soft links all brokers hold and a broker holds on average, and the
    brokers a broker could hold one to with a gain, on average (null without soft links); the
    mean and largest uplink utilisation (null without uplink limits)."""
    return t["samples"].groupBy("run", (F.col("t_us") / US).alias("t_s")).agg(
        F.sum("soft_links").alias("soft_links"), F.mean("soft_links").alias("mean_soft_links"),
        F.mean("gainful_peers").alias("mean_gainful_peers"),
        F.mean("uplink_utilisation").alias("mean_uplink"),
        F.max("uplink_utilisation").alias("max_uplink"))


def messages_by_broker(t: dict) -> DataFrame:
    """Per broker and kind: arrived, processed, dropped, triggered (``triggered_by`` set; a batch
    counts its content), triggered_messages (a batch counts once) and items."""
    columns = ("arrived", "processed", "dropped", "triggered", "triggered_messages", "items")
    return t["message_counts"].groupBy("run", "broker", "kind").agg(*[F.sum(c).alias(c) for c in columns])


def broker_load(t: dict, by_broker: DataFrame, measured_us: dict[str, int]) -> DataFrame:
    """Per broker: messages arrived, processed and dropped, busy time, utilisation (busy time
    over the simulated time measured: the run, or its window) and processed messages per
    simulated second. ``by_broker``: the result of ``messages_by_broker``."""
    m = by_broker.groupBy("run", "broker").agg(*[F.sum(c).alias(c) for c in ("arrived", "processed", "dropped")])
    busy = t["samples"].groupBy("run", "broker").agg((F.sum("busy_us") / US).alias("busy_s"))
    ends = local_frame(t["brokers"].sparkSession, [(run, span / US) for run, span in measured_us.items()],
                       "run string, measured_s double")
    load = (t["brokers"].select("run", "broker", "role")  # every broker, even one that got no message
            .join(m, ["run", "broker"], "left").join(busy, ["run", "broker"], "left").join(ends, "run"))
    load = load.fillna(0, ["arrived", "processed", "dropped", "busy_s"])
    return (load.withColumn("utilisation", _ratio("busy_s", "measured_s"))
            .withColumn("msg_rate_per_s", _ratio("processed", "measured_s")).drop("measured_s"))


# the control kinds of publisher relocation (protocols/relocation.py): traces, walks, migrations
RELOCATION_KINDS = ("trace_reply", "trace_collect", "trace_report", "pop_walk", "pop_target",
                    "migration_adv", "migration_done")


def migrations(t: dict) -> DataFrame:
    """One row per publisher migration: publisher, origin and target brokers, when it started,
    how long the publisher waited (paused) and how long the selection before it took."""
    detail = lambda key: F.get_json_object("detail", f"$.{key}")  # noqa: E731
    return t["events"].where(F.col("kind") == "publisher_migrated").select(
        "run", detail("publisher").alias("publisher"), detail("origin").alias("origin"),
        detail("target").alias("target"), (detail("t_start_us").cast("long") / US).alias("t_start_s"),
        ((detail("t_end_us").cast("long") - detail("t_start_us").cast("long")) / US).alias("wait_s"),
        (detail("selection_us").cast("long") / US).alias("selection_s"))


def with_hops_moved(moves: pa.Table, links: list[tuple[str, str, str]]) -> pa.Table:
    """The collected ``migrations`` with ``hops_moved``: overlay hops from each migration's
    origin to its target (in the driver: a few rows, and the runs' links as ``overlay_links``)."""
    graphs: dict[str, nx.Graph] = {}
    for run, a, b in links:
        graphs.setdefault(run, nx.Graph()).add_edge(a, b)
    hops = [nx.shortest_path_length(graphs[row["run"]], row["origin"], row["target"])
            for row in moves.select(["run", "origin", "target"]).to_pylist()]
    return moves.append_column("hops_moved", pa.array(hops, pa.int32()))


def migrations_over_time(moves: pa.Table, ends: dict[str, float]) -> pa.Table:
    """Per run that moved a publisher, the migrations it had begun by each one's start, from
    none at time 0 to its total at the run's end (``ends``: run -> its end in seconds):
    publishers that settle show as a line that flattens (from the collected ``migrations``, a
    few rows, in the driver)."""
    starts: dict[str, list[float]] = {}
    for row in moves.select(["run", "t_start_s"]).to_pylist():
        starts.setdefault(row["run"], []).append(row["t_start_s"])
    rows = []
    for run in sorted(starts):
        times = [0.0, *sorted(starts[run])]
        rows += [(run, t, n) for n, t in enumerate(times)]
        if ends.get(run, 0.0) > times[-1]:
            rows.append((run, ends[run], len(times) - 1))
    return pa.table({"run": pa.array([r for r, _, _ in rows], pa.string()),
                     "t_s": pa.array([t for _, t, _ in rows], pa.float64()),
                     "migrations_so_far": pa.array([n for _, _, n in rows], pa.int64())})


def overlay_links(t: dict) -> list[tuple[str, str, str]]:
    """(run, a, b) of every overlay link of every run (a local relation: no Spark job)."""
    return [(r.run, r.a, r.b) for r in t["links"].select("run", "a", "b").collect()]


def relocation(t: dict, by_broker: DataFrame, load: DataFrame, moves: DataFrame) -> DataFrame:
    """Per run: mean broker message rate and input utilisation (over every broker), the
    relocation protocols' control messages and their share of all processed messages, and the
    migrations with their mean wait and selection times (``by_broker``, ``load``, ``moves``:
    the results of ``messages_by_broker``, ``broker_load`` and ``migrations``)."""
    control = by_broker.groupBy("run").agg(
        F.sum(F.when(F.col("kind").isin(*RELOCATION_KINDS), F.col("processed")).otherwise(0)).alias("control_messages"),
        F.sum("processed").alias("all_messages"))
    rates = load.groupBy("run").agg(F.mean("msg_rate_per_s").alias("mean_msg_rate"),
                                    F.mean("utilisation").alias("mean_utilisation"))
    moved = moves.groupBy("run").agg(F.count(F.lit(1)).alias("migrations"), F.mean("wait_s").alias("mean_wait_s"),
                                     F.max("wait_s").alias("max_wait_s"), F.mean("selection_s").alias("mean_selection_s"))
    return (rates.join(control, "run", "left").join(moved, "run", "left")
            .withColumn("control_share", _ratio("control_messages", "all_messages")).drop("all_messages")
            .fillna(0, ["migrations", "control_messages"]))


def multitree(t: dict, runs) -> DataFrame:
    """Per run under content-aware multi-tree routing (protocol.multitree): algorithm, dataset
    and sampling factor; publications and the communication cost (publication copies between
    brokers) in all and per publication, the same for the publications published from the
    first active plan on (before it publications flood the coordinator's tree), the
    duplicates among those copies (a copy reaching a broker that copy of the publication
    reached before, on another tree: the paper's Fig. 7), the plans computed and installed,
    the clusters (trees) of the last installed plan, and the trees computed (COMPUTETREE
    calls: the planning work)."""
    spark = t["messages"].sparkSession
    info = []
    for r in runs:
        settings = ((r.manifest.get("scenario") or {}).get("protocol") or {}).get("multitree")
        if settings:
            generator = ((r.manifest["scenario"].get("workload") or {}).get("generator") or {})
            info.append((r.label, settings["algorithm"], generator.get("dataset"), float(settings["sample"])))
    runs_frame = local_frame(spark, info, "run string, algorithm string, dataset string, sample double")
    m = t["messages"].where(F.col("kind") == "pub").join(F.broadcast(runs_frame.select("run")), "run")
    published = m.where(m.sender.isNull()).select("run", F.col("msg_id").alias("pub_id"),
                                                  F.col("t_arrive_us").alias("t_pub_us"))
    events = t["events"]
    detail = lambda key: F.get_json_object("detail", f"$.{key}")  # noqa: E731
    first = (events.where(F.col("kind") == "multitree_activated").groupBy("run")
             .agg(F.min("t_us").alias("first_plan_us")))
    planned = published.join(first, "run", "left").withColumn(
        "planned", F.col("t_pub_us") >= F.col("first_plan_us"))
    arrivals = (m.where(m.sender.isNotNull()).select("run", F.col("msg_id").alias("pub_id"), "broker")
                .join(planned, ["run", "pub_id"]))
    reached = arrivals.dropDuplicates(["run", "pub_id", "broker"]).groupBy("run").agg(
        F.sum(F.col("planned").cast("int")).alias("planned_reached"))
    copies = (arrivals.groupBy("run")
              .agg(F.count(F.lit(1)).alias("copies"),
                   F.sum(F.col("planned").cast("int")).alias("planned_copies"))
              .join(reached, "run")
              .withColumn("planned_duplicates", F.col("planned_copies") - F.col("planned_reached"))
              .drop("planned_reached"))
    publications = planned.groupBy("run").agg(
        F.count(F.lit(1)).alias("publications"), F.sum(F.col("planned").cast("int")).alias("planned_publications"),
        (F.min("first_plan_us") / US).alias("first_plan_s"))
    recomputed = events.where(F.col("kind") == "multitree_recomputed").select(
        "run", "t_us", detail("installed").alias("installed"), detail("clusters").cast("int").alias("clusters"),
        detail("trees_computed").cast("long").alias("trees_computed"))
    plans = recomputed.groupBy("run").agg(
        F.count(F.lit(1)).alias("plans_computed"),
        F.sum((F.col("installed") == "true").cast("int")).alias("plans_installed"),
        F.max_by(F.when(F.col("installed") == "true", F.col("clusters")),
                 F.when(F.col("installed") == "true", F.col("t_us"))).alias("clusters"),
        F.sum("trees_computed").alias("trees_computed"))
    frame = (runs_frame.join(publications, "run", "left").join(copies, "run", "left").join(plans, "run", "left")
             .fillna(0, ["copies", "planned_copies", "planned_duplicates", "plans_computed", "plans_installed"])
             .withColumn("copies_per_publication", _ratio("copies", "publications"))
             .withColumn("planned_copies_per_publication", _ratio("planned_copies", "planned_publications"))
             .withColumn("planned_duplicates_per_publication",
                         _ratio("planned_duplicates", "planned_publications")))
    return frame if info else _nothing(frame)


def multitree_steps(t: dict) -> DataFrame:
    """Per run and plan (``plan``: 1 for the first the coordinator computed), each
    configuration its clustering passed through (MULT, MULT2, SemCast; ``step`` 0 is one tree
    per subscription group): its trees, its cost and its duplicates on the plan's sampled
    documents, and both per sampled document (the paper's Figs. 6 and 7)."""
    detail = lambda key: F.get_json_object("detail", f"$.{key}")  # noqa: E731
    plans = (t["events"].where((F.col("kind") == "multitree_recomputed") & detail("steps").isNotNull())
             .select("run", "t_us", detail("algorithm").alias("algorithm"), detail("docs").cast("long").alias("docs"),
                     F.from_json(detail("steps"), "array<array<long>>").alias("steps"))
             .withColumn("plan", F.row_number().over(Window.partitionBy("run").orderBy("t_us"))))
    steps = plans.select("run", "plan", "algorithm", "docs", F.posexplode("steps").alias("step", "configuration"))
    return (steps.select("run", "plan", "algorithm", "step",
                         F.col("configuration")[0].alias("trees"), F.col("configuration")[1].alias("sampled_cost"),
                         F.col("configuration")[2].alias("sampled_duplicates"), "docs")
            .withColumn("sampled_cost_per_document", _ratio("sampled_cost", "docs"))
            .withColumn("sampled_duplicates_per_document", _ratio("sampled_duplicates", "docs")))


def hop_counts(t: dict) -> DataFrame:
    """Deliveries per overlay hop count, with the cumulative fraction."""
    counts = t["delivery_groups"].groupBy("run", "hops").agg(F.sum("n").alias("deliveries"))
    per_run = Window.partitionBy("run")
    cumulative = per_run.orderBy("hops").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return counts.withColumn("cdf", F.sum("deliveries").over(cumulative) / F.sum("deliveries").over(per_run))


def throughput(t: dict, width) -> DataFrame:
    """Deliveries, publication copies between brokers and publications entering the overlay (the
    offered load) per bucket, and their rates per second."""
    seconds = width / US
    deliveries = t["delivery_groups"].groupBy("run", _bucket("t_deliver_us", width)).agg(
        F.sum("n").alias("deliveries"))
    counts = t["message_counts"]
    publications = counts.where(counts.kind == "pub").groupBy("run", "t_s").agg(
        F.sum(F.when(counts.from_client, F.col("arrived")).otherwise(0)).alias("publications"),
        F.sum(F.when(~counts.from_client, F.col("arrived")).otherwise(0)).alias("pub_copies"))
    owed = t["expected"].groupBy("run", _bucket("t_pub_us", width)).agg(F.sum("subscribers").alias("owed"))
    both = (deliveries.join(publications, ["run", "t_s"], "full").join(owed, ["run", "t_s"], "full")
            .fillna(0, ["deliveries", "pub_copies", "publications"]))
    return (_with_backlog(both, t["owing"])
            .withColumn("deliveries_per_s", F.col("deliveries") / seconds)
            .withColumn("pub_copies_per_s", F.col("pub_copies") / seconds)
            .withColumn("publications_per_s", F.col("publications") / seconds)
            .withColumn("owed_per_s", F.col("owed") / seconds).drop("publications", "owed"))


def _with_backlog(buckets: DataFrame, owing: DataFrame) -> DataFrame:
    """``buckets`` with ``owed`` (0 where none was) and ``backlog``: the pairs owed by the
    publications made up to each bucket's end less the deliveries made by then (every delivery
    row: an exact run has no others), for the ``owing`` runs; null for the others."""
    so_far = Window.partitionBy("run").orderBy("t_s").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    owes = owing.select("run").withColumn("owes", F.lit(True))
    return (buckets.join(F.broadcast(owes), "run", "left")
            .withColumn("owed", F.when(F.col("owes"), F.coalesce("owed", F.lit(0))))
            .withColumn("backlog", F.sum("owed").over(so_far) - F.sum("deliveries").over(so_far)).drop("owes"))


def load_over_time(t: dict, width) -> DataFrame:
    """Per bucket of service start: messages processed per broker and second, the brokers' mean
    busy share (input utilisation), and the relocation protocols' share of the messages; per
    bucket of delivery time, the mean hops of the deliveries."""
    seconds = width / US
    brokers = t["brokers"].groupBy("run").agg(F.count(F.lit(1)).alias("brokers"))
    m = t["messages"].where(F.col("t_start_us").isNotNull())
    served = m.groupBy("run", _bucket("t_start_us", width)).agg(
        F.count(F.lit(1)).alias("processed"),
        F.sum(F.col("t_end_us") - F.col("t_start_us")).alias("busy_us"),
        F.sum(F.col("kind").isin(*RELOCATION_KINDS).cast("int")).alias("control_messages"))
    served = (served.join(F.broadcast(brokers), "run")
              .withColumn("msg_rate_per_broker", F.col("processed") / F.col("brokers") / seconds)
              .withColumn("busy_share", F.col("busy_us") / US / F.col("brokers") / seconds)
              .withColumn("control_share", _ratio("control_messages", "processed"))
              .drop("brokers", "busy_us"))
    hops = t["delivery_groups"].groupBy("run", _bucket("t_deliver_us", width)).agg(
        (F.sum(F.col("hops") * F.col("n")) / F.sum("n")).alias("mean_hops"))
    return served.join(hops, ["run", "t_s"], "full")


def overlay_positions(links: list[tuple[str, str, str]]) -> list[tuple[str, str, int, int, str | None]]:
    """(run, broker, tin, tout, parent) of each run's overlay rooted at its smallest broker name:
    broker x lies beyond the link parent(b) -> b iff tin(b) <= tin(x) <= tout(b). Runs whose
    overlay is not a tree get no rows (false positives are then unknown)."""
    by_run: dict[str, nx.Graph] = {}
    for run, a, b in links:
        by_run.setdefault(run, nx.Graph()).add_edge(a, b)
    rows = []
    for run, graph in sorted(by_run.items()):
        if not nx.is_tree(graph):
            continue
        root = min(graph.nodes)
        parents = dict(nx.bfs_predecessors(graph, root))
        order = list(nx.dfs_preorder_nodes(graph, root, sort_neighbors=sorted))
        tin = {node: i for i, node in enumerate(order)}
        tout = dict(tin)
        for node in reversed(order):
            if node in parents:
                tout[parents[node]] = max(tout[parents[node]], tout[node])
        rows += [(run, node, tin[node], tout[node], parents.get(node)) for node in order]
    return rows


def publication_copies(t: dict) -> DataFrame:
    """Every processed publication copy, flagged ``useful`` (a local delivery at its broker) and
    ``false_positive`` (received over an overlay link with no delivery beyond it; null for
    copies from clients or over non-overlay links, or when the overlay is not a tree)."""
    spark: SparkSession = t["links"].sparkSession
    positions = local_frame(spark, overlay_positions(overlay_links(t)),
                            "run string, broker string, tin int, tout int, parent string")
    delivered = t["delivery_groups"].select("run", "pub_id", "broker").join(F.broadcast(positions), ["run", "broker"],
                                                                            "left")
    per_pub = delivered.groupBy("run", "pub_id").agg(
        F.collect_set("broker").alias("brokers"), F.collect_set("tin").alias("tins"))
    m = t["messages"]
    copies = (m.where((m.kind == "pub") & m.t_end_us.isNotNull())
              .select("run", F.col("msg_id").alias("pub_id"), "broker", "sender"))
    here = positions.select("run", "broker", F.col("tin").alias("b_tin"), F.col("tout").alias("b_tout"),
                            F.col("parent").alias("b_parent"))
    there = positions.select("run", F.col("broker").alias("sender"), F.col("tin").alias("a_tin"),
                             F.col("tout").alias("a_tout"), F.col("parent").alias("a_parent"))
    copies = (copies.join(F.broadcast(here), ["run", "broker"], "left")
              .join(F.broadcast(there), ["run", "sender"], "left")
              .join(per_pub, ["run", "pub_id"], "left"))
    tins = F.coalesce("tins", F.array().cast("array<int>"))
    downward = F.exists(tins, lambda x: x.between(F.col("b_tin"), F.col("b_tout")))
    upward = F.exists(tins, lambda x: (x < F.col("a_tin")) | (x > F.col("a_tout")))
    beyond = (F.when(F.col("b_parent") == F.col("sender"), downward)
              .when(F.col("a_parent") == F.col("broker"), upward))
    return copies.select("run", "pub_id", "broker", "sender",
                         F.coalesce(F.array_contains("brokers", F.col("broker")), F.lit(False)).alias("useful"),
                         (~beyond).alias("false_positive"))


def forwarding(t: dict) -> DataFrame:
    """Per broker: processed publication copies, pure-forwarder copies, copies received from
    brokers and false positives among them."""
    copies = publication_copies(t)
    per_broker = copies.groupBy("run", "broker").agg(
        F.count(F.lit(1)).alias("pub_copies"),
        F.sum((~F.col("useful")).cast("int")).alias("pure_forward"),
        F.count("false_positive").alias("received_over_links"),
        F.sum(F.col("false_positive").cast("int")).alias("false_positives"),
    )
    return _with_roles(per_broker, t).fillna(0, ["false_positives"])


def forwarding_by_role(per_broker: DataFrame, t: dict) -> DataFrame:
    """``forwarding`` summed per role (``all``: every broker), with the fractions and the
    copies per broker of the role (brokers that processed none count as 0)."""
    sums = [F.sum(c).alias(c) for c in ("pub_copies", "pure_forward", "received_over_links", "false_positives")]
    both = _per_role_and_all(per_broker, ["run"], sums)
    brokers = _per_role_and_all(t["brokers"].select("run", "role"), ["run"], [F.count(F.lit(1)).alias("brokers")])
    return (both.join(brokers, ["run", "role"], "left")
            .withColumn("pub_copies_per_broker", _ratio("pub_copies", "brokers")).drop("brokers")
            .withColumn("pure_forward_fraction", _ratio("pure_forward", "pub_copies"))
            .withColumn("false_positive_fraction", _ratio("false_positives", "received_over_links")))


def queue_at_arrivals(t: dict) -> DataFrame:
    """Per broker and bucket, the longest queue an arriving message found: unlike samples,
    this catches bursts shorter than the sampling interval."""
    return _with_roles(t["message_counts"].groupBy("run", "broker", "t_s")
                       .agg(F.max("max_queue").alias("max_queue")), t)


def queue_peaks(t: dict, arrivals: DataFrame, width) -> DataFrame:
    """Per run: the longest queue any arriving message found, where and in which bucket, the
    longest before the burst (buckets ending before the first client unsubscription), and the
    drain time: from the peak's bucket to the first later bucket whose longest queue is back
    to that level (0 when the peak is not above it). ``arrivals``: ``queue_at_arrivals``."""
    counts = t["message_counts"]
    burst = counts.where((counts.kind == "unsub") & counts.from_client).groupBy("run").agg(
        (F.min("first_us") / US).alias("burst_s"))
    largest = arrivals.groupBy("run", "t_s").agg(F.max("max_queue").alias("queue"))
    baseline = largest.join(burst, "run", "left").groupBy("run").agg(F.coalesce(F.max(F.when(
        F.col("t_s") + width / US <= F.col("burst_s"), F.col("queue"))), F.lit(0)).alias("pre_burst_queue"))
    by_peak = Window.partitionBy("run").orderBy(F.desc("max_queue"), "t_s", "broker")
    peak = (arrivals.withColumn("rank", F.row_number().over(by_peak)).where("rank = 1")
            .select("run", F.col("max_queue").alias("peak_queue"), F.col("broker").alias("peak_broker"),
                    F.col("t_s").alias("t_peak_s")))
    drained = (largest.join(peak, "run").join(baseline, "run")
               .where((F.col("t_s") > F.col("t_peak_s")) & (F.col("queue") <= F.col("pre_burst_queue")))
               .groupBy("run").agg(F.min("t_s").alias("drained_s")))
    return (peak.join(baseline, "run").join(drained, "run", "left")
            .select("run", "peak_queue", "peak_broker", "t_peak_s", "pre_burst_queue",
                    F.when(F.col("peak_queue") <= F.col("pre_burst_queue"), F.lit(0.0))
                    .otherwise(F.col("drained_s") - F.col("t_peak_s")).alias("drain_s")))


def core_order(t: dict) -> dict[str, list[str]]:
    """Per run, the core brokers (role ``core``) in order along the core chain, from the end
    with the smaller name; sorted by name when the core is not a chain."""
    core = {(r.run, r.broker) for r in t["brokers"].where(F.col("role") == "core").select("run", "broker").collect()}
    graphs: dict[str, nx.Graph] = {}
    for run, broker in sorted(core):
        graphs.setdefault(run, nx.Graph()).add_node(broker)
    for r in t["links"].select("run", "a", "b").collect():
        if (r.run, r.a) in core and (r.run, r.b) in core:
            graphs[r.run].add_edge(r.a, r.b)
    order = {}
    for run, graph in graphs.items():
        ends = sorted(n for n in graph if graph.degree(n) <= 1)
        is_chain = nx.is_connected(graph) and nx.is_tree(graph) and max(d for _, d in graph.degree) <= 2
        order[run] = list(nx.dfs_preorder_nodes(graph, ends[0])) if is_chain else sorted(graph)
    return order


def _delay_counting_backlog(run) -> float | None:
    """The mean delay with the pairs still in flight at the end counted as delivered then, from
    the run's check (whole runs only: the check knows nothing of windows)."""
    if run.checked is None or run.measured_us != (0, run.sim_end_us):
        return None
    return (run.checked.get("delay") or {}).get("mean_counting_in_flight_s")


def _peak_mean_queue(samples: DataFrame, name: str) -> DataFrame:
    """Per run, the largest mean of the ``samples``' input queues at one sample time."""
    return samples.groupBy("run", "t_us").agg(F.mean("queue_len").alias("queue")).groupBy("run").agg(
        F.max("queue").alias(name))


def summary(t: dict, runs, by_broker: DataFrame, peaks: DataFrame, by_role: DataFrame,
            moved: DataFrame, trees: DataFrame) -> DataFrame:
    """One row per run: the figures the papers compare runs by (``by_broker``, ``peaks``,
    ``by_role``, ``moved`` and ``trees``: the results of ``messages_by_broker``,
    ``queue_peaks``, ``forwarding_by_role``, ``relocation`` and ``multitree``)."""
    spark = t["messages"].sparkSession
    d = _delay_stats(t["delivery_groups"], ["run"], means=("hops",))
    publications = t["publishers"].groupBy("run").agg(F.count(F.lit(1)).alias("publications"))
    counts = by_broker.groupBy("run").agg(
        F.sum("processed").alias("messages_processed"),
        F.sum(F.when(F.col("kind").isin("sub", "sub_batch"), F.col("triggered")).otherwise(0)).alias("triggered_subs"),
        F.sum("dropped").alias("dropped"))
    last = t["samples"].groupBy("run").agg(F.max("t_us").alias("t_us"))
    final = _with_roles(t["samples"].join(last, ["run", "t_us"]), t).groupBy("run").agg(
        F.mean("prt_size").alias("final_mean_prt"),
        F.mean(F.when(F.col("role") == "core", F.col("prt_size"))).alias("final_core_prt"),
        F.sum("preserved").alias("final_preserved"),
        F.sum("soft_links").alias("final_soft_links"))
    # relocation's trace state per broker (null without relocation): its memory overhead as the emulator counts it
    trace_state = t["samples"].groupBy("run").agg(F.mean("trace_state").alias("mean_trace_state"),
                                                  F.max("trace_state").alias("peak_trace_state"))
    core_queue = _peak_mean_queue(_with_roles(t["samples"], t).where(F.col("role") == "core"), "peak_core_mean_queue")
    mean_queue = _peak_mean_queue(t["samples"], "peak_mean_queue")
    overall = by_role.where(F.col("role") == "all").select(
        "run", "pub_copies", "false_positives", "false_positive_fraction", "pure_forward", "pure_forward_fraction",
        (1 - F.col("pure_forward_fraction")).alias("yield"))
    info = local_frame(spark, [(r.label, str(r.path), int(r.manifest.get("brokers") or 0), r.sim_end_us / US,
                                (r.measured_us[1] - r.measured_us[0]) / US, _delay_counting_backlog(r)) for r in runs],
                       "run string, path string, brokers int, sim_end_s double, measured_s double, "
                       "mean_counting_in_flight_s double")
    frame = info
    trees = trees.select("run", F.col("algorithm").alias("multitree"), "planned_copies_per_publication", "clusters")
    owed = t["owing"].select("run").join(t["expected"].groupBy("run").agg(F.sum("subscribers").alias("owed")),
                                         "run", "left").fillna(0, ["owed"])
    for part in (counts, publications, d, probe_delays(t), peaks, mean_queue, core_queue, final, trace_state, overall,
                 moved, trees,
                 covering_sets(t), t["delivered"], owed):
        frame = frame.join(part, "run", "left")
    frame = frame.withColumn("delivered", F.coalesce("delivered", "deliveries")).fillna(
        0, ["deliveries", "delivered", "publications", "messages_processed", "triggered_subs", "dropped"])
    return (frame.withColumn("deliveries_per_s", _ratio("deliveries", "measured_s"))
            .withColumn("delivered_per_s", _ratio("delivered", "measured_s"))
            .withColumn("owed_per_s", _ratio("owed", "measured_s"))
            .withColumn("delivered_share", _ratio("delivered", "owed"))
            .withColumn("pub_copies_per_s", _ratio("pub_copies", "measured_s"))
            .drop("measured_s", "delivered", "owed"))


def probe_delays(t: dict) -> DataFrame:
    """Per run with delay probes (publications whose id starts with ``probe-``, the papers'
    probes that match a subscriber at every edge broker): the mean, 10th and 90th percentile
    delay of their deliveries alone."""
    probes = t["delivery_groups"].where(F.col("pub_id").startswith(PROBE_PREFIX))
    return _delay_stats(probes, ["run"]).select(
        "run", F.col("mean_s").alias("probe_mean_s"), F.col("p10_s").alias("probe_p10_s"),
        F.col("p90_s").alias("probe_p90_s"))


def covering_sets(t: dict) -> DataFrame:
    """Per run with soft links' ``covering_sets``: the covering-set size a broker's working
    table holds, mean over brokers and samples, and the predicates evaluated per publication
    a broker matched, and per publication were every broker to match every one
    (protocols/covering_sets.py)."""
    return t["covering_sets"].groupBy("run").agg(
        F.mean("covering_set_size").alias("mean_covering_set"), F.mean("wst_anchors").alias("mean_wst_anchors"),
        (F.sum("predicate_evaluations") / F.sum("publications")).alias("predicate_evaluations_per_match"),
        F.mean("evaluations_per_publication").alias("predicate_evaluations_per_publication"))


# ---------------------------------------------------------------------- faults


def drops(t: dict) -> DataFrame:
    """Per run, cause (mailbox full, link down, crashed broker, loss) and message kind: the
    messages dropped."""
    m = t["messages"]
    return m.where(m.dropped).groupBy("run", "cause", "kind").agg(F.count(F.lit(1)).alias("dropped"))


def completeness(t: dict, runs) -> DataFrame:
    """Per publication the oracle expects anything of, in runs with faults (a run ``figure``
    checked keeps an ``expected`` table too): its subscribers, those delivered, those missing,
    and when its last delivery happened."""
    delivered = t["deliveries"].groupBy("run", "pub_id").agg(
        F.countDistinct("sub_id").alias("delivered"), F.max("t_deliver_us").alias("last_delivery_us"))
    frame = (t["expected"].where(F.col("subscribers") > 0).join(delivered, ["run", "pub_id"], "left")
             .fillna(0, ["delivered"])
             .withColumn("missing", F.greatest(F.col("subscribers") - F.col("delivered"), F.lit(0))))
    faulted = [run.label for run in runs if _scenario_key([run], "faults")]
    return frame.where(F.col("run").isin(faulted)) if faulted else _nothing(frame)


def completeness_over_time(pubs: DataFrame, width) -> DataFrame:
    """Per run and bucket of publication time: the share of the oracle's deliveries made
    (``pubs``: the result of ``completeness``)."""
    return pubs.groupBy("run", _bucket("t_pub_us", width)).agg(
        F.sum("subscribers").alias("expected"), F.sum("missing").alias("missing"),
    ).withColumn("delivered_fraction", 1 - F.col("missing") / F.col("expected"))


def faults(t: dict, pubs: DataFrame, runs) -> DataFrame:
    """Per run and fault: kind, what it hit, start and end (s; end null: to the end of the
    run), the distinct publications dropped while it lasted, the deliveries lost (the
    oracle's subscribers not reached, over the publications from its start until it
    recovered) and ``recovery_s``: from its end until the last delivery of the first
    publication after it that reached every subscriber the oracle expects (null: none did).
    Faults that overlap share their losses. ``pubs``: the result of ``completeness``; no
    rows, and no Spark job, when no run's scenario has faults."""
    e = t["events"]
    field = lambda name: F.get_json_object("detail", f"$.{name}")  # noqa: E731
    target = F.coalesce(field("broker"), F.concat_ws(" - ", field("a"), field("b")), F.lit("partition"))
    target = F.when(field("kind") == "partition", F.lit("partition")).otherwise(target)
    started = e.where(e.kind == "fault_started").select(
        "run", field("fault").cast("int").alias("fault"), field("kind").alias("kind"), target.alias("target"),
        F.col("t_us").alias("start_us"))
    ended = e.where(e.kind == "fault_ended").select("run", field("fault").cast("int").alias("fault"),
                                                    F.col("t_us").alias("end_us"))
    spans = started.join(ended, ["run", "fault"], "left")
    after = (spans.join(pubs.where(F.col("missing") == 0), "run")
             .where(F.col("t_pub_us") >= F.col("end_us"))
             .groupBy("run", "fault").agg(F.min_by("last_delivery_us", "t_pub_us").alias("recovered_us")))
    spans = spans.join(after, ["run", "fault"], "left")
    until = F.coalesce(F.col("recovered_us"), F.lit(2 ** 62))
    lost = (spans.join(pubs, "run").where((F.col("t_pub_us") >= F.col("start_us")) & (F.col("t_pub_us") < until))
            .groupBy("run", "fault").agg(F.sum("missing").alias("deliveries_lost")))
    m = t["messages"]
    dropped = (spans.join(m.where(m.dropped & (m.kind == "pub")).select("run", "msg_id", "t_arrive_us"), "run")
               .where((F.col("t_arrive_us") >= F.col("start_us"))
                      & (F.col("t_arrive_us") < F.coalesce(F.col("end_us"), F.lit(2 ** 62))))
               .groupBy("run", "fault").agg(F.countDistinct("msg_id").alias("publications_dropped")))
    frame = (spans.join(lost, ["run", "fault"], "left").join(dropped, ["run", "fault"], "left")
             .fillna(0, ["deliveries_lost", "publications_dropped"])
             .select("run", "fault", "kind", "target", (F.col("start_us") / US).alias("start_s"),
                     (F.col("end_us") / US).alias("end_s"), "publications_dropped", "deliveries_lost",
                     ((F.col("recovered_us") - F.col("end_us")) / US).alias("recovery_s"))
             .orderBy("run", "fault"))
    return frame if _scenario_key(runs, "faults") else _nothing(frame)
