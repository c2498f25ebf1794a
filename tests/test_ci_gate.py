"""The CI gate's checks refuse what they exist to refuse (REQ-TEST-012).

Each check runs the real tool, with the project's own configuration, on a small temporary
tree made to break one rule; a check that passed such a tree would let the rule go.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import tomlkit

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _project_tool_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        tool: dict[str, Any] = tomllib.load(f)["tool"]
    return tool


def _write_pyproject(where: Path, **sections: Any) -> Path:
    path = where / "pyproject.toml"
    path.write_text(tomlkit.dumps({"tool": sections}), encoding="utf-8")
    return path


def _run(
    *argv: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_req_test_012_the_lint_refuses_printing_to_standard_output(tmp_path: Path) -> None:
    config = _write_pyproject(tmp_path, ruff=_project_tool_config()["ruff"])
    package = tmp_path / "rypsok"
    package.mkdir()
    clean = package / "clean.py"
    clean.write_text('import sys\n\nsys.stderr.write("to the log stream\\n")\n', encoding="utf-8")
    printing = package / "printing.py"
    printing.write_text('print("to stdout")\n', encoding="utf-8")
    ruff = BIN / "ruff"
    passed = _run(ruff, "check", "--no-cache", "--config", config, clean, cwd=tmp_path)
    assert passed.returncode == 0, passed.stdout
    refused = _run(ruff, "check", "--no-cache", "--config", config, printing, cwd=tmp_path)
    assert refused.returncode == 1
    assert "T201" in refused.stdout


def test_req_test_012_the_format_check_refuses_an_unformatted_file(tmp_path: Path) -> None:
    config = _write_pyproject(tmp_path, ruff=_project_tool_config()["ruff"])
    formatted = tmp_path / "formatted.py"
    formatted.write_text('value = {"a": 1}\n', encoding="utf-8")
    unformatted = tmp_path / "unformatted.py"
    unformatted.write_text("value = {  'a':1 }\n", encoding="utf-8")
    ruff = BIN / "ruff"
    ok = _run(ruff, "format", "--check", "--no-cache", "--config", config, formatted, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout
    bad = _run(
        ruff, "format", "--check", "--no-cache", "--config", config, unformatted, cwd=tmp_path
    )
    assert bad.returncode == 1
    assert unformatted.read_text(encoding="utf-8") == "value = {  'a':1 }\n"  # checked, not fixed


def _package(where: Path, core_imports: str) -> None:
    files = {
        "rypsok/__init__.py": "",
        "rypsok/cli.py": "",
        "rypsok/config/__init__.py": "",
        "rypsok/core/__init__.py": "",
        "rypsok/core/engines/__init__.py": "",
        "rypsok/core/egress/__init__.py": "",
        "rypsok/shared/__init__.py": "",
        "rypsok/core/services.py": core_imports,
        "rypsok/mcp/__init__.py": "",
        "rypsok/mcp/stdio.py": "import rypsok.core.services\n",
    }
    # Every module a contract of the project names exists, as a package, unless given above:
    # import-linter refuses a contract whose module is missing.
    for contract in _project_tool_config()["importlinter"]["contracts"]:
        for module in (*contract["source_modules"], *contract["forbidden_modules"]):
            parts = module.split(".")
            if parts[0] != "rypsok" or "*" in module:
                continue
            as_module = "/".join(parts) + ".py"
            if as_module not in files and len(parts) > 1:
                files.setdefault("/".join(parts) + "/__init__.py", "")
    for name, text in files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("core_imports", "kept"),
    [
        ("import json\n", True),
        ("import rypsok.mcp.stdio\n", False),
        ("from rypsok import cli\n", False),
    ],
)
def test_req_test_012_the_layer_rule_refuses_the_core_importing_the_protocol_layer(
    tmp_path: Path, core_imports: str, kept: bool
) -> None:
    _write_pyproject(tmp_path, importlinter=_project_tool_config()["importlinter"])
    _package(tmp_path, core_imports)
    result = _run(
        BIN / "lint-imports",
        "--no-cache",
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert (result.returncode == 0) is kept, result.stdout + result.stderr
    assert ("BROKEN" in result.stdout) is not kept


@pytest.mark.parametrize(
    ("module", "imports", "kept"),
    [
        ("rypsok/config/load.py", "import rypsok.shared\n", True),
        ("rypsok/config/load.py", "import rypsok.core.services\n", False),
        ("rypsok/shared/vocabulary.py", "import rypsok.config\n", False),
        ("rypsok/core/engines/client.py", "import rypsok\n", False),
        ("rypsok/config/load.py", "from rypsok import cli\n", False),
        # The protocol layer names the engines through the facade only...
        ("rypsok/mcp/stdio.py", "import rypsok.core.engines\n", False),
        ("rypsok/mcp/stdio.py", "import rypsok.core.services\n", True),
        # ...and the egress layer knows no provider.
        ("rypsok/core/egress/__init__.py", "import rypsok.core.engines\n", False),
    ],
)
def test_req_test_012_the_layer_rules_keep_config_below_core_and_shared_below_both(
    tmp_path: Path, module: str, imports: str, kept: bool
) -> None:
    _write_pyproject(tmp_path, importlinter=_project_tool_config()["importlinter"])
    _package(tmp_path, "import json\n")
    for package in ("rypsok/core/engines/__init__.py", module):
        path = tmp_path / package
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("", encoding="utf-8")
    (tmp_path / module).write_text(imports, encoding="utf-8")
    result = _run(
        BIN / "lint-imports",
        "--no-cache",
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert (result.returncode == 0) is kept, result.stdout + result.stderr


def _licence_tool() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(
        "check_licences", str(ROOT / "tools" / "check-licences")
    )
    spec = importlib.util.spec_from_loader("check_licences", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_req_test_012_the_licence_check_refuses_an_unknown_or_missing_licence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = _licence_tool()
    assert tool.COMPATIBLE.search("License :: OSI Approved :: MIT License")
    assert tool.COMPATIBLE.search("Proprietary; all rights reserved") is None
    (tmp_path / "requirements.lock").write_text("trio==0.35.0\n", encoding="utf-8")
    tool.ROOT = tmp_path
    assert tool.main() == 0
    (tmp_path / "requirements.lock").write_text(
        "trio==0.35.0\nrypsok-no-such-package==1.0\n", encoding="utf-8"
    )
    assert tool.main() == 1
    assert "rypsok-no-such-package: not installed" in capsys.readouterr().out
