"""Rules of the engines' client that only a mutation run showed unchecked (engines/client.py).

REQ-SEC-017: an engine's requests go to its own origin only, with header fields as RFC 9110
allows them (a driver's field that is not one is refused before any connection).
"""

from __future__ import annotations

import datetime
import functools
import string
import threading
from typing import TYPE_CHECKING

import httpx
import pytest
import trio
import trio.testing

from rypsok.config.memory import ANSWER_TIMES_BYTES, PARSE_FIXED_BYTES
from rypsok.config.schema import Config
from rypsok.core.egress import TcpBackend
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import (
    EngineClient,
    EngineOrigin,
    parse_retry_after,
    url_text,
)
from rypsok.core.model import Reason
from testkit.servers import Reply, serve_http

if TYPE_CHECKING:
    from rypsok.core.egress.ranges import Address

_PROVIDER = EngineOrigin(scheme="https", host="api.provider-of-search.net")
# RFC 9110 §5.6.2: tchar.
_TCHARS = "!#$%&'*+-.^_`|~" + string.digits + string.ascii_letters


@pytest.mark.parametrize("path", ["evil.example.net/x", "", "@evil.example.net/", ".evil/"])
def test_req_sec_017_an_engine_url_is_built_from_an_absolute_path_only(
    path: str,
) -> None:
    # Joined to the authority, a path without its "/" would name another host
    # ("https://api.provider-of-search.netevil.example.net/x").
    with pytest.raises(ValueError, match="an engine path is absolute"):
        _PROVIDER.url(path)
    with pytest.raises(ValueError, match="an engine path is absolute"):
        url_text(_PROVIDER, path)
    assert _PROVIDER.url("/x") == "https://api.provider-of-search.net/x"


async def _sent(headers: dict[str, str]) -> list[tuple[str, str]] | Reason:
    async with serve_http({"/": Reply(body=b"{}")}) as server, EngineClient() as http:
        try:
            await http.get(
                EngineOrigin.parse(server.url),
                "/",
                params=[],
                headers=headers,
                max_bytes=1024,
            )
        except EngineFailure as failure:
            assert server.requests == []  # refused before any connection
            return failure.failure_class
    (request,) = server.requests
    return list(request.headers)


async def test_req_sec_017_every_token_character_makes_a_header_name() -> None:
    names = {f"x{char}y": "v" for char in _TCHARS}
    sent = await _sent(names)
    assert not isinstance(sent, Reason)
    assert [(name, value) for name, value in sent if name in names] == [
        (name.lower(), "v") for name in names
    ]


@pytest.mark.parametrize("char", [" ", "\t", ":", "(", ")", "/", "@", "\x7f", "é", "\r", "\n"])
async def test_req_sec_017_a_header_name_of_another_character_is_refused(
    char: str,
) -> None:
    assert await _sent({f"x{char}y": "v"}) is Reason.REQUEST_FAILURE


@pytest.mark.parametrize(
    "value",
    ["", "!", "~", "a b", "a\tb", "".join(chr(c) for c in range(0x21, 0x7F)), "a \t b"],
)
async def test_req_sec_017_a_header_value_of_visible_characters_spaces_and_tabs_is_sent(
    value: str,
) -> None:
    sent = await _sent({"X-Value": value})
    assert not isinstance(sent, Reason)
    assert ("x-value", value) in sent


@pytest.mark.parametrize(
    "value",
    [
        " a",
        "a ",
        "\ta",
        "a\t",
        "a\r\nX-Other: 1",
        "a\nb",
        "a\x00b",
        "a\x7fb",
        "é",
        "\x20",
    ],
)
async def test_req_sec_017_a_header_value_with_an_edge_space_or_a_control_is_refused(
    value: str,
) -> None:
    assert await _sent({"X-Value": value}) is Reason.REQUEST_FAILURE


async def test_req_page_008_a_large_answer_is_decoded_off_the_loop_without_a_parse_budget() -> None:
    # The parse budget is the service's to set; a client with only the limiter (a driver and
    # its limiter in a tool or a test) decodes a large answer under the limiter alone.
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def decode(body: bytes) -> int:
        threads.append(threading.get_ident())
        return len(body)

    answer = b" " * (PARSE_FIXED_BYTES // ANSWER_TIMES_BYTES + 1)  # a cost past the fixed part
    async with EngineClient() as http:
        http.parse_limiter = trio.CapacityLimiter(1)
        assert http.parse_budget is None
        assert await http.off_loop(decode, answer) == len(answer)
        assert http.parse_limiter.borrowed_tokens == 0
    assert threads != [loop_thread]
    assert len(threads) == 1


class _Unanswered:
    """A network where no connection is ever answered."""

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_req_sec_012_an_engine_client_holds_lim_c1_s_default_in_flight() -> None:
    # LIM-C1's default, 32: a client built without the setting (a driver alone, a tool)
    # holds as many requests in flight as the configured default, and not one more.
    assert Config().limits.outbound_in_flight == 32
    origin = EngineOrigin(scheme="http", host="127.0.0.1", port=8080)
    async with (
        EngineClient(network_backend=_Unanswered()) as http,
        trio.open_nursery() as nursery,
    ):
        for _ in range(40):
            nursery.start_soon(
                functools.partial(http.get, origin, "/", params=[], headers={}, max_bytes=1024)
            )
        assert http.in_flight == 0
        await trio.testing.wait_all_tasks_blocked()
        assert http.in_flight == 32
        nursery.cancel_scope.cancel()


def test_req_sec_010_the_clients_kept_targets_and_header_sets_are_bounded() -> None:
    # A driver that sent a new path or a new header value on every request (a nonce) must
    # not grow the client's memory: past 256 kept, the kept ones are dropped and rebuilt.
    http = EngineClient()
    kept: list[tuple[int, int]] = []
    for n in range(600):
        assert http._target(_PROVIDER, f"/p{n}")[3] == f"/p{n}".encode()
        assert (b"X-N", str(n).encode()) in http._header_list({"X-N": str(n)})
        kept.append((len(http._targets), len(http._header_lists)))
    assert max(targets for targets, _ in kept) <= 256
    assert max(header_sets for _, header_sets in kept) <= 256


@pytest.mark.parametrize("date", ["not a date", "Wed, 02 Dec", "", "Wed, 32 Dec 2026 10:00:00 GMT"])
def test_req_res_002_a_retry_after_date_beside_a_bad_date_header_uses_this_hosts_clock(
    date: str,
) -> None:
    # The provider's Date cannot be read: the wait is measured against this host's clock.
    now = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.UTC).timestamp()
    headers = httpx.Headers({"Retry-After": "Wed, 02 Dec 2026 10:01:30 GMT", "Date": date})
    assert parse_retry_after(headers, now_unix=now) == 90


class _ToPort:
    """A network that carries the judged port (80 here) to a local server's real port."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await TcpBackend().connect(address, self.port)


async def test_req_sec_017_the_host_field_names_no_port_for_the_schemes_default() -> None:
    # RFC 9110 §7.2: Host is the URL's authority, which omits the scheme's default port.
    async with (
        serve_http({"/": Reply(body=b"{}")}) as server,
        EngineClient(network_backend=_ToPort(server.port)) as http,
    ):
        await http.get(
            EngineOrigin(scheme="http", host="127.0.0.1"),
            "/",
            params=[],
            headers={},
            max_bytes=1024,
        )
        await http.get(
            EngineOrigin(scheme="http", host="127.0.0.1", port=server.port),
            "/",
            params=[],
            headers={},
            max_bytes=1024,
        )
    assert [r.header("host") for r in server.requests] == [
        "127.0.0.1",
        f"127.0.0.1:{server.port}",
    ]


@pytest.mark.parametrize("status", [200, 299, 300])
async def test_req_eng_006_only_a_2xx_answer_has_its_body_read(status: int) -> None:
    # A 3xx is handed to the driver as it is, without its body (never followed, never read).
    async with (
        serve_http({"/": Reply(status=status, body=b"the body")}) as server,
        EngineClient() as http,
    ):
        response = await http.get(
            EngineOrigin.parse(server.url), "/", params=[], headers={}, max_bytes=1024
        )
    assert response.status == status
    assert response.body == (b"the body" if status < 300 else b"")


@pytest.mark.parametrize(
    "value",
    ["Wed, 02 Dec 2026 10:01:30 -0000", "Wed, 02 Dec 2026 10:01:30", "02 Dec 2026 10:01:30"],
)
def test_req_res_002_a_retry_after_date_without_its_zone_is_no_wait(value: str) -> None:
    # An HTTP-date is in GMT; a date whose zone is unknown ("-0000") or missing names no
    # instant, and is not read on whatever zone this host is in.
    now = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.UTC).timestamp()
    headers = httpx.Headers({"Retry-After": value, "Date": "Wed, 02 Dec 2026 10:00:00 GMT"})
    assert parse_retry_after(headers, now_unix=now) is None
