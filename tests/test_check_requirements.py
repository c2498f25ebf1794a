"""`tools/check-requirements`: the worklist of untested requirements and the `where` column.

Each test runs the real tool (as CI does) on a small repository made in a temporary
directory: two tables, a module or two, a test file. The tables of this repository are
checked by the first test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent
TOOL: Final = ROOT / "tools" / "check-requirements"

REQUIREMENTS_HEAD: Final = "id\ttitle\tmilestone\tverification\twhere\n"
LIMITS_HEAD: Final = "id\tparameter\tdefault\trange\tbasis\twhere\n"


def _run(root: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(TOOL)] + ([] if root is None else ["--root", str(root)])
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def _repo(
    tmp_path: Path,
    *,
    requirements: list[str],
    limits: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """A repository: the two tables (rows given as tab-separated text) and its files."""
    tables = tmp_path / "book" / "maintainers"
    tables.mkdir(parents=True)
    (tables / "requirements.tsv").write_text(
        REQUIREMENTS_HEAD + "".join(r + "\n" for r in requirements), encoding="utf-8"
    )
    (tables / "limits.tsv").write_text(
        LIMITS_HEAD + "".join(r + "\n" for r in limits or []), encoding="utf-8"
    )
    (tmp_path / "tests").mkdir()
    for name, text in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


GOOD_FILES: Final = {
    "rypsok/core/deadline.py": '"""The fan-out under one deadline (REQ-AGG-003, LIM-S4)."""\n',
    "rypsok/core/cache.py": '"""The cache (REQ-CACHE-001..007, LIM-K1..K4)."""\n',
    "tools/gate": "#!/bin/sh\n",
    "tests/test_deadline.py": "def test_req_agg_003_the_call_ends_at_the_deadline():\n    pass\n",
}
GOOD_REQUIREMENTS: Final = [
    "REQ-AGG-003\tOverall deadline\tM1\tT\trypsok/core/deadline.py",
    "REQ-CACHE-005\tExpiration\tM5\tT\trypsok/core/cache.py, tests/test_deadline.py",
    "REQ-TEST-012\tCI gate\tM0\tI\ttools/gate",
]
GOOD_LIMITS: Final = [
    "LIM-S4\tOverall deadline\t2500 ms\t500–10000\t—\trypsok/core/deadline.py",
    "LIM-K3\tEntries\t1000\t1–100000\t—\trypsok/core/cache.py",
]


def _good(
    tmp_path: Path,
    *,
    requirements: tuple[str, ...] = (),
    limits: tuple[str, ...] = (),
    files: dict[str, str] | None = None,
) -> Path:
    """The consistent repository above, with rows added and files replaced."""
    return _repo(
        tmp_path,
        requirements=[*GOOD_REQUIREMENTS, *requirements],
        limits=[*GOOD_LIMITS, *limits],
        files={**GOOD_FILES, **(files or {})},
    )


def _problems(root: Path) -> str:
    """The tool's standard error, once it has failed as CI sees it (exit status 1)."""
    run = _run(root)
    assert run.returncode == 1
    assert run.stdout.splitlines()[-1].endswith("T requirements have a test named after them")
    return run.stderr


def test_req_test_001_this_repositorys_tables_pass_and_the_last_line_is_the_count() -> None:
    run = _run()
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    last = run.stdout.splitlines()[-1]
    assert last.endswith("T requirements have a test named after them")


def test_req_test_001_a_consistent_repository_passes(tmp_path: Path) -> None:
    run = _run(_good(tmp_path))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    # REQ-CACHE-005 is marked T and no test is named after it: the worklist, not a failure.
    assert run.stdout.splitlines() == [
        "REQ-CACHE-005\tM5\tExpiration",
        "1 of 2 T requirements have a test named after them",
    ]


def test_req_test_001_a_path_that_does_not_exist_fails(tmp_path: Path) -> None:
    row = "REQ-OPS-001\tCommand line\tM1\tT\trypsok/cli.py"
    stderr = _problems(_good(tmp_path, requirements=(row,)))
    assert "requirements.tsv: REQ-OPS-001: rypsok/cli.py does not exist" in stderr


def test_req_test_001_an_empty_where_fails(tmp_path: Path) -> None:
    row = "LIM-H9\tAttributes per element\t1000\tfixed\t—\t"
    assert "limits.tsv: LIM-H9: where is empty" in _problems(_good(tmp_path, limits=(row,)))


def test_req_test_001_a_renamed_module_fails_every_row_that_named_it(tmp_path: Path) -> None:
    root = _good(tmp_path)
    assert _run(root).returncode == 0
    (root / "rypsok/core/deadline.py").rename(root / "rypsok/core/deadlines.py")
    stderr = _problems(root)
    assert "requirements.tsv: REQ-AGG-003: rypsok/core/deadline.py does not exist" in stderr
    assert "limits.tsv: LIM-S4: rypsok/core/deadline.py does not exist" in stderr


def test_req_test_001_a_module_that_no_longer_names_the_id_fails(tmp_path: Path) -> None:
    files = {"rypsok/core/deadline.py": '"""The fan-out (LIM-S4)."""\n'}
    stderr = _problems(_good(tmp_path, files=files))
    assert "REQ-AGG-003: not named in rypsok/core/deadline.py" in stderr
    assert "LIM-S4" not in stderr


def test_req_test_001_a_longer_id_is_not_the_id(tmp_path: Path) -> None:
    # LIM-S40 and REQ-AGG-0031 do not name LIM-S4 and REQ-AGG-003.
    files = {"rypsok/core/deadline.py": '"""LIM-S40 and REQ-AGG-0031."""\n'}
    stderr = _problems(_good(tmp_path, files=files))
    assert "REQ-AGG-003: not named in rypsok/core/deadline.py" in stderr
    assert "LIM-S4: not named in rypsok/core/deadline.py" in stderr


POLICY: Final = (
    '"""The policy (REQ-SEC-005 to\nREQ-SEC-009, REQ-CFG-001, -003, REQ-PAGE-003/004,\n'
    'LIM-B1 to LIM-B3, LIM-F10/F11)."""\n'
)


def _policy_repo(tmp_path: Path, requirement: str | None, limit: str | None) -> Path:
    return _repo(
        tmp_path,
        requirements=[] if requirement is None else [f"{requirement}\tx\tM1\tI\trypsok/p.py"],
        limits=[] if limit is None else [f"{limit}\tx\t1\tfixed\t—\trypsok/p.py"],
        files={"rypsok/p.py": POLICY},
    )


@pytest.mark.parametrize(
    ("requirement", "limit"),
    [
        ("REQ-SEC-007", "LIM-B2"),  # inside "X to Y" ranges, across a line break
        ("REQ-SEC-009", "LIM-B3"),  # a range's end
        ("REQ-CFG-003", "LIM-F11"),  # a list's member, a pair's second
        ("REQ-PAGE-004", "LIM-F10"),
    ],
)
def test_req_test_001_ids_written_as_ranges_and_lists_are_named(
    tmp_path: Path, requirement: str, limit: str
) -> None:
    run = _run(_policy_repo(tmp_path, requirement, limit))
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(
    ("requirement", "limit"),
    [
        ("REQ-CFG-002", None),  # a list names its members only
        ("REQ-SEC-010", "LIM-B4"),  # past a range's end
        ("REQ-PAGE-005", "LIM-F12"),
    ],
)
def test_req_test_001_ids_around_ranges_and_lists_are_not_named(
    tmp_path: Path, requirement: str, limit: str | None
) -> None:
    run = _run(_policy_repo(tmp_path, requirement, limit))
    assert run.returncode == 1
    assert f"{requirement}: not named in rypsok/p.py" in run.stderr
    if limit is not None:
        assert f"{limit}: not named in rypsok/p.py" in run.stderr


def test_req_test_001_a_row_that_nothing_implements_is_listed_and_passes(tmp_path: Path) -> None:
    run = _run(_good(tmp_path, requirements=("REQ-RUST-001\tRust\tAll\tI\t-",)))
    assert run.returncode == 0, run.stderr
    assert "REQ-RUST-001\twhere: -\tRust" in run.stdout.splitlines()


def test_req_test_001_a_path_outside_the_repository_fails(tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text('"""REQ-OPS-002."""\n', encoding="utf-8")
    rows = (
        "REQ-OPS-002\tSignals\tM1\tI\t../secret.py",
        f"REQ-OPS-003\tZero-configuration\tM1\tI\t{outside}",
        "REQ-OPS-004\tx\tM1\tI\ttools/gate,tests",
    )
    stderr = _problems(_good(tmp_path / "repo", requirements=rows))
    assert "REQ-OPS-002: '../secret.py' is not a path in the repository" in stderr
    assert f"REQ-OPS-003: '{outside}' is not a path in the repository" in stderr
    assert "REQ-OPS-004: tools/gate,tests does not exist" in stderr


def test_req_test_001_a_table_without_the_column_fails(tmp_path: Path) -> None:
    root = _good(tmp_path)
    limits = root / "book" / "maintainers" / "limits.tsv"
    limits.write_text("id\tparameter\tdefault\trange\tbasis\n", encoding="utf-8")
    assert "limits.tsv: no where column" in _problems(root)


def _ci_step(root: Path) -> subprocess.CompletedProcess[str]:
    """The requirements step of `.ci/run`, as written there, run in `root`: with its own
    copy of the tool (which checks the repository it sits in) and a `.venv/bin/python`."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    (step,) = [line for line in lines if "tools/check-requirements" in line]
    (root / "tools" / "check-requirements").write_bytes(TOOL.read_bytes())
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{step}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_req_test_012_the_ci_step_fails_on_a_problem_and_shows_it(tmp_path: Path) -> None:
    """`.ci/run` keeps the last line of the tool's standard output (`| tail -n 1` under
    `pipefail`): a problem must fail the step and still reach the log on standard error."""
    root = _good(tmp_path, requirements=("REQ-OPS-001\tCommand line\tM1\tT\trypsok/cli.py",))
    run = _ci_step(root)
    assert run.returncode == 1
    assert "REQ-OPS-001: rypsok/cli.py does not exist" in run.stderr
    assert run.stdout == "1 of 3 T requirements have a test named after them\n"


def test_req_test_012_the_ci_step_passes_on_consistent_tables(tmp_path: Path) -> None:
    run = _ci_step(_good(tmp_path))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "1 of 2 T requirements have a test named after them\n"
