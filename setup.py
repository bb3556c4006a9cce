"""The build's one step that pyproject.toml cannot hold: the per-message modules named in
protocols/compiled.py compiled with mypyc from their own source, where mypyc and a C compiler are
at hand. Where they are not, the package is built pure Python and runs the same, slower; the
install then says why (shown with `pip install -v`), and every run names the build it ran on
(`pubsub-emu run`). PUBSUB_EMU_PURE_PYTHON=1 runs the sources of a compiled build."""
import ast
import hashlib
import json
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
DIGESTS = "protocols/compiled_sources.json"  # (see protocols/compiled.py)
COMPILED_DIGESTS: dict[str, str] = {}
# pip's metadata steps (each runs this file again): mypyc's type check and translation, about 9 s
# each (an install took 54 s with them, 35 s without: bench/LOG.md, session 71), would be thrown away
METADATA_ONLY = {"egg_info", "dist_info"}


def compiled_modules() -> tuple[str, ...]:
    """``COMPILED`` of protocols/compiled.py, read without importing the package."""
    tree = ast.parse((ROOT / "protocols" / "compiled.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["COMPILED"]:
            return ast.literal_eval(node.value)
    raise RuntimeError("protocols/compiled.py defines no COMPILED")


def source(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def pure_python(reason: str) -> list:
    print(f"pubsub-emu: building pure Python, the per-message modules not compiled: {reason}", file=sys.stderr)
    return []


def extensions() -> list:
    """The compiled modules, and their sources' digests as mypyc reads them (``COMPILED_DIGESTS``)."""
    if METADATA_ONLY.intersection(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return pure_python("mypyc is not installed")
    problem = c_compiler_problem()
    if problem is not None:
        return pure_python(f"no working C compiler for Python extensions ({problem})")
    sources = [str(source(module).relative_to(ROOT)) for module in compiled_modules()]
    COMPILED_DIGESTS.update((module, hashlib.sha256(source(module).read_bytes()).hexdigest())
                            for module in compiled_modules())
    try:
        return mypycify(sources, opt_level="3")  # type-checks them first (pyproject.toml: [tool.mypy])
    except (Exception, SystemExit) as error:
        return pure_python(f"mypyc failed ({error})")


def c_compiler_problem() -> str | None:
    """Why a C file including Python.h does not compile here (None: it does), found before
    mypyc's translation, which takes longer than the compiler's failure."""
    from distutils.ccompiler import new_compiler  # (setuptools' own distutils, once setuptools is imported)
    from distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "probe.c"
        probe.write_text("#include <Python.h>\nint probe(void) { return Py_IsInitialized(); }\n")
        try:
            compiler.compile([str(probe)], output_dir=folder, include_dirs=[sysconfig.get_paths()["include"]])
        except Exception as error:  # (distutils' compile errors have no common base but Exception)
            return str(error).strip() or type(error).__name__
    return None


class CompileOrFallBack(build_ext):
    """Compiles the extensions and records the digests of the sources compiled (which
    protocols/compiled.py compares with the sources it finds). Without a working C compiler it
    leaves no compiled module of the list behind, an earlier build's included: Python would
    import it in place of its source."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # (setuptools' compiler errors have no common base but Exception)
            pure_python(f"compiling failed ({error})")
            self._remove_compiled()
        else:
            self._record_digests()

    def _built_path(self, relative: str) -> Path:
        return (ROOT if self.inplace else Path(self.build_lib)) / relative

    def _record_digests(self) -> None:
        written = self._built_path(DIGESTS + ".part")  # (renamed whole: a reader never sees half of it)
        written.write_text(json.dumps(COMPILED_DIGESTS, indent=1, sort_keys=True))
        written.replace(self._built_path(DIGESTS))

    def _remove_compiled(self) -> None:
        for module in compiled_modules():
            built = self._built_path(module.replace(".", "/"))
            for path in built.parent.glob(f"{built.name}.*.so"):
                path.unlink()
        self._built_path(DIGESTS).unlink(missing_ok=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": CompileOrFallBack})
