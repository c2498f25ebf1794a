"""The release path: reproducible builds, workflows, fuzz targets, the pinned surface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import yaml

from releasing import build, fuzz, gate, surface, workflows

if TYPE_CHECKING:
    from pathlib import Path

WORKFLOWS = build.ROOT / ".github" / "workflows"


def _workflow(name: str) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return loaded


def _triggers(data: dict[Any, Any]) -> Any:
    return data.get("on", data.get(True))


def test_req_test_019_two_builds_of_one_commit_are_byte_identical(tmp_path: Path) -> None:
    epoch = build.commit_time("HEAD")
    build.build_once("HEAD", tmp_path / "a", epoch)
    build.build_once("HEAD", tmp_path / "b", epoch)
    first, second = build.digests(tmp_path / "a"), build.digests(tmp_path / "b")
    assert sorted(name.rsplit(".", 1)[-1] for name in first) == ["gz", "whl"]
    assert build.compare(first, second) == []


def test_req_test_019_a_difference_between_builds_is_named() -> None:
    assert build.compare({"a.whl": "1", "b.tar.gz": "2"}, {"a.whl": "1", "b.tar.gz": "3"}) == [
        "b.tar.gz"
    ]
    assert build.compare({"a.whl": "1"}, {}) == ["a.whl"]


def test_req_test_019_checksums_are_in_the_format_sha256sum_reads(tmp_path: Path) -> None:
    path = build.write_sums(tmp_path, {"b.whl": "ff", "a.tar.gz": "00"})
    assert path.read_text(encoding="utf-8") == "00  a.tar.gz\nff  b.whl\n"


def test_req_test_019_release_checks_run_every_job_and_only_by_hand() -> None:
    data = _workflow("release-checks.yml")
    assert _triggers(data) == {"workflow_dispatch": None}
    jobs = data["jobs"]
    assert set(jobs) == {
        "reproducible",
        "tool-definitions",
        "fuzz",
        "mutants",
        "live-checks",
        "advisories",
    }
    # Every fuzz target runs, and nothing but the targets the runner knows.
    assert jobs["fuzz"]["strategy"]["matrix"]["target"] == list(fuzz.TARGETS)
    for job in jobs.values():
        assert job.get("strategy", {}).get("max-parallel", 12) <= 12


def test_req_test_019_every_workflow_keeps_the_projects_rules() -> None:
    names = sorted(path.name for path in WORKFLOWS.glob("*.yml"))
    assert {"ci.yml", "release-checks.yml", "release.yml", "docs.yml"} <= set(names)
    for name in names:
        assert workflows.rule_failures(WORKFLOWS / name) == [], name


def test_req_test_019_the_rules_catch_a_timer_a_tolerated_failure_and_a_moving_tag(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(
        "on:\n  schedule:\n    - cron: '0 0 * * *'\njobs:\n  a:\n    runs-on: x\n"
        "    continue-on-error: true\n    steps:\n      - uses: actions/checkout@v5\n",
        encoding="utf-8",
    )
    assert workflows.rule_failures(path) == [
        "runs on a timer (schedule)",
        "declares no top-level permissions",
        "has continue-on-error",
        "uses actions/checkout@v5 without a full commit SHA",
    ]


def test_req_test_019_the_base_image_is_pinned_by_digest() -> None:
    text = (build.ROOT / "containers" / "Containerfile").read_text(encoding="utf-8")
    assert workflows.base_image_pinned(text)
    assert not workflows.base_image_pinned("FROM python:3.11-slim\n")


def test_req_test_019_the_release_workflow_never_creates_a_release() -> None:
    data = _workflow("release.yml")
    assert data["permissions"] == {"contents": "read"}
    signing = [
        name for name, job in data["jobs"].items() if "id-token" in job.get("permissions", {})
    ]
    assert signing == ["checksums"]
    # The only job that can sign checks nothing out: it runs no code it built.
    assert all(
        "actions/checkout" not in step.get("uses", "")
        for step in data["jobs"]["checksums"]["steps"]
    )
    attach = " ".join(step.get("run", "") for step in data["jobs"]["attach"]["steps"])
    assert "gh release upload" in attach
    assert "gh release create" not in attach


def test_req_rust_002_ci_runs_on_the_four_release_platforms() -> None:
    jobs = _workflow("ci.yml")["jobs"]
    runners = {job["runs-on"] for job in jobs.values() if isinstance(job["runs-on"], str)}
    for job in jobs.values():
        runners.update(
            entry["runner"]
            for entry in job.get("strategy", {}).get("matrix", {}).get("include", [])
        )
    assert {"ubuntu-24.04", "ubuntu-24.04-arm", "macos-14", "windows-2022"} <= runners


@pytest.mark.parametrize("name", list(fuzz.TARGETS))
def test_req_test_019_each_fuzz_target_runs(name: str) -> None:
    assert fuzz.run(name, 0.0, examples_per_round=20) >= 1


def test_req_test_019_a_crash_in_a_fuzz_target_fails_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def crash(value: object) -> None:
        raise RuntimeError("found")

    monkeypatch.setitem(fuzz.TARGETS, "broken", (fuzz.ANY_TEXT, crash))
    with pytest.raises(RuntimeError):
        fuzz.run("broken", 0.0, examples_per_round=5)


def test_req_mcp_005_the_public_surface_matches_its_pinned_files() -> None:
    # A change to the library API, the command line, a configuration key or a tool definition
    # is a visible diff: regenerate with `python -m releasing.surface --write`, and for a tool
    # definition add the changelog's `### Tool definitions` line.
    assert surface.differences(surface.collect()) == []


def test_req_mcp_005_the_changelog_section_read_is_the_newest() -> None:
    text = "# Changelog\n\nintro\n\n## 1.1.0\n\n### Tool definitions\n\n- x\n\n## 1.0.0\n"
    assert surface.newest_changelog_section(text).startswith("1.1.0")
    assert "### Tool definitions" in surface.newest_changelog_section(text)
    assert surface.newest_changelog_section("# Changelog\n") == ""


def test_req_test_019_the_tag_must_name_the_package_version() -> None:
    project_version = gate.version("0.0.0-not-a-version")
    assert project_version is not None
    assert "is not the package version" in project_version


def test_req_test_019_the_book_version_line_needs_its_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "index.md"
    page.write_text("# Book\n<!-- version -->\nold\n<!-- /version -->\n", encoding="utf-8")
    monkeypatch.setattr(gate, "BOOK_FIRST_PAGE", page)
    assert gate.book_version("This book describes rypsok 1.2.3.") is None
    assert "This book describes rypsok 1.2.3.\n<!-- /version -->" in page.read_text(
        encoding="utf-8"
    )
    page.write_text("# Book\n", encoding="utf-8")
    assert gate.book_version("x") is not None


def test_req_test_019_survivors_fail_the_mutation_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate, "ROOT", tmp_path)
    assert gate.mutants("privacy") is not None  # no run at all is a failure too
    (tmp_path / ".mutation").mkdir()
    (tmp_path / ".mutation" / "privacy.json").write_text('{"counts": {"survived": 2}}')
    assert "2 mutants" in (gate.mutants("privacy") or "")
    (tmp_path / ".mutation" / "privacy.json").write_text('{"counts": {"survived": 0}}')
    assert gate.mutants("privacy") is None
