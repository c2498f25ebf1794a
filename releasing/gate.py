"""The small yes-or-no checks of the release workflows, each a subcommand.

python -m releasing.gate mutants MODULE     every mutant of MODULE's last run
                                            (.mutation/MODULE.json) was killed or is
                                            excluded with a reason
python -m releasing.gate version TAG        the tag equals the package's version
python -m releasing.gate book-version LINE  writes LINE between the version markers of the
                                            book's first page; fails when they are missing
"""

from __future__ import annotations

import json
import re
import sys
import tomllib

from releasing.build import ROOT

BOOK_FIRST_PAGE = ROOT / "book" / "index.md"
MARKERS = re.compile(r"(<!-- version -->\n).*?(\n<!-- /version -->)", re.DOTALL)


def mutants(module: str) -> str | None:
    path = ROOT / ".mutation" / f"{module}.json"
    if not path.exists():
        return f"no mutation run of {module} ({path.name} is missing)"
    counts = json.loads(path.read_text(encoding="utf-8"))["counts"]
    if counts.get("survived", 0):
        return f"{counts['survived']} mutants of {module} survived (listed above)"
    return None


def version(tag: str) -> str | None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if tag != project["version"]:
        return f"the tag {tag!r} is not the package version {project['version']!r}"
    return None


def book_version(line: str) -> str | None:
    text = BOOK_FIRST_PAGE.read_text(encoding="utf-8")
    if not MARKERS.search(text):
        return "the book's first page has no <!-- version --> … <!-- /version --> markers"
    BOOK_FIRST_PAGE.write_text(MARKERS.sub(lambda m: m[1] + line + m[2], text), encoding="utf-8")
    return None


CHECKS = {"mutants": mutants, "version": version, "book-version": book_version}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in CHECKS:
        sys.stderr.write(f"usage: python -m releasing.gate {{{','.join(CHECKS)}}} VALUE\n")
        return 2
    failure = CHECKS[args[0]](args[1])
    if failure:
        sys.stdout.write(f"gate {args[0]}: {failure}\n")
        return 1
    sys.stdout.write(f"gate {args[0]}: ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
