"""Instructions per broker event (issue 40): a measure of a speed change that this noisy
machine cannot blur.

Wall times on these 2-core machines drift by up to 2x within an hour; the instructions a run
executes do not. This runs ``bench_engine.py``'s workload (hosts 0, zero costs) under
valgrind's callgrind at two sizes and reports the instructions per broker event from the
difference between them, so start-up, imports and loading numba's kernels cancel out. With
``--vs DIR`` it measures another checkout of the project the same way (for example one made
by ``git worktree add DIR REV``) and prints the ratio. Both must run the same build: a new worktree
has no compiled modules (``python setup.py build_ext --inplace`` there compiles them), and an
edited checkout runs its sources until compiled again; the script names each checkout's build
and refuses to compare two different ones (a checkout older than that naming is compared as it
is). ``PUBSUB_EMU_PURE_PYTHON=1`` compares the sources.

    python bench/bench_instructions.py [--covering active] [--operations 1000,3000] [--vs DIR] [--layers]

``--layers`` also keeps each run's profile and prints, per checkout, where an event's
instructions are: each function's own instructions, differenced between the two sizes, summed
by the layer its shared object belongs to (CPython, libc, NumPy, numba's call interface, the
kernels' compiled code, the modules compiled with mypyc, Arrow); and, on the compiled build, who
asks for them: the engine's loop, the handlers, the tables' methods they call, numba's dispatcher,
each with all it calls. Needs ``callgrind_annotate``, which comes with valgrind.

Needs valgrind. Under it a run is about 50x slower than natively. Instructions are not time
(cache misses and numba's kernels weigh differently), so quote a ratio of instructions as such.

Every run, counted or not, compiles numba's kernels for a generic x86-64 CPU
(``NUMBA_CPU_NAME=generic``): valgrind shows the program another CPU than the machine's, so
kernels cached for the machine's CPU would not be found under it, and every counted run would
compile them anew, counting LLVM's work as the emulator's (sessions 66 and 67, bench/LOG.md). A
kernel's cache index written during the counted runs means one was compiled there: the script
then says so and gives no counts.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from protocols.compiled import PURE_PYTHON  # noqa: E402

COLLECTED = re.compile(r"Collected : (\d+)")
# kernels cached for one CPU whatever CPU the program is shown (see the module's docstring)
PORTABLE_KERNELS = os.environ | {"NUMBA_CPU_NAME": "generic"}


def engine_command(tree: Path, operations: int, covering: str) -> list[str]:
    return [sys.executable, str(tree / "bench" / "bench_engine.py"), "--operations", str(operations),
            "--hosts", "0", "--profiles", "zero", "--covering", covering]


def counted_run(tree: Path, operations: int, covering: str, profile: str = "/dev/null") -> tuple[int, int]:
    """The broker events and the instructions of one run under callgrind (its profile written to ``profile``)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", *engine_command(tree, operations, covering)],
        capture_output=True, text=True, check=False, env=PORTABLE_KERNELS,
    )
    instructions = COLLECTED.search(done.stderr)
    if done.returncode or instructions is None:
        sys.exit(f"bench_instructions: the run of {tree} at {operations} operations failed:\n{done.stderr[-2000:]}")
    events = int(done.stdout.strip().splitlines()[-1].split()[2])
    return events, int(instructions.group(1))


# a function's layer, by the shared object it is in (callgrind_annotate's "[object]"), first match
LAYERS = (
    ("numba's call interface", ("_dispatcher", "_helperlib", "_nrt_python", "/numba/")),
    ("NumPy's C", ("_multiarray_umath", "/numpy/")),
    ("Arrow", ("libarrow", "libparquet", "/pyarrow/")),
    ("CPython", ("libpython", "/bin/python")),
    ("the modules compiled with mypyc", ("__mypyc.",)),
    ("libc", ("libc.so", "libm.so", "ld-linux", "libstdc++")),
)
OWN_COST = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*?)(?: \[(.*)\])?$")


def own_instructions(profile: Path, inclusive: bool = False) -> Counter:
    """Each function's own instructions in a callgrind profile (``inclusive``: with its callees'),
    keyed by (function, object)."""
    # (--auto=no: no annotated sources, whose call lines would count again; the compiled build's C is there)
    listing = subprocess.run(["callgrind_annotate", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}",
                              "--auto=no", str(profile)], capture_output=True, text=True, check=True).stdout
    costs: Counter = Counter()
    functions = listing.split("file:function", 1)[-1].splitlines()[1:]
    for line in functions:
        cost = OWN_COST.match(line)
        if cost and line.strip():
            key = cost.group(2), cost.group(3) or ""
            instructions = int(cost.group(1).replace(",", ""))
            costs[key] = max(costs[key], instructions) if inclusive else costs[key] + instructions
    return costs


def layer_of(function: str, shared_object: str) -> str:
    for layer, marks in LAYERS:
        if any(mark in shared_object for mark in marks):
            return layer
    if shared_object in ("", "???"):  # no object: CPython's inlined header functions, or numba's compiled code
        return "CPython" if "Python-3" in function or "/Include/" in function else "the kernels' compiled code"
    return "other objects"


def print_layers(tree: Path, small: Path, large: Path, events: int) -> None:
    """Per event, the instructions of each layer between the two runs' profiles."""
    difference = own_instructions(large)
    difference.subtract(own_instructions(small))
    layers: Counter = Counter()
    for (function, shared_object), instructions in difference.items():
        layers[layer_of(function, shared_object)] += instructions
    total = sum(layers.values())
    print(f"where an event's instructions are, {tree}:")
    for layer, instructions in sorted(layers.items(), key=lambda item: -item[1]):
        print(f"  {layer:<32} {instructions / events:>9,.0f} {100 * instructions / total:6.1f}%")


# who asks for an event's instructions, by the compiled build's entry points (mypyc names a function
# CPyDef_<module>___<Class>___<method>, and CPyPy_... where it is called from Python)
CALLERS = (
    ("the engine's run loop", "CPyDef_engine___Engine___run_until"),
    ("  handling messages (the handlers and what they call)", "CPyDef_engine___Engine____start"),
    ("the result rows written after each window (Arrow)", "CPyDef_results___TableWriter___flush"),
    ("numba's dispatcher: typing, unboxing, kernels, boxing", "Dispatcher_call(Dispatcher*, _object*, _object*)"),
    ("  of which unboxing, kernels, boxing", "call_cfunc(Dispatcher*, _object*, _object*, _object*, _object*)"),
)
TABLE_METHOD = re.compile(r"CPyPy_(routing___RoutingTable|index___FilterIndex|index_storage___IndexStorage)___[a-z]")


def by_name(profile: Path) -> Counter:
    """Each function's inclusive instructions, by its name (listed once per file it is in)."""
    costs: Counter = Counter()
    for (function, _), instructions in own_instructions(profile, inclusive=True).items():
        name = function.rsplit(":", 1)[-1]
        costs[name] = max(costs[name], instructions)
    return costs


def print_callers(small: Path, large: Path, events: int) -> None:
    """Per event, the instructions of the compiled build's entry points with all they call: the
    table methods the (interpreted) handlers call, and the handlers' own share beside them."""
    difference = by_name(large)
    difference.subtract(by_name(small))
    if not difference[CALLERS[0][1]]:
        print("  (the pure-Python build: its callers are not told apart here)")
        return
    tables = sum(n for function, n in difference.items() if TABLE_METHOD.match(function))
    print("who asks for them (each with all it calls):")
    for label, function in CALLERS[:2]:
        print(f"  {label:<56} {difference[function] / events:>9,.0f}")
    handlers = difference[CALLERS[1][1]] - tables
    for label, instructions in (("    the tables' methods the handlers call", tables),
                                ("    the handlers themselves (interpreted), the rest", handlers)):
        print(f"  {label:<56} {instructions / events:>9,.0f}")
    for label, function in CALLERS[2:]:
        print(f"  {label:<56} {difference[function] / events:>9,.0f}")


UNNAMED = "not named (its bench_engine.py is older than the line naming it), compared as it is"


def builds_differ(builds: list[str]) -> bool:
    """Whether the checkouts run different builds (code that does not name its build is compared as it is)."""
    return len(set(builds)) > 1 and UNNAMED not in builds


def warm_up(tree: Path, operations: int, covering: str) -> str:
    """Runs the workload once outside valgrind (numba compiles into the checkout's cache there);
    the build it ran on, as ``bench_engine.py`` names it."""
    done = subprocess.run(engine_command(tree, operations, covering), capture_output=True, text=True, check=True,
                          env=PORTABLE_KERNELS)
    return next((line.removeprefix("build: ") for line in done.stdout.splitlines() if line.startswith("build: ")),
                UNNAMED)


def kernel_cache_stamps(trees: list[Path]) -> dict[Path, int]:
    """When each kernel's cache index in the checkouts was last written (numba rewrites it when it compiles)."""
    return {path: path.stat().st_mtime_ns for tree in trees for path in (tree / "protocols").glob("**/*.nbi")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--covering", default="active", choices=("none", "lazy", "active"))
    parser.add_argument("--operations", default="1000,3000", help="the two sizes, small first")
    parser.add_argument("--vs", type=Path, help="another checkout of the project to measure the same way")
    parser.add_argument("--layers", action="store_true", help="also print where an event's instructions are")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    sizes = tuple(int(n) for n in args.operations.split(",") if n.strip().isdigit())
    if len(sizes) != 2 or not 0 < sizes[0] < sizes[1]:
        parser.error(f"--operations: two sizes, the smaller first (got {args.operations!r})")
    trees = [HERE] + ([args.vs.resolve()] if args.vs else [])
    builds = {tree: warm_up(tree, sizes[1], args.covering) for tree in trees}
    for tree, build in builds.items():
        print(f"{tree}: {build}")
    if builds_differ(list(builds.values())):
        sys.exit("bench_instructions: the checkouts run different builds, so their ratio would be mostly that; "
                 "compile the other in place (`python setup.py build_ext --inplace` there) or compare the "
                 f"pure-Python builds ({PURE_PYTHON}=1)")
    with tempfile.TemporaryDirectory(prefix="bench_instructions-") as kept:
        runs = [(tree, n) for tree in trees for n in sizes]
        profile = {run: f"{kept}/{number}.out" if args.layers else "/dev/null" for number, run in enumerate(runs)}
        counted = count(runs, args.covering, profile)
        print_counts(counted, trees, sizes)
        if args.layers:
            for tree in trees:
                (small_events, _), (large_events, _) = counted[tree, sizes[0]], counted[tree, sizes[1]]
                small_profile, large_profile = Path(profile[tree, sizes[0]]), Path(profile[tree, sizes[1]])
                print_layers(tree, small_profile, large_profile, large_events - small_events)
                print_callers(small_profile, large_profile, large_events - small_events)


def count(runs: list[tuple[Path, int]], covering: str, profile: dict) -> dict:
    """Per (checkout, operations): (events, instructions), two runs at a time; none if a kernel compiled."""
    trees = sorted({tree for tree, _ in runs})
    cached = kernel_cache_stamps(trees)
    with ThreadPoolExecutor(max_workers=2) as pool:
        counted = dict(zip(runs, pool.map(lambda run: counted_run(*run, covering, profile[run]), runs)))
    compiled = sorted(path.name for path, stamp in kernel_cache_stamps(trees).items() if cached.get(path) != stamp)
    if compiled:
        sys.exit(f"bench_instructions: numba compiled kernels during the counted runs ({', '.join(compiled)}), so the "
                 "counts include LLVM's work; run it again (they are cached now)")
    return counted


def print_counts(counted: dict, trees: list[Path], sizes: tuple[int, int]) -> None:
    small, large = sizes
    per_event = {}
    print(f"{'checkout':<32} {'operations':>10} {'events':>9} {'instructions':>16}")
    for tree in trees:
        for n in sizes:
            events, instructions = counted[tree, n]
            print(f"{str(tree):<32} {n:>10,} {events:>9,} {instructions:>16,}")
        (events_small, small_count), (events_large, large_count) = counted[tree, small], counted[tree, large]
        per_event[tree] = (large_count - small_count) / (events_large - events_small)
    for tree in trees:
        print(f"instructions per event, {tree}: {per_event[tree]:,.0f}")
    if len(trees) > 1:
        print(f"ratio {trees[0]} / {trees[1]}: {per_event[trees[0]] / per_event[trees[1]]:.4f}")


if __name__ == "__main__":
    main()
