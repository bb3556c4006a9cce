"""The build's one step that pyproject.toml cannot hold: the per-message modules named in
protocols/compiled.py compiled with mypyc from their own source, where mypyc and a C compiler are
at hand. Where they are not, or with PUBSUB_EMU_PURE_PYTHON=1, the package is built pure Python
and runs the same, slower; the install then says why (shown with `pip install -v`), and so does
every run (`pubsub-emu run` names the build it ran on)."""
import ast
import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent


def compiled_modules() -> tuple[str, ...]:
    """``COMPILED`` of protocols/compiled.py, read without importing the package."""
    tree = ast.parse((ROOT / "protocols" / "compiled.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["COMPILED"]:
            return ast.literal_eval(node.value)
    raise RuntimeError("protocols/compiled.py defines no COMPILED")


def pure_python(reason: str) -> list:
    print(f"pubsub-emu: building pure Python, the per-message modules not compiled: {reason}", file=sys.stderr)
    return []


def extensions() -> list:
    if os.environ.get("PUBSUB_EMU_PURE_PYTHON", "") not in ("", "0"):
        return pure_python("PUBSUB_EMU_PURE_PYTHON is set")
    try:
        from mypyc.build import mypycify
    except ImportError:
        return pure_python("mypyc is not installed")
    sources = [module.replace(".", "/") + ".py" for module in compiled_modules()]
    try:
        return mypycify(sources, opt_level="3")  # type-checks them first (pyproject.toml: [tool.mypy])
    except (Exception, SystemExit) as error:
        return pure_python(f"mypyc failed ({error})")


class CompileOrFallBack(build_ext):
    """Compiles the extensions and records the digests of the sources compiled (which
    protocols/compiled.py compares with the sources it finds); without a working C compiler,
    leaves none half-built."""

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as error:  # (setuptools' compiler errors have no common base but Exception)
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            pure_python(f"compiling failed ({error})")
            return
        digests = {module: hashlib.sha256((ROOT / (module.replace(".", "/") + ".py")).read_bytes()).hexdigest()
                   for module in compiled_modules()}
        target = (ROOT if self.inplace else Path(self.build_lib)) / "protocols" / "compiled_sources.json"
        target.write_text(json.dumps(digests, indent=1, sort_keys=True))


setup(ext_modules=extensions(), cmdclass={"build_ext": CompileOrFallBack})
