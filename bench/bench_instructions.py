"""Instructions per broker event (issue 40): a measure of a speed change that this noisy
machine cannot blur.

Wall times on these 2-core machines drift by up to 2x within an hour; the instructions a run
executes do not. This runs ``bench_engine.py``'s workload (hosts 0, zero costs) under
valgrind's callgrind at two sizes and reports the instructions per broker event from the
difference between them, so start-up, imports and loading numba's kernels cancel out. With
``--vs DIR`` it measures another checkout of the project the same way (for example one made
by ``git worktree add DIR REV``) and prints the ratio.

    python bench/bench_instructions.py [--covering active] [--operations 1000,3000] [--vs DIR]

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected : (\d+)")
# kernels cached for one CPU whatever CPU the program is shown (see the module's docstring)
PORTABLE_KERNELS = os.environ | {"NUMBA_CPU_NAME": "generic"}


def engine_command(tree: Path, operations: int, covering: str) -> list[str]:
    return [sys.executable, str(tree / "bench" / "bench_engine.py"), "--operations", str(operations),
            "--hosts", "0", "--profiles", "zero", "--covering", covering]


def counted_run(tree: Path, operations: int, covering: str) -> tuple[int, int]:
    """The broker events and the instructions of one run under callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *engine_command(tree, operations, covering)],
        capture_output=True, text=True, check=False, env=PORTABLE_KERNELS,
    )
    instructions = COLLECTED.search(done.stderr)
    if done.returncode or instructions is None:
        sys.exit(f"bench_instructions: the run of {tree} at {operations} operations failed:\n{done.stderr[-2000:]}")
    events = int(done.stdout.strip().splitlines()[-1].split()[2])
    return events, int(instructions.group(1))


def kernel_cache_stamps(trees: list[Path]) -> dict[Path, int]:
    """When each kernel's cache index in the checkouts was last written (numba rewrites it when it compiles)."""
    return {path: path.stat().st_mtime_ns for tree in trees for path in (tree / "protocols").glob("**/*.nbi")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--covering", default="active", choices=("none", "lazy", "active"))
    parser.add_argument("--operations", default="1000,3000", help="the two sizes, small first")
    parser.add_argument("--vs", type=Path, help="another checkout of the project to measure the same way")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    small, large = (int(n) for n in args.operations.split(","))
    trees = [HERE] + ([args.vs.resolve()] if args.vs else [])
    for tree in trees:  # numba compiles into each checkout's cache once, outside the counted runs
        subprocess.run(engine_command(tree, large, args.covering), capture_output=True, check=True, env=PORTABLE_KERNELS)
    runs = [(tree, n) for tree in trees for n in (small, large)]
    cached = kernel_cache_stamps(trees)
    with ThreadPoolExecutor(max_workers=2) as pool:
        counted = dict(zip(runs, pool.map(lambda run: counted_run(*run, args.covering), runs)))
    compiled = sorted(path.name for path, stamp in kernel_cache_stamps(trees).items() if cached.get(path) != stamp)
    if compiled:
        sys.exit(f"bench_instructions: numba compiled kernels during the counted runs ({', '.join(compiled)}), so the "
                 "counts include LLVM's work; run it again (they are cached now)")
    per_event = {}
    print(f"{'checkout':<32} {'operations':>10} {'events':>9} {'instructions':>16}")
    for tree in trees:
        for n in (small, large):
            events, instructions = counted[tree, n]
            print(f"{str(tree):<32} {n:>10,} {events:>9,} {instructions:>16,}")
        (events_small, small_count), (events_large, large_count) = counted[tree, small], counted[tree, large]
        per_event[tree] = (large_count - small_count) / (events_large - events_small)
    for tree in trees:
        print(f"instructions per event, {tree}: {per_event[tree]:,.0f}")
    if args.vs:
        print(f"ratio {HERE} / {trees[1]}: {per_event[HERE] / per_event[trees[1]]:.4f}")


if __name__ == "__main__":
    main()
