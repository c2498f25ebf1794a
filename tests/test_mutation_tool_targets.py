"""tools/mutation's map and import hook: every module of the egress package is a
target, every target names a file and test files that exist, and the hook can stand a mutated
package `__init__` in for the real one (its submodules still import)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from stdio_process import ROOT
from test_mutation_tool import TOOL

if TYPE_CHECKING:
    from pathlib import Path


def test_req_test_019_every_egress_module_is_a_target() -> None:
    targets = {target.path for target in TOOL.TARGETS.values()}
    egress = {str(path.relative_to(ROOT)) for path in (ROOT / "rypsok/core/egress").glob("*.py")}
    assert egress <= targets


def test_req_test_019_every_target_names_its_module_and_test_files() -> None:
    for name, target in TOOL.TARGETS.items():
        path = ROOT / target.path
        assert path.is_file(), name
        module_path = target.module.replace(".", "/")
        assert target.path in (f"{module_path}.py", f"{module_path}/__init__.py"), name
        assert TOOL._test_files(name), name


def test_req_test_019_the_hook_loads_a_mutated_package_init(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(TOOL._HOOK, encoding="utf-8")
    origin = ROOT / "rypsok/core/egress/__init__.py"
    mutated = tmp_path / "init.py"
    # A marker the real package does not have, so the test sees which file was loaded.
    mutated.write_text(origin.read_text(encoding="utf-8") + "\nMUTATED = True\n", encoding="utf-8")
    env = dict(
        os.environ,
        PYTHONPATH=str(hook),
        RYPSOK_MUTATION_MODULE="rypsok.core.egress",
        RYPSOK_MUTATION_FILE=str(mutated),
        RYPSOK_MUTATION_ORIGIN=str(origin),
    )
    code = (
        "import rypsok.core.egress as e, rypsok.core.egress.names as n;"
        "print(e.MUTATED, n.parse_host('example.com').name)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "example.com"]


def test_req_test_019_every_targets_unmutated_module_passes_the_import_check() -> None:
    """A target whose own source fails the tool's check would have every mutant counted
    invalid and a score of 100 % (the egress package's lazy attributes did). The check runs
    in a fresh interpreter, as the tool does: here rypsok is imported already, which hid it."""
    script = (
        "import importlib.machinery, importlib.util, sys\n"
        f"loader = importlib.machinery.SourceFileLoader('tool', {str(ROOT / 'tools/mutation')!r})\n"
        "spec = importlib.util.spec_from_loader('tool', loader)\n"
        "tool = importlib.util.module_from_spec(spec)\n"
        "sys.modules['tool'] = tool\n"
        "loader.exec_module(tool)\n"
        "failed = []\n"
        "for name, target in tool.TARGETS.items():\n"
        "    for module in [m for m in sys.modules if m.split('.')[0] == 'rypsok']:\n"
        "        del sys.modules[module]  # each target checked as in a run of it alone\n"
        "    if not tool.imports_cleanly(name, (tool.ROOT / target.path).read_text()):\n"
        "        failed.append(name)\n"
        "assert not tool.imports_cleanly('egress_package', 'raise RuntimeError()\\n')\n"
        "print('failed:', failed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failed: []"
