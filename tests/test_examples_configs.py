"""Every example configuration passes `check` and says what the tutorials show (REQ-DOC-002)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rypsok import cli

# cli.main installs the JSON exception hooks (see conftest.keep_exception_hooks).
pytestmark = pytest.mark.usefixtures("keep_exception_hooks")

REPO = Path(__file__).resolve().parent.parent
PROJECT_EXAMPLES = REPO / "examples" / "configs"
BOOK_EXAMPLES = REPO.parent / "shared" / "spec" / "examples" / "configs"
TOKEN = "m" * 44

NAMES = [
    "configuration-example.toml",
    "smallest.toml",
    "strict-mode.toml",
    "tutorial-1.toml",
    "tutorial-2.toml",
    "tutorial-3.toml",
    "tutorial-4.toml",
    "tutorial-5.toml",
]
# The project's own examples, not (yet) in the book's directory.
PROJECT_ONLY = ["keyless.toml"]
# The warnings the examples' README names; every other example gives none.
EXPECTED_WARNINGS = {
    "tutorial-4.toml": ["rypsok: warning: service.http.bind: "],
    "tutorial-5.toml": ["rypsok: warning: engines.ddg: "],
}


def directories() -> list[Path]:
    dirs = [PROJECT_EXAMPLES]
    if BOOK_EXAMPLES.is_dir():
        dirs.append(BOOK_EXAMPLES)
    return dirs


@pytest.fixture(autouse=True)
def tutorial_env(monkeypatch):
    monkeypatch.delenv("RYPSOK_CONFIG", raising=False)
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    # Tutorial 4 exports the token of the caller "mimlys".
    monkeypatch.setenv("RYPSOK_TOKEN_MIMLYS", TOKEN)


def prepared(path: Path, tmp_path: Path) -> Path:
    """Tutorial 4 names /run/secrets/rypsok-ops: the test points it at a file of its own."""
    text = path.read_text()
    if "/run/secrets/rypsok-ops" not in text:
        return path
    token_file = tmp_path / "rypsok-ops"
    token_file.write_text("o" * 40 + "\n")
    token_file.chmod(0o600)
    copy = tmp_path / path.name
    copy.write_text(text.replace("/run/secrets/rypsok-ops", str(token_file)))
    return copy


def check(capsys, path: Path) -> tuple[int, list[str]]:
    code = cli.main(["check", "--config", str(path)])
    out, err = capsys.readouterr()
    assert out == ""
    return code, err.splitlines()


def test_req_doc_002_the_project_examples_are_the_books():
    assert sorted(p.name for p in PROJECT_EXAMPLES.glob("*.toml")) == sorted(NAMES + PROJECT_ONLY)
    if BOOK_EXAMPLES.is_dir():
        for name in NAMES:
            assert (PROJECT_EXAMPLES / name).read_text() == (BOOK_EXAMPLES / name).read_text()


@pytest.mark.parametrize("directory", directories(), ids=lambda d: d.parent.name)
@pytest.mark.parametrize("name", NAMES)
def test_req_doc_002_every_example_configuration_passes_check(capsys, tmp_path, directory, name):
    path = prepared(directory / name, tmp_path)
    code, lines = check(capsys, path)
    assert code == 0, lines
    assert lines[0] == f"rypsok: configuration from --config {path} is valid"
    # The memory row depends on the build's measured costs: on glibc the worst case of the
    # default limits is above the unit (tests/test_fetch_memory.py).
    warnings = [
        line
        for line in lines
        if line.startswith("rypsok: warning: ") and not line.startswith("rypsok: warning: memory:")
    ]
    expected = EXPECTED_WARNINGS.get(name, [])
    assert len(warnings) == len(expected)
    for line, start in zip(warnings, expected, strict=True):
        assert line.startswith(start)


def engine_line(lines: list[str], engine: str) -> str:
    found = [line for line in lines if line.startswith(f"rypsok: engine {engine}: ")]
    assert len(found) == 1, lines
    return found[0]


@pytest.mark.parametrize("directory", directories(), ids=lambda d: d.parent.name)
def test_req_doc_002_tutorial_1_shows_wikipedia_needing_no_credential(capsys, directory):
    _, lines = check(capsys, directory / "tutorial-1.toml")
    line = engine_line(lines, "wikipedia")
    assert line.startswith("rypsok: engine wikipedia: type=wikipedia enabled=true ")
    assert line.endswith(" no credential needed")


@pytest.mark.parametrize("directory", directories(), ids=lambda d: d.parent.name)
def test_req_doc_002_tutorial_2_shows_brave_inactive_then_resolved(capsys, directory, monkeypatch):
    code, lines = check(capsys, directory / "tutorial-2.toml")
    assert code == 0
    assert engine_line(lines, "brave").endswith(
        "inactive: environment variable BRAVE_API_KEY is unset or empty"
    )
    monkeypatch.setenv("BRAVE_API_KEY", "BSAexamplekey")
    code, lines = check(capsys, directory / "tutorial-2.toml")
    assert code == 0
    assert engine_line(lines, "brave").endswith("credential resolved")
    assert "BSAexamplekey" not in "\n".join(lines)


@pytest.mark.parametrize("directory", directories(), ids=lambda d: d.parent.name)
def test_req_doc_002_tutorial_4_needs_the_token_of_mimlys(capsys, tmp_path, directory, monkeypatch):
    path = prepared(directory / "tutorial-4.toml", tmp_path)
    _, lines = check(capsys, path)
    assert any("service.http: bind=0.0.0.0:8737 callers=2 " in line for line in lines)
    monkeypatch.delenv("RYPSOK_TOKEN_MIMLYS")
    code, lines = check(capsys, path)
    assert code == 1
    assert lines == [
        "rypsok: service.http.auth.callers[0].token_env: environment variable "
        "RYPSOK_TOKEN_MIMLYS is unset or empty"
    ]


@pytest.mark.parametrize("directory", directories(), ids=lambda d: d.parent.name)
def test_req_eng_013_tutorial_5_without_its_scraping_table_fails_with_the_sentence(
    capsys, tmp_path, directory
):
    text = (directory / "tutorial-5.toml").read_text()
    assert "[scraping]\nenabled = true\n" in text
    copy = tmp_path / "tutorial-5-no-switch.toml"
    copy.write_text(text.replace("[scraping]\nenabled = true\n", ""))
    code, lines = check(capsys, copy)
    assert code == 1
    assert lines == [
        'rypsok: engines.ddg: type "duckduckgo" scrapes a human-facing interface; it runs only '
        "with [scraping] enabled = true, at the operator's risk under the provider's terms"
    ]
    code, lines = check(capsys, directory / "tutorial-5.toml")
    assert code == 0
    assert engine_line(lines, "ddg").endswith("no credential needed")


def test_req_doc_002_keyless_serves_every_category_without_a_key(capsys):
    code, lines = check(capsys, PROJECT_EXAMPLES / "keyless.toml")
    assert code == 0, lines
    # No warning but the memory row, which depends on the build (tests/test_fetch_memory.py).
    assert not [
        line
        for line in lines
        if line.startswith("rypsok: warning: ") and not line.startswith("rypsok: warning: memory:")
    ]
    assert "rypsok: categories served: general,news,science,code" in lines
    for engine in ("wikipedia", "hackernews", "arxiv", "crossref"):
        assert engine_line(lines, engine).endswith(" no credential needed")
    for engine in ("searxng", "stackoverflow"):
        assert engine_line(lines, engine).endswith(" no credential configured")


def test_req_doc_002_tutorial_6_shows_keyless_and_its_category_lines(capsys):
    page = (REPO / "book" / "tutorials" / "search-by-category.md").read_text()
    shown = page.split("```toml\n", 1)[1].split("```", 1)[0]
    text = (PROJECT_EXAMPLES / "keyless.toml").read_text()
    assert shown == "".join(line for line in text.splitlines(True) if not line.startswith("#"))
    _, lines = check(capsys, PROJECT_EXAMPLES / "keyless.toml")
    for line in lines:
        if line.startswith(("rypsok: category ", "rypsok: categories served: ")):
            assert line in page
