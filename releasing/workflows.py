"""Checks the workflow files and the Containerfile offline (run by .ci/run).

- every file in .github/workflows/ validates against GitHub's workflow schema, as vendored
  by check-jsonschema (no network);
- the project's own rules for them: every action pinned by a full commit SHA, permissions
  declared at the top, no `schedule` trigger (nothing runs on a timer), no
  `continue-on-error` (no job may fail without failing the run);
- containers/Containerfile passes hadolint, and its base image is pinned by digest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from releasing.build import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
CONTAINERFILE = ROOT / "containers" / "Containerfile"
PINNED_ACTION = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _walk(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


def rule_failures(path: Path) -> list[str]:
    """The project's rules a workflow file breaks, one sentence each."""
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    failures: list[str] = []
    # YAML 1.1 reads the key `on` as True.
    triggers = data.get("on", data.get(True, {}))
    if isinstance(triggers, dict) and "schedule" in triggers:
        failures.append("runs on a timer (schedule)")
    if "permissions" not in data:
        failures.append("declares no top-level permissions")
    for node in _walk(data):
        if not isinstance(node, dict):
            continue
        if "continue-on-error" in node:
            failures.append("has continue-on-error")
        uses = node.get("uses")
        if isinstance(uses, str) and not uses.startswith("./") and not PINNED_ACTION.match(uses):
            failures.append(f"uses {uses} without a full commit SHA")
    return failures


def base_image_pinned(text: str) -> bool:
    froms = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    return bool(froms) and all("@sha256:" in image for image in froms)


def main() -> int:
    files = sorted(WORKFLOWS.glob("*.yml"))
    failed = False
    schema = subprocess.run(
        [
            str(Path(sys.executable).parent / "check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if schema.returncode != 0:
        sys.stdout.write(schema.stdout + schema.stderr)
        failed = True
    for path in files:
        for failure in rule_failures(path):
            sys.stdout.write(f"{path.relative_to(ROOT)}: {failure}\n")
            failed = True
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "hadolint"), str(CONTAINERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if lint.returncode != 0:
        sys.stdout.write(lint.stdout + lint.stderr)
        failed = True
    if not base_image_pinned(CONTAINERFILE.read_text(encoding="utf-8")):
        sys.stdout.write("containers/Containerfile: a base image is not pinned by digest\n")
        failed = True
    sys.stdout.write(
        f"workflows: {len(files)} files {'FAIL' if failed else 'valid'}; Containerfile "
        f"{'FAIL' if failed else 'linted'}\n"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
