"""How every plot of the project looks, written once: a variant's colour, line style and
marker; what each plotted column is, in which unit and how it is scaled; labels without the
prefix every run shares; variants that came out identical drawn once; integer ticks for
counts; readable logarithmic axes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, ScalarFormatter  # noqa: E402

COLOURS = plt.get_cmap("tab10").colors
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HATCHES = ("", "//", "..", "xx")  # bars' line styles: a look's later conditions, and runs past the palette
DPI = 110


@dataclass(frozen=True)
class Style:
    colour: tuple
    line: str
    marker: str
    hatch: str = ""  # a bar's pattern

    def line_kwargs(self, points: int = 0) -> dict:
        """A line of ``points`` points: marked at every point up to 25, at about 12 of them
        beyond (lines sharing a colour and line style stay apart by their markers)."""
        if not points:
            return {"color": self.colour, "linestyle": self.line}
        return {"color": self.colour, "linestyle": self.line, "marker": self.marker, "markersize": 4,
                "markevery": 1 if points <= 25 else max(points // 12, 1)}


class Variants(list):
    """Variant labels in their order, carrying the looks some of them share: the generic
    report's plots take them where they take labels, and ``styles`` reads the looks."""

    def __init__(self, labels, looks: dict[str, str] | None = None) -> None:
        super().__init__(labels)
        self.looks = dict(looks or {})


def styles(labels: list[str], looks: dict[str, str] | None = None) -> dict[str, Style]:
    """One colour, line style and marker per variant, in the order given: the same variant
    looks the same in every panel of a page, and no two variants differ by colour alone.
    ``looks``: variant -> a look several share (a strategy in several datasets): they share its
    colour, and runs whose labels say the same besides their look ("DT5_S0", "DT5_S2": the
    dataset) share a line style, solid for the first such condition, dashed for the next and so
    on (on bars: plain, then hatched); by default those ``Variants`` carry."""
    looks = looks if looks is not None else getattr(labels, "looks", None) or {}
    colour_of = {name: i for i, name in enumerate(dict.fromkeys(looks.get(label, label) for label in labels))}
    conditions: dict[str, int] = {}  # what a looked run's label says besides its look ("DT5_") -> its line
    drawn = {}
    for i, label in enumerate(labels):
        name = looks.get(label, label)
        if label in looks:
            line = pattern = conditions.setdefault(label.replace(name, "", 1), len(conditions))
        else:
            line, pattern = i, colour_of[name] // len(COLOURS)  # past the palette, bars differ by pattern
        drawn[label] = Style(COLOURS[colour_of[name] % len(COLOURS)], LINE_STYLES[line % len(LINE_STYLES)],
                             MARKERS[i % len(MARKERS)], HATCHES[pattern % len(HATCHES)])
    return drawn


def short_labels(labels: list[str]) -> dict[str, str]:
    """Each label without the prefix (up to a ``-``) that every label shares, and without a
    window every label is measured over (`` [last 60 s]``): a figure's runs are named
    ``<figure>-<variant>`` and the legend needs only the variant."""
    if len(labels) < 2:
        return {label: label for label in labels}
    suffix = os.path.commonprefix([label[::-1] for label in labels])[::-1]
    end = suffix.find(" [") if suffix.endswith("]") else -1
    tail = len(suffix) - end if end >= 0 else 0
    prefix = os.path.commonprefix(labels)
    cut = prefix.rfind("-") + 1
    if cut == 0 or any(len(label) - tail <= cut for label in labels):
        cut = 0
    return {label: label[cut:len(label) - tail] for label in labels}


def identical_groups(values: dict[str, object], labels: list[str]) -> list[list[str]]:
    """The labels whose values are equal (arrays element by element, within rounding), in
    groups in label order: a group is drawn once and named "A = B"."""
    groups: list[list[str]] = []
    for label in labels:
        if label not in values:
            continue
        for group in groups:
            if _same(values[group[0]], values[label]):
                group.append(label)
                break
        else:
            groups.append([label])
    return groups


def _same(a, b) -> bool:
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.shape != y.shape or not np.allclose(x, y, rtol=1e-9, atol=1e-12, equal_nan=True):
            return False
    return True


def group_label(group: list[str]) -> str:
    """``S2 = SH: identical`` for a group, the variant's name alone otherwise."""
    return group[0] if len(group) == 1 else " = ".join(group) + ": identical"


@dataclass(frozen=True)
class Measure:
    """What a plotted column is: the axis label (with its unit), a one-line definition, and
    how its values are shown (``percent``: a fraction shown as %, ``integer``: counts).
    ``level``: a quantity held over time (a table's size), which shows activity by changing,
    where the others (rates, queues, delays) show it by not being zero. ``steps``: a count
    that changes only at its events, drawn as steps."""
    label: str
    definition: str
    integer: bool = False
    percent: bool = False
    level: bool = False
    steps: bool = False

    def scale(self, values):
        return np.asarray(values, dtype=float) * (100.0 if self.percent else 1.0)


MEASURES = {
    "t_s": Measure("simulated time (s)", "virtual time since the run started"),
    "mean_s": Measure("mean delivery delay (s)", "publication to delivery at the subscriber, mean over the "
                      "deliveries, each placed in time at its delivery"),
    "max_s": Measure("largest delivery delay (s)", "publication to delivery at the subscriber, the largest"),
    "p90_s": Measure("90th-percentile delivery delay (s)", "publication to delivery, 90th percentile"),
    "probe_mean_s": Measure("probe delay (s)", "publication to delivery of the delay probes alone (publications "
                            "matching a subscriber at every edge broker, issued a stated time after the "
                            "unsubscriptions), mean over their deliveries"),
    "probe_p10_s": Measure("10th-percentile probe delay (s)", "publication to delivery of the delay probes, "
                           "10th percentile"),
    "probe_p90_s": Measure("90th-percentile probe delay (s)", "publication to delivery of the delay probes, "
                           "90th percentile"),
    "delay_s": Measure("delivery delay (s)", "publication to delivery at the subscriber"),
    "cdf": Measure("share of deliveries (%)", "deliveries with at most this value", percent=True),
    "pair_cdf": Measure("share of broker pairs (%)", "(publisher broker, subscriber broker) pairs whose mean delay "
                        "is at most this", percent=True),
    "hops": Measure("hops", "broker-to-broker links a publication crossed to reach the subscriber's broker",
                    integer=True),
    "max_queue": Measure("input queue (messages)", "the longest input queue a broker had", integer=True),
    "mean_queue": Measure("mean input queue (messages)", "input-queue length, mean over all brokers per sample"),
    "mean_core_queue": Measure("mean core input queue (messages)",
                               "input-queue length, mean over the core brokers per sample"),
    "mean_prt": Measure("routing-table size (subscriptions)", "subscriptions a broker stores, mean over brokers",
                        level=True),
    "preserved": Measure("preserved subscriptions", "entries kept as aggregates after an unsubscription, "
                         "summed over brokers", integer=True, level=True),
    "soft_links": Measure("soft links held", "direct links beyond the primary tree, over all brokers",
                          integer=True, level=True),
    "mean_covering_set": Measure("covering-set size (subscriptions)", "subscriptions in a broker's covering sets "
                                 "(one per WST anchor), mean over brokers and samples"),
    "predicate_evaluations_per_match": Measure("predicate evaluations per publication", "predicates a matcher "
                                               "evaluates over a broker's covering sets for a publication it handles"),
    "predicate_evaluations_per_publication": Measure(
        "predicate evaluations per publication", "predicates a matcher evaluates over a broker's covering sets for "
        "a publication, every broker matching every publication"),
    "mean_soft_links": Measure("soft links per broker", "direct links beyond the primary tree a broker holds, "
                               "mean over brokers", level=True),
    "mean_gainful_peers": Measure("brokers a broker could link to with a gain", "brokers of its Delta-"
                                  "neighbourhood, two or more hops away, it sent publications toward over the last "
                                  "link round's profile window, mean over brokers", level=True),
    "mean_uplink": Measure("uplink utilisation (%)", "share of each sample its uplink was sending, mean over "
                           "brokers", percent=True),
    "max_uplink": Measure("busiest uplink's utilisation (%)", "share of each sample the busiest broker's uplink "
                          "was sending", percent=True),
    "deliveries_per_s": Measure("deliveries per second", "publications delivered to subscribers per second: "
                                "one value per run counts the deliveries of the publications made in its stretch "
                                "(by the run's end), over time by when they are delivered"),
    "delivered_per_s": Measure("deliveries per second", "deliveries made to subscribers within the stretch, per "
                               "second, whenever their publication was made (backlog included): what the brokers "
                               "delivered there"),
    "delivered_share": Measure("delivered share of the owed (%)", "deliveries made within the stretch over the "
                               "deliveries its publications owe: about 100% while the brokers keep up with the "
                               "offered load, less when they fall behind, a little more while they drain an "
                               "earlier backlog", percent=True),
    "owed_per_s": Measure("deliveries owed per second", "deliveries the publications made in the stretch (over "
                          "time: in each bucket) owe, the oracle's, per second: the offered load in deliveries"),
    "backlog": Measure("deliveries owed and not yet made", "pairs the publications made so far owe and the "
                       "brokers have not delivered yet, at each bucket's end", integer=True, level=True),
    "pub_copies": Measure("publication messages", "publication copies sent between brokers, over the brokers of "
                          "each tier", integer=True),
    "pub_copies_per_broker": Measure("publication messages per broker", "publication copies sent between brokers, "
                                     "mean over the brokers of each tier"),
    "publications_per_s": Measure("publications per second", "publications entering the overlay from their "
                                  "publishers per second: the offered load"),
    "pub_copies_per_s": Measure("publication messages per second", "publication copies sent between brokers "
                                "per second"),
    "pure_forward": Measure("pure-forwarded copies", "publication copies received by a broker with no local "
                            "subscriber for them (it only forwards)", integer=True),
    "pure_forward_fraction": Measure("pure forwarding (% of copies)", "publication copies received by a broker "
                                     "with no local subscriber for them", percent=True),
    "false_positive_fraction": Measure("false positives (% of copies)", "publication copies sent towards "
                                       "brokers with no matching subscriber behind them", percent=True),
    "yield": Measure("yield (%)", "publication copies received by a broker with a local match, of all copies "
                     "sent between brokers", percent=True),
    "triggered": Measure("triggered subscriptions", "subscriptions that arrived at a broker because an "
                         "unsubscription released them", integer=True),
    "triggered_messages": Measure("triggered subscription messages", "subscription messages that arrived at a "
                                  "broker because an unsubscription released them (a packed batch counts once)",
                                  integer=True),
    "triggered_subs": Measure("triggered subscriptions", "subscription messages an unsubscription released, "
                              "over all brokers", integer=True),
    "processed": Measure("messages processed", "messages of each kind processed, over all brokers", integer=True),
    "utilisation": Measure("input utilisation (%)", "share of the run a broker was busy processing", percent=True),
    "mean_utilisation": Measure("mean input utilisation (%)", "share of the run a broker was busy processing, "
                                "mean over brokers", percent=True),
    "msg_rate_per_broker": Measure("message rate (messages/s per broker)", "messages brokers processed per second "
                                   "of each time bucket, mean over brokers"),
    "busy_share": Measure("input utilisation (%)", "share of each time bucket a broker was busy processing, mean "
                          "over brokers", percent=True),
    "mean_msg_rate": Measure("message rate (messages/s per broker)", "messages a broker processed per second "
                             "of the run, mean over brokers"),
    "control_share": Measure("relocation control messages (%)", "the relocation protocol's own messages, of "
                             "all messages processed", percent=True),
    "migrations": Measure("publisher migrations", "publishers moved to another broker", integer=True),
    "migrations_so_far": Measure("publisher migrations so far", "publishers moved to another broker since the "
                                 "run began, counted at each migration's start", integer=True, steps=True),
    "mean_wait_s": Measure("migration wait (s)", "a migrating publisher held back, from decision to resuming"),
    "mean_selection_s": Measure("selection time (s)", "from the end of a trace session to the chosen broker "
                                "(GRAPE's collection round, POP's walk), mean over the migrations"),
    "mean_trace_state": Measure("relocation trace state (values per broker)", "values a broker's POP or GRAPE "
                                "trace records hold (a number, a name or 64 bits of a bit vector each), mean over "
                                "brokers and samples; none without relocation"),
    "peak_trace_state": Measure("largest relocation trace state (values)", "the most values one broker's POP or "
                                "GRAPE trace records held at a sample", integer=True),
    "wait_s": Measure("migration wait (s)", "a migrating publisher held back, from decision to resuming, mean "
                      "over the migrations"),
    "planned_copies_per_publication": Measure("cost (copies per publication)",
                                              "publication copies between brokers per publication, once a plan "
                                              "is active"),
    "copies_per_publication": Measure("cost (copies per publication)",
                                      "publication copies between brokers per publication, whole run"),
    "clusters": Measure("trees", "dissemination trees of the last plan (cluster 0 included)", integer=True),
    "trees": Measure("trees", "dissemination trees (clusters) of the configuration", integer=True),
    "sampled_cost_per_document": Measure("cost on the sample (copies per document)",
                                         "edges of the subtrees joining each sampled document's publisher and "
                                         "matching brokers, on every tree it is sent on, per document"),
    "sampled_duplicates_per_document": Measure("duplicates per document",
                                               "brokers a sampled document reaches on more than one of its trees, "
                                               "counted once per extra tree, per document"),
    "planned_duplicates_per_publication": Measure("duplicates per publication",
                                                  "copies reaching a broker another copy of the publication "
                                                  "reached before, per publication once a plan is active"),
    "sample": Measure("sampling factor", "share of the documents the plan is computed from"),
    "mean_hops": Measure("mean hops", "broker-to-broker links per delivery, mean"),
    "deliveries": Measure("deliveries", "publications delivered to subscribers", integer=True),
    "mean_counting_in_flight_s": Measure("mean delay counting the backlog (s)", "publication to delivery, mean "
                                         "over the pairs the oracle expects, each still in flight at the end "
                                         "counted as delivered then (pubsub-emu check): a lower bound"),
    "peak_queue": Measure("peak input queue (messages)", "the longest input queue any broker had", integer=True),
    "peak_mean_queue": Measure("peak mean input queue (messages)", "the largest mean of all brokers' sampled "
                               "input queues", integer=True),
    "peak_core_mean_queue": Measure("peak mean core input queue (messages)", "the largest mean of the core "
                                    "brokers' sampled input queues", integer=True),
    "final_mean_prt": Measure("routing-table size at the end (subscriptions)", "subscriptions a broker stores "
                              "at the end of the run, mean over brokers"),
    "final_core_prt": Measure("core routing-table size at the end (subscriptions)", "subscriptions a core broker "
                              "stores at the end of the run, mean over the core brokers"),
    "delivered_fraction": Measure("delivered (% of expected)", "deliveries made of those the oracle expects",
                                  percent=True),
}


def measure(column: str) -> Measure:
    """The column's measure; a column without one is a mistake in a figure file or a plot."""
    try:
        return MEASURES[column]
    except KeyError:
        raise KeyError(f"no measure for column {column!r}: add it to analysis.style.MEASURES") from None


def last_activity(column: str, t, y) -> float:
    """The last time a series of ``column`` shows something happening: for a level its last
    change, for other measures its last non-zero value; 0 when there is none."""
    t, y = np.asarray(t, dtype=float), np.nan_to_num(np.asarray(y, dtype=float))
    moments = np.flatnonzero(np.diff(y)) + 1 if measure(column).level else np.flatnonzero(y)
    return float(t[moments[-1]]) if len(moments) else 0.0


def time_range(last: float) -> tuple[float, float] | None:
    """A page's time axis: from zero to a little past the last activity any of its plots shows."""
    return (0.0, last * 1.03) if last > 0 else None


def relative(column: str, base: str) -> Measure:
    """``column``'s measure divided by the value of the variant ``base`` (a ratio, no unit)."""
    m = measure(column)
    return Measure(f"{m.label.split(' (')[0]}\nrelative to {base}", f"{m.definition}, divided by {base}'s")


def label_axis(ax, axis: str, column: str) -> None:
    """The axis's label with its unit; integer ticks for counts; percentages as such;
    thousands separated (160,000, not 160000: ``readable_log`` replaces it on a log axis)."""
    m = measure(column)
    getattr(ax, f"set_{axis}label")(m.label)
    target = ax.xaxis if axis == "x" else ax.yaxis
    if m.integer:
        target.set_major_locator(MaxNLocator(integer=True))
    target.set_major_formatter(_Thousands())


def separate_thousands(ax) -> None:
    """Thousands separated on the axes that still show matplotlib's plain numbers (not log
    axes, not category labels)."""
    for target in (ax.xaxis, ax.yaxis):
        if type(target.get_major_formatter()) is ScalarFormatter:
            target.set_major_formatter(_Thousands())


class _Thousands(ScalarFormatter):
    """Matplotlib's plain tick labels (0.8, 1.0, 1.2), but 160,000 rather than 160000 or 1.6e5."""

    def __init__(self):
        super().__init__(useOffset=False)
        self.set_scientific(False)

    def __call__(self, value, pos=None):
        return f"{value:,.0f}" if abs(value) >= 1000 else super().__call__(value, pos)


def readable_log(ax, axis: str = "y") -> None:
    """A logarithmic axis labelled with plain numbers (1, 10, 100, 1,000) rather than powers."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    target.set_major_formatter(plain)
    low, high = (ax.get_xlim() if axis == "x" else ax.get_ylim())
    few_decades = low > 0 and high / low < 100  # label the 2, 3, 5 between too
    target.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(f"{v:g}")[0] in "25" else "")
                               if few_decades else NullFormatter())


def save(fig, path) -> None:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
