"""Builds one commit's wheel and sdist twice and compares their bytes (REQ-TEST-019).

Each build starts from `git archive` of the commit in a fresh directory, so nothing of the
working tree (untracked files, caches, an editable install's metadata) can reach the files,
and SOURCE_DATE_EPOCH is the commit's own time, so two builds of one commit, on any day and
any machine with the locked build tools, give the same bytes. The build runs without
isolation on purpose: the frontend and backend are the ones the development lock pins, not
whatever the registry serves that day.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def commit_time(commit: str) -> int:
    return int(_git("log", "-1", "--format=%ct", commit).decode().strip())


def build_once(commit: str, out: Path, epoch: int) -> None:
    """One build of `commit` into `out`: a wheel and an sdist."""
    archive = _git("archive", "--format=tar", commit)
    with tempfile.TemporaryDirectory(prefix="rypsok-build-") as tmp:
        source = Path(tmp) / "source"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(source, filter="data")
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )


def digests(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != "SHA256SUMS"
    }


def compare(first: dict[str, str], second: dict[str, str]) -> list[str]:
    """The names whose bytes differ between two builds, or that only one build made."""
    return sorted(
        name for name in first.keys() | second.keys() if first.get(name) != second.get(name)
    )


def write_sums(folder: Path, sums: dict[str, str]) -> Path:
    path = folder / "SHA256SUMS"
    # The format `sha256sum --check` reads: digest, two spaces, name.
    path.write_text("".join(f"{d}  {n}\n" for n, d in sorted(sums.items())), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/build-release",
        description="Build the wheel and sdist of a commit twice; fail if the bytes differ.",
    )
    parser.add_argument("--commit", default="HEAD", help="the commit to build (default HEAD)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the files go")
    args = parser.parse_args(argv)
    if _git("status", "--porcelain", "--untracked-files=no").strip():
        _say("# note: the working tree has uncommitted changes; they are not in the build")
    epoch = commit_time(args.commit)
    with tempfile.TemporaryDirectory(prefix="rypsok-second-") as tmp:
        second_out = Path(tmp)
        args.out.mkdir(parents=True, exist_ok=True)
        for stale in args.out.iterdir():
            if stale.is_file():
                stale.unlink()
        build_once(args.commit, args.out, epoch)
        build_once(args.commit, second_out, epoch)
        first, second = digests(args.out), digests(second_out)
    for name, digest in sorted(first.items()):
        _say(f"{digest}  {name}  {'same' if second.get(name) == digest else 'DIFFERENT'}")
    differing = compare(first, second)
    if differing or not first:
        _say(f"build-release: the two builds differ: {', '.join(differing) or 'nothing built'}")
        return 1
    sums = write_sums(args.out, first)
    _say(f"build-release: two builds identical; checksums in {sums}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
