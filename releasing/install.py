"""Installs the built wheel by each route a user takes and runs a first search with it.

The routes: `pip install` into a new venv, `pipx install`, `uv tool install`, and `uvx`
(uv's one-off run). Each installs into a fresh directory outside the checkout, resolving the
dependencies from the package registry as a user's install does, then runs `rypsok check` on
Tutorial 1's configuration and Tutorial 1's first search (tools/first-search's fixture, with
the installed command). A route passes only when the command it installed imports rypsok
from its own environment, never from the checkout.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from releasing.build import ROOT

ROUTES = ("pip", "pipx", "uv-tool", "uvx")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path) -> None:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"check-install: {shlex.join(command)} exited {done.returncode}")


def _tool(name: str) -> str:
    """A tool of the development environment (pipx, uv), next to this Python."""
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else name


def install(route: str, wheel: Path, home: Path) -> list[str]:
    """Installs `wheel` by `route` under `home`; returns the command that starts rypsok."""
    env = {**os.environ}
    bin_dir = home / "bin"
    if route == "pip":
        _run([sys.executable, "-m", "venv", str(home / "venv")], cwd=home)
        _run([str(home / "venv" / "bin" / "pip"), "install", "--quiet", str(wheel)], cwd=home)
        return [str(home / "venv" / "bin" / "rypsok")]
    if route == "pipx":
        env.update(PIPX_HOME=str(home / "pipx"), PIPX_BIN_DIR=str(bin_dir))
        env.update(PIPX_MAN_DIR=str(home / "man"))
        _run([_tool("pipx"), "install", "--python", sys.executable, str(wheel)], env=env, cwd=home)
        return [str(bin_dir / "rypsok")]
    if route == "uv-tool":
        env.update(UV_TOOL_DIR=str(home / "uv-tools"), UV_TOOL_BIN_DIR=str(bin_dir))
        _run([_tool("uv"), "tool", "install", "--quiet", str(wheel)], env=env, cwd=home)
        return [str(bin_dir / "rypsok")]
    if route == "uvx":
        # `uvx --from WHEEL rypsok …` is `uv tool run`: an environment of its own, made once.
        return [_tool("uv"), "tool", "run", "--quiet", "--from", str(wheel), "rypsok"]
    raise ValueError(route)


def _where_rypsok_is(command: list[str], home: Path) -> Path:
    """The rypsok package the installed command imports."""
    if command[0].endswith("rypsok"):
        # The console script's first line names its interpreter (and maybe flags: pipx's -E).
        probe = shlex.split(Path(command[0]).read_text(encoding="utf-8").splitlines()[0][2:])
    else:  # uvx: run Python inside the environment uv made for the wheel
        probe = [*command[:-1], "python"]
    found = subprocess.run(
        [*probe, "-c", "import rypsok; print(rypsok.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=home,
    ).stdout.strip()
    return Path(found).resolve()


def check_route(route: str, wheel: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f"rypsok-{route}-") as tmp:
        home = Path(tmp)
        command = install(route, wheel, home)
        where = _where_rypsok_is(command, home)
        if where.is_relative_to(ROOT):
            raise SystemExit(f"check-install: {route} runs the checkout's rypsok ({where})")
        config = home / "tutorial-1.toml"
        shutil.copy(ROOT / "examples" / "configs" / "tutorial-1.toml", config)
        _run([*command, "check", "--config", str(config)], cwd=home)
        search = subprocess.run(
            [sys.executable, "-m", "walkthroughs.first_search", "--command", shlex.join(command)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        answers = [line for line in search.stdout.splitlines() if line.startswith("{")]
        if search.returncode != 0 or len(answers) != 2 or '"results"' not in answers[1]:
            sys.stderr.write(search.stdout + search.stderr)
            raise SystemExit(f"check-install: the first search failed by the {route} route")
        _say(f"{route}: installed outside the checkout ({where.parent}); check and search pass")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/check-install",
        description="Install the built wheel by each user route and run a first search.",
    )
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="holds the wheel")
    parser.add_argument("--route", choices=ROUTES, action="append", help="default: every one")
    args = parser.parse_args(argv)
    wheels = sorted(args.dist.glob("rypsok-*.whl"))
    if len(wheels) != 1:
        _say(f"check-install: expected one wheel in {args.dist} (run tools/build-release)")
        return 1
    for route in args.route or ROUTES:
        check_route(route, wheels[0].resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
