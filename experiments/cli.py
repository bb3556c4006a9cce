"""``pubsub-emu``: run, validate, check, sweep, analyze, figure and calibrate (DESIGN.md section 9).

Exit status: 0 on success, 2 on invalid input (one message naming the file and line or key,
no traceback, nothing written), 1 on a run that failed after starting.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from datetime import datetime
from functools import partial
from pathlib import Path

from protocols.errors import InputError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pubsub-emu", description="Content-based pub/sub routing emulator on Ray")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a scenario, or resume an interrupted run")
    run.add_argument("scenario", type=Path, nargs="?")
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue an interrupted run from its latest checkpoint (runtime.checkpoint_every)")
    run.add_argument("--out", help="the run directory (exactly this path, or a URI such as s3://bucket/runs/x)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario key, e.g. --set runtime.hosts=2")
    run.add_argument("--address", help="address of a running Ray cluster (default: start a local one)")
    validate = commands.add_parser("validate", help="check scenarios without running them")
    validate.add_argument("scenarios", nargs="+", type=Path, metavar="scenario",
                          help="scenario files (those sharing a workload build it once)")
    validate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    validate.add_argument("--stats", action="store_true",
                          help="also measure the covering structure (roots and the subscriptions each covers) and the "
                               "matching share (the fraction of subscriptions a publication matches)")
    validate.add_argument("--stats-at", dest="stats_at", action="append", default=[], type=float, metavar="SECONDS",
                          help="also measure it over the subscriptions present at this simulated time (repeatable)")
    sweep = commands.add_parser("sweep", help="run a grid of scenario variants as concurrent Ray tasks")
    sweep.add_argument("scenario", type=Path)
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="one axis of the grid")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key for every point")
    sweep.add_argument("--repeat", type=int, default=1, help="runs per point, seeds counting up from the scenario's")
    sweep.add_argument("--out", type=Path, help="the sweep directory (default: under output.dir)")
    sweep.add_argument("--max-parallel", type=int, help="points running at once (default: this machine's CPUs)")
    sweep.add_argument("--address", help="address of a running Ray cluster (default: start a local one)")
    analyze = commands.add_parser("analyze", help="turn run directories into metric tables, plots and a report (Spark)")
    analyze.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run or sweep directories (or run URIs)")
    analyze.add_argument("--out", type=Path, default=Path("report"), help="report directory (default: report)")
    analyze.add_argument("--bucket", type=float, help="time bucket in seconds (default: about 1/100 of the run)")
    analyze.add_argument("--master", default="local[*]", help="Spark master (default: local[*])")
    analyze.add_argument("--driver-memory", help="Spark driver memory (default: 2g for small runs, 4g otherwise)")
    from analysis import window

    window.add_arguments(analyze)
    figure = commands.add_parser("figure", help="run and report figures of the seed papers")
    figure.add_argument("names", nargs="*", metavar="name",
                        help="the figure (see --list); several are analysed in one Spark job")
    figure.add_argument("--all", action="store_true", help="every figure")
    figure.add_argument("--list", action="store_true",
                        help="the figures: paper, figure number, setup and the wall time of their full size")
    figure.add_argument("--markdown", action="store_true", help="with --list: the catalogue as a Markdown table")
    figure.add_argument("--out", type=Path,
                        help="output directory (default: figures/NAME); of several figures, the parent of "
                             "one directory each (default: figures)")
    figure.add_argument("--small", action="store_true", help="test-sized runs")
    figure.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="an override for every run, after the figure's own (e.g. runtime.costs=publiy); "
                             "the page names it")
    figure.add_argument("--repeat", type=int, default=1,
                        help="runs per variant, seeds counting up from its scenario's: the page gives means with "
                             "95%% confidence intervals (default: 1)")
    figure.add_argument("--force", action="store_true",
                        help="start over: remove --out's earlier runs and report (default: reuse complete runs)")
    figure.add_argument("--max-parallel", type=int, help="runs at once (default: this machine's CPUs)")
    figure.add_argument("--address", help="address of a running Ray cluster (default: start a local one)")
    figure.add_argument("--driver-memory", help="the analysis's Spark driver memory (default: 2g for small runs, 4g "
                        "otherwise; full-size figures of several long runs may need more)")
    check = commands.add_parser("check", help="compare runs' deliveries with the delivery oracle of their scenario")
    check.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (or URIs), sweep or figure directories")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    commands.add_parser("protocols", help="list the installed protocols: papers, settings, what they compose with")
    calibrate = commands.add_parser("calibrate", help="time this machine's index and fit a cost profile")
    calibrate.add_argument("--out", type=Path, default=Path("calibrated.yaml"))
    calibrate.add_argument("--sizes", default="1000,4000,16000", help="routing-table sizes to time")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        commands = {"run": _run, "validate": _validate, "sweep": _sweep, "analyze": _analyze, "figure": _figure,
                    "calibrate": _calibrate, "check": _check, "protocols": _protocols}
        return commands[args.command](args)
    except InputError as exc:
        print(f"pubsub-emu: error: {exc}", file=sys.stderr)
        return 2


def _check_out_free(out) -> None:
    """``--out`` (a path or a URI) may be new or an empty directory, so nothing is overwritten."""
    from actors.storage import RunDir

    try:
        found = RunDir(out)
        free = not found.exists() or (found.is_dir() and not found.names())
    except (ValueError, OSError) as exc:
        raise InputError(f"--out {out}: {exc}") from None
    if not free:
        raise InputError(f"--out {out}: already exists and is not an empty directory")


def _max_parallel(args) -> int:
    """``--max-parallel``, or this machine's CPUs."""
    if args.max_parallel is not None and args.max_parallel < 1:
        raise InputError(f"--max-parallel {args.max_parallel}: expected at least 1")
    return args.max_parallel or os.cpu_count() or 1


def _run_directory(args, spec) -> str:
    """``--out``, or a new directory named after the scenario under ``output.dir``."""
    from actors.storage import RunDir

    if args.out is not None:
        _check_out_free(args.out)
        RunDir(args.out).delete("")  # an empty directory: the run makes it again
        return args.out
    parent = spec.scenario["output"]["dir"].rstrip("/")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = f"{parent}/{spec.name}-{stamp}", 1
    try:
        while RunDir(candidate).exists():
            n += 1
            candidate = f"{parent}/{spec.name}-{stamp}-{n}"
    except (ValueError, OSError) as exc:
        raise InputError(f"output.dir {parent}: {exc}") from None
    return candidate


def _stop_run(number: int, frame) -> None:
    from actors.coordinator import request_stop

    reason = f"run stopped by {signal.Signals(number).name}"
    request_stop(reason)
    sys.exit(reason)


def _run(args) -> int:
    from actors.coordinator import resume, run, stop_reason
    from experiments.build import resolve
    from protocols.compiled import build_name

    if args.resume is not None:
        if args.scenario is not None or args.out is not None or args.overrides:
            raise InputError("run --resume RUN_DIR continues that run's own scenario: give no scenario, --out or --set")
        run_dir = args.resume
        start = partial(resume, run_dir, address=args.address)
    elif args.scenario is None:
        raise InputError("run: name a scenario file, or --resume RUN_DIR")
    else:
        spec = resolve(args.scenario, args.overrides)
        run_dir = _run_directory(args, spec)
        start = partial(run, spec, run_dir, address=args.address)
    for stop in (signal.SIGTERM, signal.SIGHUP):  # so the manifest records status "failed"
        signal.signal(stop, _stop_run)
    try:
        manifest = start()
    except InputError:
        raise
    except Exception as exc:  # (after a stop signal, whatever it interrupted may fail in its own words)
        outcome = stop_reason() or f"run failed: {type(exc).__name__}: {exc}"
        print(f"pubsub-emu: {outcome}\n{run_dir}", file=sys.stderr)
        return 1
    rate = manifest.get("events_per_s", 0)
    where = "in-process" if manifest["hosts"] == 0 else f"on {manifest['hosts']} host(s)"
    print(f"{manifest['events']} messages over {manifest['sim_end_us'] / 1e6:.3f} s simulated in "
          f"{manifest['wall_s']:.1f} s wall ({rate:,.0f} events/s) {where}, {build_name()}", file=sys.stderr)
    print(run_dir)
    return 0


def _validate(args) -> int:
    from experiments.build import workloads_shared

    with workloads_shared():
        for path in args.scenarios:
            _validate_one(path, args.overrides, args.stats, args.stats_at)
    return 0


def _validate_one(path: Path, overrides: list[str], stats: bool, stats_at: list[float]) -> None:
    from experiments.build import resolve

    spec = resolve(path, overrides)
    duration = "until idle" if spec.duration_us is None else f"{spec.duration_us / 1e6:g} s"
    print(f"{path}: valid: {spec.graph.number_of_nodes()} brokers, {len(spec.injections)} operations, "
          f"duration {duration}, hosts {spec.hosts}, costs {spec.costs.name}")
    if not (stats or stats_at):
        return
    from workloads import structure

    injections, probes, listeners = structure.without_probes(spec.injections)
    if probes:
        print(f"delay probes: {probes:,} publications to {listeners:,} subscribers, left out of what follows")
    if stats:
        print("\n".join(structure.covering_structure(structure.subscriptions_of(injections)).lines()))
        per_broker = {broker: structure.covering_structure(filters)
                      for broker, filters in structure.subscriptions_by_broker(injections).items()}
        print("\n".join(structure.per_broker_lines(per_broker)))
        print("\n".join(structure.matching_shares(injections).lines()))
    for seconds in stats_at:
        present = structure.subscriptions_at(injections, round(seconds * 1_000_000))
        print("\n".join(structure.covering_structure(present).lines(f"covering at {seconds:g} s")))


def _analyze(args) -> int:
    from analysis import window

    try:
        measured = window.from_arguments(args)
    except ValueError as exc:
        raise InputError(f"analyze: {exc}") from None
    return analyse(args.runs, args.out, args.bucket, args.master, args.driver_memory, measured)


def analyse(runs: list[Path], out: Path, bucket: float | None = None, master: str = "local[*]",
            driver_memory: str | None = None, measured=None) -> int:
    """Run ``analysis/job.py`` with the spark-submit that ships with pyspark, in its own process;
    ``measured`` (an ``analysis.window.Window``): what of each run the metrics measure."""
    from analysis.job import Requested

    return analyse_reports([Requested(out, runs)], bucket, master, driver_memory, measured)


def analyse_reports(reports: list, bucket: float | None = None, master: str = "local[*]",
                    driver_memory: str | None = None, measured=None) -> int:
    """``analyse`` for several reports (``analysis.job.Requested``: directory, runs and maybe a
    window of its own) in one Spark job: each report of its runs alone, every metric computed
    for all of them at once."""
    import analysis.job
    from analysis.runs import RunError, check_runs
    from analysis.submit import run_job
    from analysis.window import WHOLE_RUN
    from experiments.sweep import run_dirs

    measured = measured or WHOLE_RUN
    expanded = []
    for requested in reports:
        runs = [run for path in requested.runs for run in run_dirs(path)]  # a sweep directory stands for its points
        if not runs:
            raise InputError("analyze: the sweep directories given hold no complete point")
        expanded.append(requested._replace(runs=runs))
    try:  # fail fast, before a JVM starts
        checked = [run for requested in expanded for run in check_runs(requested.runs, requested.window or measured)]
    except RunError as exc:
        raise InputError(str(exc)) from None
    return run_job(expanded, analysis.job.is_small(checked), bucket, master, driver_memory, measured)


def _sweep(args) -> int:
    from experiments import sweep
    from experiments.build import resolve, workloads_shared

    axes = sweep.parse_grid(args.grid)
    base = resolve(args.scenario, args.overrides)
    points = sweep.points(args.scenario, axes, args.repeat, base.name, base.seed, args.overrides)
    with workloads_shared():  # every point is valid before anything runs
        for point in points:
            resolve(args.scenario, point.overrides)
    max_parallel = _max_parallel(args)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path(base.scenario["output"]["dir"]) / f"{base.name}-sweep-{stamp}"
    record = sweep.run_sweep(points, out, max_parallel, args.address,
                             report=lambda line: print(line, file=sys.stderr))
    failed = [p["name"] for p in record["points"] if p["status"] != "complete"]
    if failed:
        print(f"pubsub-emu: sweep: {len(failed)} of {len(points)} points failed: {', '.join(failed)}", file=sys.stderr)
    print(out)
    return 1 if failed else 0


def _figure(args) -> int:
    from experiments import figures

    if args.list:
        print(figures.catalogue() if args.markdown else figures.listing(args.out or Path("figures")))
        return 0
    names = figures.names() if args.all else args.names
    if not names:
        raise InputError("figure: name a figure (or several, or --all), or --list to see them")
    if args.all and args.names:
        raise InputError("figure: name figures or give --all, not both")
    if len(set(names)) != len(names):
        raise InputError(f"figure: a figure is named twice: {' '.join(names)}")
    chosen = [dataclasses.replace(figures.load(name).sized(args.small), changed=tuple(args.overrides)) for name in names]
    suffix = ("-small" if args.small else "") + (f"-repeat{args.repeat}" if args.repeat > 1 else "")
    if len(chosen) == 1:
        outs = [args.out or Path("figures") / (names[0] + suffix)]
    else:
        outs = [(args.out or Path("figures")) / (name + suffix) for name in names]
    for out in outs:
        figures.prepare_out(out, args.force)
    max_parallel = _max_parallel(args)
    try:  # run_figures resolves every run before anything runs
        analyse = partial(analyse_reports, driver_memory=args.driver_memory)
        pages = figures.run_figures(list(zip(chosen, outs)), args.small, analyse, max_parallel, args.address,
                                    report=lambda line: print(line, file=sys.stderr), repeat=args.repeat)
    except InputError:
        raise
    except Exception as exc:
        print(f"pubsub-emu: figure failed: {exc}; run the same command again to reuse the complete runs",
              file=sys.stderr)
        return 1
    for page in pages:
        print(page)
    return 0


def _check(args) -> int:
    from experiments import check

    return check.main(args.runs, args.json)


def _protocols(args) -> int:
    from protocols.plugins import describe

    print(describe())
    return 0


def _calibrate(args) -> int:
    from actors.calibrate import calibrate

    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise InputError(f"--sizes {args.sizes!r}: expected comma-separated integers") from None
    if not sizes or min(sizes) < 10:
        raise InputError(f"--sizes {args.sizes!r}: each size must be at least 10")
    calibrate(args.out, sizes)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
