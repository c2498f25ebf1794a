"""The egress component's package names (REQ-PERF-005: loaded when first used, so that the
start imports only what it needs) and its test fakes (REQ-MAIN-005).

Each public name of `rypsok.core.egress` is the object of the module that defines it, and
reading it loads that module; a name the package does not have is an AttributeError, as for
any module. The fakes are the edges every egress test stands on: a resolver that answers
from its table only, and a network backend that records and never leaves loopback.
"""

from __future__ import annotations

import importlib
import ipaddress
import subprocess
import sys

import pytest
import trio
import trio.testing

import rypsok.core.egress as egress
from rypsok.core.egress.testing import MapResolver, NotLoopbackError, RecordingBackend


@pytest.mark.parametrize("name", egress.__all__)
def test_req_perf_005_each_public_name_is_its_modules_object(name: str) -> None:
    value = getattr(egress, name)
    home = importlib.import_module(value.__module__)
    assert home.__name__.startswith("rypsok.core.egress.")
    assert value.__name__ == name
    assert getattr(home, name) is value


def test_req_perf_005_a_name_the_package_does_not_have_is_an_attribute_error() -> None:
    assert not hasattr(egress, "NoSuchName")
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = egress.NoSuchName


def test_req_perf_005_importing_the_package_loads_no_module_of_it() -> None:
    # A fresh interpreter: the package alone, then one name, which loads its module only.
    code = (
        "import sys, rypsok.core.egress as e\n"
        "before = sorted(m for m in sys.modules if m.startswith('rypsok.core.egress.'))\n"
        "e.Refusal\n"
        "after = sorted(m for m in sys.modules if m.startswith('rypsok.core.egress.'))\n"
        "print(before, after)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] ['rypsok.core.egress.vocabulary']"


async def test_req_main_005_the_test_resolver_answers_from_its_table_only() -> None:
    resolver = MapResolver({"example.org": ["127.0.0.1", "::1"]})
    assert list(await resolver.resolve("example.org", 443)) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    with pytest.raises(OSError, match="no such name"):
        await resolver.resolve("other.example.org", 443)
    resolver.answer("other.example.org", ["127.0.0.2"])
    assert list(await resolver.resolve("other.example.org", 80)) == [
        ipaddress.ip_address("127.0.0.2")
    ]
    assert resolver.lookups == ["example.org", "other.example.org", "other.example.org"]
    with pytest.raises(OSError, match="no such name"):
        await MapResolver().resolve("example.org", 443)


class _Inner:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    async def connect(self, address: object, port: int) -> trio.abc.Stream:
        self.seen.append((str(address), port))
        left, _right = trio.testing.memory_stream_pair()
        return left


async def test_req_main_005_the_recording_connector_records_and_stays_on_loopback() -> None:
    inner = _Inner()
    network_backend = RecordingBackend(inner)
    loopback = ipaddress.ip_address("127.0.0.1")
    mapped = ipaddress.ip_address("::ffff:127.0.0.1")
    private = ipaddress.ip_address("10.0.0.1")
    stream = await network_backend.connect(loopback, 8080)
    assert isinstance(stream, trio.abc.Stream)
    # The IPv4-mapped form of a loopback address is loopback too.
    await network_backend.connect(mapped, 8081)
    with pytest.raises(NotLoopbackError):
        await network_backend.connect(private, 80)
    assert network_backend.attempts == [(loopback, 8080), (mapped, 8081), (private, 80)]
    assert inner.seen == [("127.0.0.1", 8080), ("::ffff:7f00:1", 8081)]
