"""The public surface the stability page promises, pinned in files so a change is a diff.

Four parts, each read from the running program rather than from its source:

- `library`: the names of `rypsok.__all__` and the signatures of the facade's public methods;
- `cli`: the help of `rypsok`, `rypsok serve` and `rypsok check`, through the console script;
- `configuration`: every configuration key with its default, from the schema's classes;
- `tools`: the server instructions and `tools/list` as `rypsok serve` answers them over
  stdio with `examples/configs/tutorial-1.toml` (what a host's model reads).

    python -m releasing.surface                   compare with tests/surface/ (exit 1 on a diff)
    python -m releasing.surface --write           write tests/surface/ anew
    python -m releasing.surface --against-last-tag
        the tool definitions against the latest release tag: when they differ, the newest
        section of CHANGELOG.md must have a `### Tool definitions` heading (the Releasing
        chapter's rule)
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import subprocess
import sys
import types
import typing
from typing import Any

import attrs

from releasing.build import ROOT
from testkit.messages import discover, modern

PINNED = ROOT / "tests" / "surface"
PARTS = ("library", "cli", "configuration", "tools")
TOOLS_CONFIG = ROOT / "examples" / "configs" / "tutorial-1.toml"


def _rypsok(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "rypsok", *args],
        input=stdin,
        capture_output=True,
        check=False,
        cwd=ROOT,
    )


def library() -> dict[str, Any]:
    import rypsok

    facade = rypsok.Rypsok
    methods = {
        name: str(inspect.signature(member))
        for name, member in sorted(vars(facade).items())
        if not name.startswith("_") and callable(member)
    }
    return {"all": sorted(rypsok.__all__), "Rypsok": methods}


def cli() -> dict[str, str]:
    helps: dict[str, str] = {}
    for words in ((), ("serve",), ("check",)):
        done = _rypsok(*words, "--help")
        helps[" ".join(("rypsok", *words))] = done.stderr.decode("utf-8")
    return helps


def _type_name(hint: object) -> str:
    if isinstance(hint, type):
        return hint.__name__
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is not None:
        return str(hint).replace("typing.", "").replace("rypsok.shared.vocabulary.", "")
    return str(hint)


def configuration() -> dict[str, str]:
    from rypsok.config.schema import Config

    keys: dict[str, str] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            name = prefix + field.name
            hint = hints[field.name]
            nested = hint if attrs.has(hint) else None
            if nested is not None:
                walk(nested, name + ".")
                continue
            args = typing.get_args(hint)
            item = next((a for a in args if isinstance(a, type) and attrs.has(a)), None)
            if item is not None:
                # An optional table ([coordination]) or a table of tables ([engines.NAME],
                # [[service.http.auth.callers]]).
                many = typing.get_origin(hint) in (tuple, dict)
                walk(item, name + (".*." if many else "."))
                continue
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            shown = "required" if default is attrs.NOTHING else repr(default)
            keys[name] = f"{_type_name(hint)} = {shown}"

    walk(Config, "")
    return keys


def tools() -> dict[str, Any]:
    sent = [discover(1), modern("tools/list", 2)]
    stdin = "".join(json.dumps(m) + "\n" for m in sent).encode()
    done = _rypsok("serve", "--config", str(TOOLS_CONFIG), stdin=stdin)
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    discovered = answers[1]["result"]
    return {
        "instructions": discovered.get("instructions"),
        "tools": answers[2]["result"]["tools"],
    }


def collect() -> dict[str, Any]:
    return {"library": library(), "cli": cli(), "configuration": configuration(), "tools": tools()}


def render(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def differences(current: dict[str, Any]) -> list[str]:
    """A unified diff per part whose pinned file differs from what the program says."""
    out: list[str] = []
    for part in PARTS:
        path = PINNED / f"{part}.json"
        pinned = path.read_text(encoding="utf-8") if path.exists() else ""
        now = render(current[part])
        if pinned != now:
            out.extend(
                difflib.unified_diff(
                    pinned.splitlines(),
                    now.splitlines(),
                    f"pinned/{part}",
                    f"now/{part}",
                    lineterm="",
                )
            )
    return out


def newest_changelog_section(text: str) -> str:
    """The text of the first `## ` section of a changelog (the release being made)."""
    sections = text.split("\n## ")
    return sections[1] if len(sections) > 1 else ""


def _last_tag() -> str | None:
    done = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0", "--match", "[0-9]*"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def against_last_tag() -> int:
    tag = _last_tag()
    if tag is None:
        sys.stdout.write("surface: no release tag yet; nothing to compare the definitions with\n")
        return 0
    shown = subprocess.run(
        ["git", "show", f"{tag}:tests/surface/tools.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    now = render(tools())
    if shown.returncode == 0 and shown.stdout == now:
        sys.stdout.write(f"surface: tool definitions unchanged since {tag}\n")
        return 0
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    if "\n### Tool definitions" in "\n" + newest_changelog_section(changelog):
        sys.stdout.write(
            f"surface: tool definitions changed since {tag}, and the changelog says so\n"
        )
        return 0
    sys.stdout.write(
        f"surface: tool definitions changed since {tag}; add a '### Tool definitions' heading "
        "to the newest CHANGELOG.md section, one line per change\n"
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m releasing.surface")
    parser.add_argument("--write", action="store_true", help="write tests/surface/ anew")
    parser.add_argument("--against-last-tag", action="store_true")
    args = parser.parse_args(argv)
    if args.against_last_tag:
        return against_last_tag()
    current = collect()
    if args.write:
        PINNED.mkdir(parents=True, exist_ok=True)
        for part in PARTS:
            (PINNED / f"{part}.json").write_text(render(current[part]), encoding="utf-8")
        return 0
    diff = differences(current)
    sys.stdout.write("".join(line + "\n" for line in diff))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
