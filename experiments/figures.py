"""``pubsub-emu figure``: the runs, the paper's figure and the report of one figure of the seed papers.

A figure is a YAML file in ``experiments/figures/``:

    title: what the figure shows (no sizes: the page gives the runs' real ones)
    paper: the paper's title
    paper_figure: the paper's figure(s) it reproduces, e.g. "Fig. 6"
    runs:                          # variant -> a scenario of experiments/scenarios and overrides
      active: {scenario: unsub_burst_active.yaml}
      selective: {scenario: unsub_burst_selective.yaml, set: [...], small: [protocol.pruning.window=20s],
                  series: selective}    # series: a sweep figure's line this run is a point of
      # look: NAME: runs of one look share its colour, each its own line style (a strategy in two datasets)
    small: [duration=300s, ...]    # --small: overrides that make every run test-sized (a run's
                                   # own ``small`` ones come after these)
    small_runs: [active, selective]  # optional: the only runs --small makes (default: every run)
    small_keeps: why the test-sized runs still show the mechanism the figure is about
    sweep: {key: workload.generator.degree, label: "covering degree"}   # a sweep figure's x axis
                                   # (reciprocal: true draws 1 / the value: a rate for an interval)
    setup:                         # the paper's setting against ours, key by key
      topology: {paper: 49 brokers, ours: 55 brokers, small: 55 brokers, why: ...}
                                   # why: given where ours departs from the paper (or the paper
                                   # is silent, "not stated", and we chose)
    window: {last: 60, small: {last: 10}}   # where the paper reads its values at the end (or a
                                   # measured interval, {from: S, until: S}): the summary and every
                                   # panel but the time ones are measured over it (a panel may say
                                   # measured: run); small: the test-sized runs' window
    phases: [{label: morning rush, from: 2400, until: 3120, small: {from: 60, until: 132}},
             {label: unsubscriptions, injected: unsub}]
                                   # stretches of simulated time every time panel shades and names;
                                   # injected: from the first to the last message of a kind the
                                   # clients inject, as the runs' manifests record it
    summary: [mean_s, max_s, peak_queue]   # the summary columns this figure compares
    panels:                        # the paper's figure (analysis/panels.py)
      - {title: Delivery delay, table: delay_over_time, y: mean_s}
      - {title: Probe delay, table: summary, y: probe_mean_s, kind: bars, whiskers: [probe_p10_s, probe_p90_s]}
    plots: [Delivery delay over time, ...]   # the generic report's plots shown below the panels
    paper_values:                  # the paper's stated numbers beside ours (experiments/paper_values.py)
      - {claim: ..., where: Fig. 10, paper: 0.014, ours: {y: mean_s, run: active}}
                                   # or {from: FIGURE}: another figure's, for runs of the same labels

``run_figure`` runs the variants as a sweep (concurrent Ray tasks, ``experiments/sweep.py``)
into ``OUT/runs/<label>`` (named ``<figure>-<label>``), reusing the runs an earlier call
completed, analyses them side by side into ``OUT/report`` (and, for a figure with a window,
over the window into ``OUT/report-window`` in the same job), draws the panels into
``OUT/figure.png`` and writes ``OUT/figure.md``.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pyarrow.parquet as pq
import yaml

from analysis.job import PLOTS_OVER_TIME, Requested
from analysis.panels import Drawn, Panel, Sweep, Windowed, check as check_panel
from analysis.runs import CHECK_FILE
from analysis.spread import DESCRIBED, interval, seeded_name
from analysis.window import Window, from_mapping, label_in
from experiments import paper_values
from experiments.check import summary_line
from protocols.errors import InputError
from protocols.messages import CLIENT_KINDS

FIGURE_DIR = Path(__file__).resolve().parent / "figures"
SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
KEYS = ("title", "paper", "paper_figure", "runs", "small", "small_runs", "small_keeps", "sweep", "setup", "window",
        "phases", "summary", "panels", "plots", "paper_values")
RUN_KEYS = ("scenario", "set", "small", "series", "look")
SETUP_KEYS = ("paper", "ours", "small", "why")
WINDOW_REPORT = "report-window"  # the report of a figure's runs over its window
BACKLOG_SHARE = 0.01  # a run that ends with more of its owed pairs in flight has its backlog named on the page
SILENT = ("n.s.", "not stated", "ambiguous")  # how a setup entry says the paper is silent or unclear
PANEL_KEYS = ("title", "table", "y", "kind", "x", "where", "reduce", "scale", "variants", "relative_to", "order",
              "measured", "whiskers", "paper_panel")


@dataclass(frozen=True)
class Setting:
    """One line of the setup table: the paper's value, ours, the test-sized one and why they differ."""
    name: str
    paper: str
    ours: str
    small: str | None
    why: str | None

    @property
    def departs(self) -> bool:
        """Ours deliberately differs from a setting the paper states (``why`` says how and why;
        where the paper is silent, ``why`` gives the reason for our choice)."""
        return self.why is not None and not self.paper.lower().startswith(SILENT)


@dataclass(frozen=True)
class Instance:
    """One run of a figure: a variant, with one of the seeds of ``--repeat`` (None: the
    variant's one run, with its scenario's seed)."""
    label: str
    seed: int | None = None

    @property
    def directory(self) -> str:
        """Its run directory under ``OUT/runs``."""
        return self.label if self.seed is None else seeded_name(self.label, self.seed)


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    paper: str
    paper_figure: str
    runs: dict[str, tuple[Path, list[str], list[str]]]  # label -> (scenario, overrides, --small overrides)
    small: list[str]
    small_keeps: str
    setup: list[Setting]
    summary: list[str]
    panels: list[Panel]
    plots: list[str]
    sweep_key: str | None = None
    sweep_label: str | None = None
    series: dict[str, str] | None = None  # label -> its line in a sweep figure
    looks: dict[str, str] | None = None  # label -> the look it shares with other runs (else its own)
    window: Window | None = None  # what of each run the values at the end measure (None: the whole run)
    small_window: Window | None = None  # the test-sized runs' (None: ``window``)
    sweep_reciprocal: bool = False  # the x axis shows 1 / the key's value (a rate for an interval)
    phases: tuple[Phase, ...] = ()  # stretches time panels shade
    paper_values: tuple = ()  # PaperValue: the paper's stated numbers, beside ours on the page
    changed: tuple = ()  # overrides given to every run by ``figure --set``, named on the page
    small_runs: tuple = ()  # the runs --small makes (empty: every run)

    def sized(self, small: bool) -> Figure:
        """The figure as ``--small`` (or not) runs it: test-sized, only its ``small_runs``."""
        if not small or not self.small_runs:
            return self
        made = {label: run for label, run in self.runs.items() if label in self.small_runs}
        return dataclasses.replace(self, runs=made)

    def overrides(self, label: str, small: bool) -> list[str]:
        """A run's overrides: its own, then --small's (the figure's, then the run's), then
        ``figure --set``'s, then its name."""
        _, own, own_small = self.runs[label]
        return [*own, *(self.small + own_small if small else []), *self.changed, f"name={self.name}-{label}"]

    def run_name(self, label: str, seed: int | None = None) -> str:
        name = f"{self.name}-{label}"
        return name if seed is None else seeded_name(name, seed)

    def instance_overrides(self, instance: Instance, small: bool) -> list[str]:
        """An instance's overrides: its variant's, with its seed and its own name."""
        seeded = [] if instance.seed is None else [f"seed={instance.seed}"]
        return [*self.overrides(instance.label, small)[:-1], *seeded,
                f"name={self.run_name(instance.label, instance.seed)}"]

    def measured(self, small: bool) -> Window | None:
        """The window the figure's values are measured over (None: whole runs)."""
        return (self.small_window or self.window) if small else self.window

    def phases_at(self, small: bool, manifests: tuple[dict, ...] = ()) -> list[tuple[str, float, float]]:
        """The stretches of the runs the time panels shade, as (label, from s, until s); a phase
        of injected messages spans them over the runs' ``manifests``, from the earliest first to
        the latest last (``unshaded`` names one that no manifest records)."""
        found = []
        for phase in self.phases:
            if phase.injected is None:
                w = (phase.small or phase.full) if small else phase.full
                found.append((phase.label, w.start, w.end))
                continue
            if spans := _recorded(phase, manifests):
                found.append((phase.label, min(s["first_s"] for s in spans), max(s["last_s"] for s in spans)))
        return found

    def unshaded(self, manifests: tuple[dict, ...]) -> list[str]:
        """The phases of injected messages that none of the runs' ``manifests`` records (runs
        made before manifests recorded ``injected``, or a workload without that kind)."""
        return [phase.label for phase in self.phases if phase.injected is not None and not _recorded(phase, manifests)]


def _recorded(phase: Phase, manifests: tuple[dict, ...]) -> list[dict]:
    """What the runs' ``manifests`` record of the injections of ``phase``'s message kind."""
    return [m["injected"][phase.injected] for m in manifests if phase.injected in m.get("injected", {})]


def names() -> list[str]:
    return sorted(p.stem for p in FIGURE_DIR.glob("*.yaml"))


HEADLINE_WIDTH = 110  # characters of a line under the title: a page's --set overrides wrap, not widen it
RECORDED = FIGURE_DIR / "recorded.json"  # full-size wall times measured on the project's machines


def listing(outputs: Path) -> str:
    """``figure --list``: each figure, the paper and its figure number, whether it runs at the
    paper's setup (or where it departs), and how long its full size took: the last run of it
    under ``outputs`` (``figure``'s default parent) or, failing that, the one recorded with the
    project."""
    recorded = json.loads(RECORDED.read_text()) if RECORDED.is_file() else {}
    blocks = []
    for name in names():
        figure = load(name)
        departs = [s.name for s in figure.setup if s.departs]
        setup = "the paper's setup" if not departs else f"departs from the paper's setup in {', '.join(departs)}"
        blocks.append(f"{name}: {figure.title}\n    {figure.paper_figure or 'figure'} of \"{figure.paper}\"; {setup}; "
                      f"{len(figure.runs)} runs\n    full size: {_full_size_time(outputs / name, recorded.get(name))}")
    return "\n".join(blocks)


CATALOGUE_START, CATALOGUE_END = "<!-- catalogue: pubsub-emu figure --list --markdown -->", "<!-- /catalogue -->"


def catalogue() -> str:
    """The figures as a Markdown table (docs/figures.md holds it between the catalogue marks)."""
    lines = [CATALOGUE_START, "", "| figure | paper | the paper's | what it shows | setup |", "|---|---|---|---|---|"]
    for name in names():
        figure = load(name)
        departs = [s.name for s in figure.setup if s.departs]
        setup = "the paper's" if not departs else "departs in " + ", ".join(departs)
        cells = [f"`{name}`", figure.paper, figure.paper_figure, figure.title, setup]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join([*lines, "", CATALOGUE_END])


def _full_size_time(out: Path, recorded: dict | None) -> str:
    """How long the last full-size run of a figure took: ``out``'s sweep record, else ``recorded``."""
    record = out / "runs" / "sweep.json"
    if record.is_file():
        points = json.loads(record.read_text())["points"]
        done = [p for p in points if p["status"] == "complete" and p.get("wall_s") is not None]
        if done and len(done) == len(points):
            return (f"{_duration(sum(p['wall_s'] for p in done))} of runs ({len(done)}, the longest "
                    f"{_duration(max(p['wall_s'] for p in done))}), last run in {out}")
    if recorded:
        return (f"{_duration(recorded['runs_s'])} of runs ({recorded['runs']}, the longest "
                f"{_duration(recorded['longest_s'])}), recorded {recorded['date']} on {recorded['machine']}")
    return "not recorded"


def _duration(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def load(name: str) -> Figure:
    path = _figure_file(name, f"figure {name!r}")
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of {', '.join(KEYS)}")
    _known_keys(data, KEYS, str(path))
    runs, series, looks = _runs(data.get("runs") or {}, path)
    sweep_key, sweep_label, reciprocal = _sweep(data.get("sweep"), path)
    _check_summary(data.get("summary") or [], path)
    window, small_window = _window(data.get("window"), path)
    phases = _phases(data.get("phases") or [], path)
    panels = _panels(data.get("panels") or [], list(runs), path)
    stated = paper_values.parse(_paper_values_given(data.get("paper_values") or [], path), list(runs),
                                _summary_columns(), path, tuple(p.y for p in panels if p.kind == "categories"))
    _check_categories_drawn(stated, panels, path)
    return Figure(
        name, str(data.get("title", name)), str(data.get("paper", "")), str(data.get("paper_figure", "")), runs,
        [str(s) for s in data.get("small") or []], str(data.get("small_keeps", "")).strip(),
        _setup(data.get("setup") or {}, path), [str(c) for c in data.get("summary") or []],
        panels, [str(p) for p in data.get("plots") or []],
        sweep_key, sweep_label, series or None, looks or None, window, small_window, reciprocal, phases,
        tuple(stated), small_runs=_small_runs(data.get("small_runs"), list(runs), path))


def _check_categories_drawn(stated, panels: list[Panel], path: Path) -> None:
    """A paper value ``at`` a category names a run the categories panel of its column draws."""
    for value in stated:
        if value.at is None:
            continue
        panel = _categories_panel(panels, value.y)
        if panel.variants and value.run not in panel.variants:
            raise InputError(f"{path}: paper_values: {value.claim!r}: run {value.run!r} is not drawn on the "
                             f"categories panel of {value.y} (its variants: {', '.join(panel.variants)})")


def _categories_panel(panels: list[Panel], y: str) -> Panel:
    """The categories panel a paper value ``at`` a category of column ``y`` reads and marks: the first."""
    return next(p for p in panels if p.kind == "categories" and p.y == y)


def _small_runs(given, runs: list[str], path: Path) -> tuple[str, ...]:
    """The runs ``--small`` makes, where not every run: some of ``runs``, two or more."""
    if given is None:
        return ()
    if not isinstance(given, list) or len(given) < 2 or not set(given) <= set(runs):
        raise InputError(f"{path}: small_runs: expected a list of two or more of the figure's runs "
                         f"({', '.join(runs)})")
    return tuple(given)


def _sweep(given, path: Path) -> tuple[str | None, str | None, bool]:
    """A sweep figure's x axis: the scenario key, its label and whether to draw 1 / the value."""
    if given is None:
        return None, None, False
    if (not isinstance(given, dict) or not {"key", "label"} <= set(given) <= {"key", "label", "reciprocal"}
            or given.get("reciprocal", False) not in (True, False)):
        raise InputError(f"{path}: sweep: expected {{key: SCENARIO.KEY, label: AXIS LABEL}} and optionally "
                         "reciprocal: true")
    return str(given["key"]), str(given["label"]), given.get("reciprocal", False)


def _window(given, path: Path, key: str = "window") -> tuple[Window | None, Window | None]:
    """``key``'s window and its test-sized one (``small``) from ``{last: S}`` or ``{from: S,
    until: S}``."""
    if given is None:
        return None, None
    if not isinstance(given, dict):
        raise InputError(f"{path}: {key}: expected {{last: S}} or {{from: S, until: S}}, and small: {{...}}")
    given = dict(given)
    small = given.pop("small", None)
    try:
        return from_mapping(given), None if small is None else from_mapping(small)
    except ValueError as exc:
        raise InputError(f"{path}: {key}{'' if small is None else ' (or its small)'}: {exc}") from None


class Phase(NamedTuple):
    """A stretch of simulated time the time panels shade and name: from ``full`` (``small`` for
    the test-sized runs), or, with ``injected`` (a message kind), from the first to the last
    message of that kind the runs' clients inject, as their manifests record it."""
    label: str
    full: Window | None = None
    small: Window | None = None
    injected: str | None = None


def _phases(given, path: Path) -> tuple:
    """Named stretches of simulated time (a rush hour, the unsubscriptions) that the time panels shade."""
    expected = ("expected {label: TEXT, from: S, until: S} and optionally small: {from: S, until: S}, "
                "or {label: TEXT, injected: KIND}")
    if not isinstance(given, list):
        raise InputError(f"{path}: phases: expected a list of {{label: TEXT, from: S, until: S}} "
                         "or {label: TEXT, injected: KIND}")
    phases = []
    for i, phase in enumerate(given):
        if isinstance(phase, dict) and set(phase) == {"label", "injected"}:
            if phase["injected"] not in CLIENT_KINDS:
                raise InputError(f"{path}: phases[{i}].injected: expected one of {', '.join(CLIENT_KINDS)}, "
                                 f"got {phase['injected']!r}")
            phases.append(Phase(str(phase["label"]), injected=phase["injected"]))
            continue
        if not isinstance(phase, dict) or not {"label", "from", "until"} <= set(phase) <= {"label", "from", "until",
                                                                                            "small"}:
            raise InputError(f"{path}: phases[{i}]: {expected}")
        full, small = _window({k: v for k, v in phase.items() if k != "label"}, path, f"phases[{i}]")
        if small is not None and small.end is None:
            raise InputError(f"{path}: phases[{i}]: a phase needs both from and until")
        phases.append(Phase(str(phase["label"]), full, small))
    return tuple(phases)


def _summary_columns() -> list[str]:
    from analysis.report import SUMMARY_COLUMNS

    return [c[0] for c in SUMMARY_COLUMNS]


def _check_summary(columns: list, path: Path) -> None:
    known = _summary_columns()
    unknown = [str(c) for c in columns if c not in known]
    if unknown:
        raise InputError(f"{path}: summary: unknown column(s) {', '.join(unknown)} (known: {', '.join(known)})")


def _figure_file(name: str, where: str) -> Path:
    path = FIGURE_DIR / f"{name}.yaml"
    if not path.is_file():
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(names())})"
        raise InputError(f"{where}: no such figure{hint}")
    return path


def _read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None


def _paper_values_given(given, path: Path):
    """``paper_values`` as written, or ``{from: FIGURE}``: another figure's, for a figure whose runs
    answer the same claims under the same labels (its own entries, not another ``from``)."""
    if not isinstance(given, dict):
        return given
    if set(given) != {"from"} or not isinstance(given["from"], str):
        raise InputError(f"{path}: paper_values: expected a list of entries or {{from: FIGURE}}")
    source = _figure_file(given["from"], f"{path}: paper_values.from {given['from']!r}")
    data = _read_yaml(source)
    taken = (data.get("paper_values") or []) if isinstance(data, dict) else []
    if not isinstance(taken, list):
        raise InputError(f"{path}: paper_values.from: {source.name} takes its own from another figure; name that one")
    if not taken:
        raise InputError(f"{path}: paper_values.from: {source.name} states no paper values")
    return taken


def _known_keys(data: dict, keys: tuple, where: str) -> None:
    for key in data:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (expected one of: {', '.join(keys)})"
            raise InputError(f"{where}: {key}: unknown key{hint}")


def _runs(given: dict, path: Path) -> tuple[dict, dict, dict]:
    runs, series, looks = {}, {}, {}
    for label, entry in given.items():
        if not isinstance(entry, dict) or "scenario" not in entry:
            raise InputError(f"{path}: runs.{label}: expected {{scenario: FILE, set: [KEY=VALUE, ...], "
                             "small: [...], series: NAME, look: NAME}}")
        _known_keys(entry, RUN_KEYS, f"{path}: runs.{label}")
        scenario = SCENARIO_DIR / entry["scenario"]
        if not scenario.is_file():
            raise InputError(f"{path}: runs.{label}.scenario: {scenario} not found")
        runs[str(label)] = (scenario, [str(s) for s in entry.get("set") or []],
                            [str(s) for s in entry.get("small") or []])
        if "series" in entry:
            series[str(label)] = str(entry["series"])
        if "look" in entry:
            looks[str(label)] = str(entry["look"])
    if not runs:
        raise InputError(f"{path}: runs: a figure needs at least one run")
    return runs, series, looks


def _setup(given: dict, path: Path) -> list[Setting]:
    settings = []
    for name, entry in given.items():
        if not isinstance(entry, dict) or not {"paper", "ours"} <= set(entry):
            raise InputError(f"{path}: setup.{name}: expected {{paper: ..., ours: ..., small: ..., why: ...}}")
        _known_keys(entry, SETUP_KEYS, f"{path}: setup.{name}")
        text = {key: None if entry.get(key) is None else str(entry[key]).strip() for key in SETUP_KEYS}
        settings.append(Setting(str(name), text["paper"], text["ours"], text["small"], text["why"]))
    return settings


def _panels(given: list, variants: list[str], path: Path) -> list[Panel]:
    panels = []
    for i, entry in enumerate(given):
        where = f"{path}: panels[{i}]"
        if not isinstance(entry, dict) or not {"title", "table", "y"} <= set(entry):
            raise InputError(f"{where}: expected {{title: ..., table: METRIC, y: COLUMN, kind: ..., ...}}")
        _known_keys(entry, PANEL_KEYS, where)
        if not isinstance(entry.get("where") or {}, dict) or not isinstance(entry.get("variants") or [], list):
            raise InputError(f"{where}: expected where: {{COLUMN: VALUE or [VALUE, ...]}} and variants: [LABEL, ...]")
        if not isinstance(entry.get("whiskers") or [], list):
            raise InputError(f"{where}: expected whiskers: [LOW_COLUMN, HIGH_COLUMN]")
        fields = {**entry, "where": dict(entry.get("where") or {}), "variants": tuple(entry.get("variants") or ())}
        if entry.get("whiskers") is not None:
            fields["whiskers"] = tuple(entry["whiskers"])
        panel = Panel(**fields)
        try:
            check_panel(panel, variants)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
        panels.append(panel)
    return panels


def check(figure: Figure, small: bool, repeat: int = 1) -> dict[Instance, str]:
    """Every run's scenario resolves (InputError otherwise), before anything runs; runs that
    share a workload build it once. Returns the figure's runs (``repeat`` of each variant,
    seeds counting up from its scenario's, or its one run) and per run what makes it that run:
    its resolved scenario but its name, and where its scenario file's relative paths start."""
    from experiments.build import resolve, workloads_shared

    if repeat < 1:
        raise InputError(f"--repeat {repeat}: expected at least 1")
    identities = {}
    with workloads_shared():
        for label, (scenario, *_) in figure.runs.items():
            resolved = resolve(scenario, figure.overrides(label, small)).scenario
            seeds = [None] if repeat == 1 else [resolved["seed"] + r for r in range(repeat)]
            for seed in seeds:
                key = {**resolved, "name": None, **({} if seed is None else {"seed": seed})}
                identities[Instance(label, seed)] = json.dumps([key, str(Path(scenario).resolve().parent)],
                                                               sort_keys=True, default=str)
    return identities


def prepare_out(out: Path, force: bool) -> None:
    """``--out`` is new, empty, or an earlier call's output (its complete runs are reused);
    ``force``: an earlier call's output is removed first."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    contents = list(out.iterdir())
    earlier = (out / "runs" / "sweep.json").is_file() or (out / "figure.md").is_file()
    if contents and not earlier:
        raise InputError(f"--out {out}: already exists and holds no figure's runs")
    if force:
        shutil.rmtree(out)


def run_figures(figures: list[tuple[Figure, Path]], small: bool, analyse, max_parallel: int,
                address: str | None = None, report=print, repeat: int = 1) -> list[Path]:
    """For each (figure, out): run every variant (``repeat`` times, with seeds counting up)
    not complete in ``out`` yet (``max_parallel`` at once) and check each run's deliveries;
    then analyse all figures' runs in one job, ``analyse([(report_dir, run_dirs), ...]) ->
    exit status`` (``analysis.job.Requested``; a figure with a window twice: whole, and over
    the window); then draw each figure's panels and write its ``OUT/figure.md``. Returns the
    pages' paths; raises, once the pages are written, when a run's deliveries are not exact.
    Every run of every figure resolves before anything runs; a run an earlier figure of the
    call has too (the same scenario under another name) is copied from it, not run again."""
    identities = [check(figure, small, repeat) for figure, _ in figures]
    first_run: dict[str, Path] = {}  # a run's identity -> where the first figure that has it runs it
    checked = []
    for (figure, out), identity in zip(figures, identities):
        copies = {i.directory: (first_run[key], figure.run_name(i.label, i.seed))
                  for i, key in identity.items() if key in first_run}
        _run_variants(figure, out, small, list(identity), max_parallel, address, report, copies)
        first_run = {**{key: out / "runs" / i.directory for i, key in identity.items()}, **first_run}
        checked.append(check_deliveries(out, list(identity), report))
    reports = []
    for (figure, out), identity in zip(figures, identities):
        for report_dir in (out / "report", out / WINDOW_REPORT):
            shutil.rmtree(report_dir, ignore_errors=True)  # the analysis is always redone
        runs = [out / "runs" / i.directory for i in identity]
        window = figure.measured(small)
        reports.append(Requested(out / "report", runs, plots=_plots_over_whole_runs(figure, window),
                                 looks=_looks(figure, list(identity))))
        if window is not None:
            reports.append(Requested(out / WINDOW_REPORT, runs, window, plots=_plots_over_window(figure),
                                     looks=_looks(figure, list(identity), window)))
    if analyse(reports) != 0:
        raise RuntimeError(f"the analysis of {', '.join(str(out / 'runs') for _, out in figures)} failed")
    pages = [write_page(figure, out, small, list(identity), checks)
             for (figure, out), identity, checks in zip(figures, identities, checked)]
    wrong = [f"{out / 'runs' / directory}: {summary_line(result)}" for (_, out), checks in zip(figures, checked)
             for directory, result in checks.items() if not result["exact"]]
    if wrong:
        raise RuntimeError("deliveries not exact (pubsub-emu check RUN_DIR says where): " + "; ".join(wrong))
    return pages


def check_deliveries(out: Path, instances: list[Instance], report=print) -> dict[str, dict]:
    """``pubsub-emu check`` of each run of a figure, by run directory; kept in ``OUT/checks.json``.
    A run's own task checked it where it ran it (the sweep record holds the result), and a copy
    of a run has its source's; what neither checked is checked here. Each run keeps what its
    publications owe (its ``expected`` table) for the analysis's delivered share and backlog."""
    from actors.results import has_table
    from actors.storage import RunDir
    from experiments.check import check as check_run, load_run, write_expected
    from experiments.sweep import checked_point

    results = {}
    for instance in instances:
        run_dir = out / "runs" / instance.directory
        result = checked_point(run_dir)
        if result is None:
            result = check_run(RunDir(run_dir), keep_expected=True)
        elif not has_table(run_dir, "expected"):  # checked before runs kept what they owe
            write_expected(load_run(RunDir(run_dir)))
        results[instance.directory] = {**result, "run": str(run_dir)}
        (run_dir / CHECK_FILE).unlink(missing_ok=True)  # a copy's is a hard link to its source's: not through it
        (run_dir / CHECK_FILE).write_text(json.dumps(results[instance.directory], indent=1))
        report(f"check {instance.directory}: {summary_line(result)}")
    (out / "checks.json").write_text(json.dumps(results, indent=1))
    return results


def _looks(figure: Figure, instances: list[Instance], window: Window | None = None) -> dict[str, str]:
    """Run name in the analysis (in the report over ``window``: there) -> its look."""
    labels = _run_labels(figure, instances, window)
    return {name: (figure.looks or {})[label] for name, label in labels.items() if label in (figure.looks or {})}


def _plots_over_whole_runs(figure: Figure, window: Window | None) -> tuple[str, ...]:
    """The generic plots a figure's page shows over whole runs: all of them, or with a window
    the plots over time. Only those are drawn (a quarter of a second each, about ten a
    report); ``pubsub-emu analyze`` on the figure's directory draws every one."""
    return tuple(title for title in figure.plots if window is None or title in PLOTS_OVER_TIME)


def _plots_over_window(figure: Figure) -> tuple[str, ...]:
    """The generic plots a windowed figure shows over its window, as its panels measure: those
    not over time (the time plots show whole runs, the window within them)."""
    return tuple(title for title in figure.plots if title not in PLOTS_OVER_TIME)


def _run_variants(figure: Figure, out: Path, small: bool, instances: list[Instance], max_parallel: int,
                  address: str | None, report, copies: dict[str, tuple[Path, str]]) -> None:
    """Run ``figure``'s runs into ``out/runs``; ``copies``: run directory -> (the same run in
    an earlier figure, this one's run name), copied rather than run."""
    from experiments.sweep import Point, run_sweep

    points = [Point(i.directory, figure.runs[i.label][0], figure.instance_overrides(i, small)) for i in instances]
    report(f"figure {figure.name}{' (test-sized)' if small else ''}: {len(points)} runs into {out / 'runs'}, "
           f"then their analysis into {out / 'report'} and the page {out / 'figure.md'}")
    try:
        record = run_sweep(points, out / "runs", max_parallel, address, report, copies, check=True)
    except InputError as exc:
        raise InputError(f"{exc} (--force starts the figure over)") from None
    failed = [p["name"] for p in record["points"] if p["status"] != "complete"]
    if failed:
        raise RuntimeError(f"runs failed: {', '.join(failed)} (see {out / 'runs' / 'sweep.json'})")


def sweep_points(figure: Figure, out: Path, instances: list[Instance]) -> Sweep | None:
    """A sweep figure's x value of every variant, as its (first) run's manifest records its
    scenario (or its reciprocal: quotes a second for an interval between quotes)."""
    if figure.sweep_key is None:
        return None
    first = {}
    for instance in instances:
        first.setdefault(instance.label, instance.directory)
    points = {}
    for label in figure.runs:
        value = json.loads((out / "runs" / first[label] / "manifest.json").read_text())["scenario"]
        for part in figure.sweep_key.split("."):
            value = value[part]
        points[label] = ((figure.series or {}).get(label, label),
                         1 / float(value) if figure.sweep_reciprocal else float(value))
    return Sweep(figure.sweep_label, points)


def write_page(figure: Figure, out: Path, small: bool, instances: list[Instance] | None = None,
               checks: dict[str, dict] | None = None) -> Path:
    """``OUT/figure.png`` (the panels) and ``OUT/figure.md`` from the analysis in ``OUT/report``
    of the figure's runs (``instances``: default, one run per variant) and their checks."""
    from analysis.panels import draw

    instances = instances or [Instance(label) for label in figure.runs]
    manifests = _manifests(out, instances)
    report = out / "report"
    window = figure.measured(small)
    rows = _summary_rows(figure, report, instances)
    windowed = None if window is None else Windowed(
        out / WINDOW_REPORT / "tables", _run_labels(figure, instances, window), window, _seconds(window, rows))
    drawn = draw(figure.panels, report / "tables", _run_labels(figure, instances),
                 _headline(figure, rows, small), out / "figure.png", sweep_points(figure, out, instances), windowed,
                 figure.looks, figure.phases_at(small, manifests), figure.paper_values) \
        if figure.panels else []
    summaries = [("Summary", rows)]
    if window is not None:
        summaries = [(f"Summary over {window.phrase}",
                      _summary_rows(figure, out / WINDOW_REPORT, instances, window)), ("Summary over whole runs", rows)]
    categories = _category_values(figure, report / "tables", _run_labels(figure, instances), windowed)
    heading, stated = summaries[0]  # the rows the paper's values are read from gain the bars they name
    summaries[0] = (heading, [{**row, **categories.get(row["run"], {})} for row in stated])
    page = out / "figure.md"
    lines = _page_lines(figure, summaries, drawn, report, small, _seeds_line(instances), _checks_line(checks),
                        _backlog_line(checks))
    if unshaded := figure.unshaded(manifests):
        image = next(i for i, line in enumerate(lines) if line.startswith("!["))
        lines[image:image] = [f"Not shaded on the time panels: {', '.join(unshaded)} (no run's manifest records those "
                              "messages' injections; runs made before manifests recorded `injected`).", ""]
    page.write_text("\n".join(lines) + "\n")
    return page


def _category_values(figure: Figure, tables: Path, runs: dict[str, str], windowed: Windowed | None
                     ) -> dict[str, dict[str, float]]:
    """Variant -> the bars the paper's values name by category (``at``), as the figure's first
    categories panel of their column draws them, keyed as ``paper_values.category_column``."""
    from analysis.panels import category_values

    wanted = [value for value in figure.paper_values if value.at is not None]
    found: dict[str, dict[str, float]] = {}
    for y in dict.fromkeys(value.y for value in wanted):
        panel = _categories_panel(figure.panels, y)
        source = (windowed.tables, windowed.runs) if windowed is not None and panel.over_window() else (tables, runs)
        for variant, bars in category_values(panel, *source).items():
            for value in (v for v in wanted if v.y == y and v.run == variant):
                if value.at not in bars:
                    raise InputError(f"figure {figure.name}: paper_values: {value.claim!r}: at {value.at!r}: no such "
                                     f"category on the panel {panel.title!r} (its categories: "
                                     f"{', '.join(map(str, bars))}); mend the figure file and call figure again "
                                     "(its runs are reused)")
                found.setdefault(variant, {})[value.column] = bars[value.at]
    return found


def _manifests(out: Path, instances: list[Instance]) -> tuple[dict, ...]:
    """The manifests of the figure's runs under ``OUT/runs``."""
    return tuple(json.loads((out / "runs" / i.directory / "manifest.json").read_text()) for i in instances)


def _seeds_line(instances: list[Instance]) -> str | None:
    """What the page says of its seeds when each variant ran with several."""
    seeds = sorted({i.seed for i in instances if i.seed is not None})
    if not seeds:
        return None
    return (f"Each variant ran with {len(seeds)} seeds ({', '.join(map(str, seeds))}): every value is the {DESCRIBED} "
            "(bars carry error bars, lines a band).")


def _checks_line(checks: dict[str, dict] | None) -> str | None:
    """The page's line on ``pubsub-emu check`` of its runs."""
    if checks is None:
        return None
    wrong = {d: r for d, r in checks.items() if not r["exact"]}
    if wrong:
        return "**Deliveries checked: not exact**: " + "; ".join(f"{d}: {summary_line(r)}" for d, r in wrong.items())
    pairs = sum(r["expected_pairs"] for r in checks.values())
    excused: dict[str, int] = {}
    for result in checks.values():
        for name, n in result["excused"].items():
            excused[name] = excused.get(name, 0) + n
    named = ", ".join(f"{n:,} {name}" for name, n in excused.items() if n)
    return (f"Deliveries checked: exact (`pubsub-emu check`: {pairs:,} pairs the oracle expects over "
            f"{len(checks)} runs{'; excused: ' + named if named else ''}).")


def _backlog_line(checks: dict[str, dict] | None) -> str | None:
    """What the page says of runs that ended with more than ``BACKLOG_SHARE`` of their pairs
    still in flight: their delays count delivered pairs only."""
    ended = {d: r for d, r in (checks or {}).items()
             if r["expected_pairs"] and _in_flight_at_end(r) > BACKLOG_SHARE * r["expected_pairs"]}
    if not ended:
        return None
    parts = []
    for directory, result in ended.items():
        part = f"{directory} {_in_flight_at_end(result) / result['expected_pairs']:.0%}"
        bound = (result.get("delay") or {}).get("mean_counting_in_flight_s")
        parts.append(part + (f" (at least {_seconds_text(bound)})" if bound is not None else ""))
    return ("**Runs that ended with a backlog**: delays count delivered pairs only, so a run that ends with pairs "
            "still queued leaves its slowest out, and its mean delay falls the more it leaves queued. The share of "
            "the pairs owed that were still in flight at the end (and the mean delay with each of them counted as "
            f"delivered at the end, a lower bound on the mean over every pair owed): {'; '.join(parts)}.")


def _in_flight_at_end(result: dict) -> int:
    """The pairs a check found still queued at the end (checks made before ``delay``: those it
    excused as in flight, which leaves out any another excuse named first)."""
    return (result.get("delay") or {}).get("in_flight_at_end", result["excused"]["in flight at the end"])


def _seconds_text(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.3g} s"


def _seconds(window: Window, rows: list[dict]) -> tuple[float, float]:
    """``window`` in seconds of simulated time, for the longest of the runs (``rows``: their summary)."""
    end_us = round(max(row.get("sim_end_s") or 0 for row in rows) * 1e6)
    return tuple(us / 1e6 for us in window.of(end_us))


def _summary_rows(figure: Figure, report: Path, instances: list[Instance], window: Window | None = None
                  ) -> list[dict]:
    """The analysis's summary rows in the figure's order, one per variant named by it (in the
    report over ``window``: the runs' names there); a variant run with several seeds: the
    mean of each column and its interval (``<column>_ci``)."""
    by_run = {row["run"]: row for row in pq.read_table(report / "tables" / "summary").to_pylist()}
    members: dict[str, list[dict]] = {}
    for name, label in _run_labels(figure, instances, window).items():
        members.setdefault(label, []).append(by_run[name])
    return [{**found[0], **_over_seeds(found), "run": label} for label, found in members.items()]


def _over_seeds(rows: list[dict]) -> dict:
    """What a variant's runs with several seeds give, column by column: a value they all share
    as it is; numbers as their mean and interval (``<column>_ci``); anything else as the most
    common value and how many seeds gave it."""
    found = {}
    for column in rows[0]:
        values = [r.get(column) for r in rows]
        if len(rows) < 2 or all(v == values[0] for v in values):
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values if v is not None):
            found[column], found[f"{column}_ci"] = interval(values)
        else:
            common = max(dict.fromkeys(values), key=values.count)
            found[column] = f"{common} ({values.count(common)} of {len(values)})"
    return found


def _run_labels(figure: Figure, instances: list[Instance], window: Window | None = None) -> dict[str, str]:
    """Run name in the analysis (in the report over ``window``: there) -> its variant label,
    in the figure's order."""
    names = {}
    for instance in instances:
        name = figure.run_name(instance.label, instance.seed)
        names[name if window is None else label_in(name, window)] = instance.label
    return names


def _size(rows: list[dict]) -> str:
    """The runs' real size: brokers and simulated time."""
    brokers = sorted({row["brokers"] for row in rows if row.get("brokers") is not None})
    seconds = max((row.get("sim_end_s") or 0 for row in rows), default=0)
    span = f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds:.0f} s"
    return f"{'/'.join(f'{b:,}' for b in brokers)} brokers, {span} simulated"


def _headline(figure: Figure, rows: list[dict], small: bool) -> str:
    changed = "".join(f"; {override}" for override in figure.changed)  # a PNG shown alone says how it was run
    how = f"({_size(rows)}{', test-sized' if small else ''}{changed})"
    under = textwrap.wrap(how, HEADLINE_WIDTH, break_long_words=False, break_on_hyphens=False)  # overrides stay whole
    return "\n".join([figure.title, *under])


def _page_lines(figure: Figure, summaries: list[tuple[str, list[dict]]], drawn: list[Drawn], report: Path,
                small: bool, seeds: str | None = None, checks: str | None = None, backlog: str | None = None
                ) -> list[str]:
    """The page: source and setup line, panels, the summary tables (heading, rows; the last
    over whole runs), setup table, the generic report's plots."""
    rows = summaries[-1][1]
    departs = [s.name for s in figure.setup if s.departs]
    lines = [f"# {figure.title}", ""]
    source = f"Paper: *{figure.paper}*" + (f", {figure.paper_figure}" if figure.paper_figure else "") + "."
    if small:
        lines.append(f"{source} **Test-sized runs (--small)**; the setup departs from the paper's"
                     + (f" in {', '.join(departs)} and in size" if departs else " in size") + " (table below).")
    elif departs:
        lines.append(f"{source} **The setup departs from the paper's** in {', '.join(departs)} (table below).")
    else:
        lines.append(f"{source} The setup is the paper's (table below).")
    if figure.changed:
        lines += ["", f"**Changed from the figure's setup** for every run (`figure --set`): {_changed(figure)}."]
    lines += ["", f"Runs: {', '.join(figure.runs)}; {_size(rows)}.", ""]
    lines += [line for extra in (seeds, checks, backlog) if extra for line in (extra, "")]
    if any(d.note is None for d in drawn):
        lines += [f"![{figure.title}](figure.png)", ""]
    for d in drawn:
        lines.append(_panel_caption(d, figure.measured(small) is not None))
    if small and figure.small_keeps:
        lines += ["", f"Test-sized: {figure.small_keeps}"]
    if figure.paper_values:
        lines += ["", f"## The paper's values beside ours ({summaries[0][0][0].lower()}{summaries[0][0][1:]})", "",
                  paper_values.table(list(figure.paper_values), summaries[0][1])]
    for heading, summary_rows in summaries:
        lines += ["", f"## {heading}", "", _summary_table(figure, summary_rows)]
    if figure.setup:
        lines += ["", "## Setup: the paper's and ours", "", _setup_table(figure.setup, small)]
        if figure.changed:
            lines += ["", f"The table gives the figure's own setup; these runs changed it with {_changed(figure)} "
                      "(`figure --set`)."]
    lines += _generic_report(figure, report, figure.measured(small))
    return lines


def _changed(figure: Figure) -> str:
    return ", ".join(f"`{override}`" for override in figure.changed)


def _panel_caption(d: Drawn, windowed: bool) -> str:
    from analysis.style import measure, relative

    y = relative(d.panel.y, d.panel.relative_to) if d.panel.relative_to else measure(d.panel.y)
    text = f"y: {y.label.replace(chr(10), ' ')}, {y.definition}"
    if d.panel.kind in ("cdf", "curve"):
        x = measure(d.panel.x)
        text += f"; x: {x.label}, {x.definition}"
    elif d.panel.kind == "time":
        text += ", a step at each event" if y.steps else ", per time bucket (or sample) of the analysis"
        if windowed:
            text += "; shaded: the window the other panels measure"
    elif d.panel.table == "summary":
        text += " (one value per run)"
    if d.panel.whiskers:
        low, high = (measure(column).label for column in d.panel.whiskers)
        text += f"; whiskers: from the {low} to the {high}"
    if d.window is not None:
        text += f", over {d.window}"
    elif windowed and d.panel.kind != "time":
        text += ", over whole runs"
    title = d.panel.title + (f" (the paper's {d.panel.paper_panel})" if d.panel.paper_panel else "")
    if d.note is not None:
        return f"- ({d.letter}) {title}: **not drawn, {d.note}** ({text})."
    return f"- ({d.letter}) {title}. {text[0].upper()}{text[1:]}."


def _summary_table(figure: Figure, rows: list[dict]) -> str:
    from analysis.report import SUMMARY_COLUMNS, markdown_table

    wanted = ["run", *figure.summary]
    if "peak_queue" in wanted:  # a peak says where and when
        at = wanted.index("peak_queue") + 1
        wanted[at:at] = ["peak_broker", "t_peak_s"]
    by_name = {c[0]: c for c in SUMMARY_COLUMNS}
    return markdown_table(rows, [by_name[c] for c in wanted])


def _setup_table(setup: list[Setting], small: bool) -> str:
    from analysis.report import escaped

    def cell(text: str | None) -> str:
        return escaped(text or "")

    heading = "| setting | paper | ours |" + (" test-sized |" if small else "") + " why they differ |"
    lines = [heading, "|" + "---|" * (5 if small else 4)]
    for s in setup:
        mark = " (differs)" if s.departs else ""
        row = f"| {s.name}{mark} | {cell(s.paper)} | {cell(s.ours)} |"
        if small:
            row += f" {cell(s.small) if s.small else 'as ours'} |"
        lines.append(row + f" {cell(s.why) if s.departs or s.why else ''} |")
    return "\n".join(lines)


def _generic_report(figure: Figure, report: Path, window: Window | None) -> list[str]:
    """The figure's generic plots: over its ``window`` where it has one and a plot measures a
    stretch of each run (as its panels do), otherwise over whole runs."""
    lines = ["", "## The generic report", ""]
    drawn = {title: f"{report.name}/{image}" for title, image in _drawn_plots(report).items()}
    if window is not None:
        lines += [f"Plots over time show whole runs; the others measure {window.phrase}, as the panels do.", ""]
        over = report.parent / WINDOW_REPORT
        drawn |= {title: f"{over.name}/{image}" for title, image in _drawn_plots(over).items()
                  if title in _plots_over_window(figure)}
    for title in figure.plots:
        if title in drawn:
            lines += [f"### {title}", "", f"![{title}]({drawn[title]})", ""]
    lines.append("Every metric of these runs: [report/report.md](report/report.md); every generic plot: "
                 "`pubsub-emu analyze DIR --out REPORT`, DIR this figure's directory.")
    return lines


def _drawn_plots(report: Path) -> dict[str, str]:
    """Plot title -> image file, as the analysis report lists them."""
    drawn = {}
    for line in (report / "report.md").read_text().splitlines():
        if line.startswith("![") and "](" in line:
            title, image = line[2:].split("](", 1)
            drawn[title] = image.rstrip(")")
    return drawn
