"""The systemd unit's hardening (REQ-DEP-004): exposure 1.5 or lower, notify, no placeholder.

`systemd-analyze security --offline=true` rates the unit as committed. In CI the analyzer is
installed by `.ci/run` and must run; elsewhere a machine without it skips.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rypsok.core.egress.ranges import classify

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "containers" / "rypsok.service"
MAX_EXPOSURE = 1.5
# Every hardening option book/deployment.md's unit sets, each one rypsok runs under.
REQUIRED = {
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "RestrictRealtime": "yes",
    "ProtectProc": "invisible",
    "PrivateUsers": "yes",
    "Type": "notify",
    "NotifyAccess": "main",
}


def _settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _analyzer() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("systemd-analyze is required in CI (.ci/run installs systemd)")
        pytest.skip("systemd-analyze is not installed")
    return found


def test_req_dep_004_the_units_exposure_is_at_most_one_and_a_half(tmp_path: Path) -> None:
    copy = tmp_path / "rypsok.service"
    copy.write_bytes(UNIT.read_bytes())
    done = subprocess.run(
        [_analyzer(), "security", "--offline=true", "--no-pager", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    match = re.search(r"Overall exposure level for rypsok\.service: (\d+\.\d)", done.stdout)
    assert match is not None, done.stdout + done.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, done.stdout


def test_req_dep_004_the_unit_sets_every_option_rypsok_tolerates() -> None:
    settings = _settings()
    for key, value in REQUIRED.items():
        assert settings.get(key) == [value], key
    assert "~@privileged @resources" in settings["SystemCallFilter"]
    watchdog = settings["WatchdogSec"]
    assert len(watchdog) == 1
    assert re.fullmatch(r"\d+s", watchdog[0])


def test_req_dep_003_the_unit_blocks_only_what_the_egress_policy_refuses() -> None:
    # No placeholder to edit: a public engine is reachable out of the box, and each range the
    # kernel refuses is one the egress policy refuses by default too (a second line).
    settings = _settings()
    assert "IPAddressAllow" not in settings
    denied = [ipaddress.ip_network(n) for line in settings["IPAddressDeny"] for n in line.split()]
    assert denied
    for network in denied:
        for address in (network.network_address, network.broadcast_address):
            assert classify(address) is not None, network
    for public in ("1.1.1.1", "2606:4700:4700::1111", "93.184.216.34"):
        address = ipaddress.ip_address(public)
        assert not any(address in network for network in denied)
    assert "192.0.2.0/24" not in UNIT.read_text(encoding="utf-8")


def _ignored(relative: str, patterns: list[str]) -> bool:
    """The build context's rule (Docker and Podman): the last pattern matching the path or
    one of its parent directories decides; `!` lets a path back in."""
    import fnmatch

    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern.removeprefix("!")
        if any(fnmatch.fnmatchcase(prefix, body) for prefix in prefixes):
            verdict = not negated
    return verdict


def _walked(directory: str, patterns: list[str]) -> bool:
    """Whether a directory can hold a path that is sent: not ignored itself, or named at the
    start of a `!` pattern that lets some of its content back in."""
    let_back = [p.removeprefix("!") for p in patterns if p.startswith("!")]
    return not _ignored(directory, patterns) or any(p.startswith(directory + "/") for p in let_back)


def test_req_dep_005_the_build_context_is_the_lock_and_the_wheel(tmp_path: Path) -> None:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    containerfile = (ROOT / "containers" / "Containerfile").read_text(encoding="utf-8")
    copied = re.findall(r"^COPY (\S+) ", containerfile, re.MULTILINE)
    assert copied == ["requirements.lock", "dist/rypsok-*.whl"]
    assert not _ignored("requirements.lock", patterns)
    assert not _ignored("dist/rypsok-0.10.0-py3-none-any.whl", patterns)
    for heavy in (".venv/lib/python3.11/site-packages/x.py", ".git/HEAD", "tests/data/a.html"):
        assert _ignored(heavy, patterns), heavy
    # Of the checkout as it is (its .venv included), only the lock would be sent. A directory
    # the rules leave out entirely is not walked (as the engines do not).
    sent = []
    for folder, dirs, files in os.walk(ROOT):
        relative = os.path.relpath(folder, ROOT)
        prefix = "" if relative == "." else relative + "/"
        dirs[:] = [d for d in dirs if _walked(prefix + d, patterns)]
        sent += [prefix + f for f in files if not _ignored(prefix + f, patterns)]
    assert [p for p in sent if not p.startswith("dist/")] == ["requirements.lock"]
