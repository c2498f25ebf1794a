"""The URL the egress policy admitted is the URL sent (REQ-SEC-006, REQ-SEC-007).

web_fetch's request is built from the parts of the `AdmittedURL`, never from a second reading
of its text: the request line's target is the admitted path and query byte for byte, Host is
the admitted authority, and the connection goes to the admitted host and port. Checked on the
wire, against a loopback server that records the head it receives, for URLs whose reading
differs between parsers (dot segments, backslashes, full-width dots, percent-encoded hosts,
numeric hosts, stray characters in the path and query).
"""

from __future__ import annotations

import ipaddress
from typing import Final

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.egress import EgressPolicy, build_fetch_client
from rypsok.core.egress.clients import FetchTimeouts, fetch_request
from rypsok.core.egress.policy import AdmittedURL
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.fetch.body import read_bounded

# Each is written with {port}; every name resolves to 127.0.0.1 in the test.
_TRICKY: Final = (
    "http://EXAMPLE.org:{port}/a/../b?q=1#fragment",
    "http://example.org.:{port}/%2e%2e/x/./y",
    "http://example.org:{port}/a/%2E%2e/b/.%2e/c",
    "http:\\\\example.org:{port}\\back\\slash?x=\\y",
    "http:///example.org:{port}/three/slashes",
    "http://example\u3002org:{port}/full-width-dot",
    "http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.org:{port}/full-width-name",
    "http://%65xample.org:{port}/percent-host",
    "http://b\u00fccher.example.org:{port}/p\u00e4th?\u00fc=<b>&c='d'&e=`f`",
    "http://example.org:{port}/%zz/%/100%25?%=%25",
    "http://example.org:0{port}/leading-zero-port",
    "http://0x7f.1:{port}/hex-address",
    "http://2130706433:{port}/decimal-address",
    "http://127.1:{port}/short-address",
    "http://example.org:{port}/a|b^c{{d}}[e]?x=[1]{{2}}|3",
)


async def _serve_heads(heads: list[bytes], task_status: trio.TaskStatus[int]) -> None:
    async def answer(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            piece = await stream.receive_some(65536)
            if not piece:
                return
            head += piece
        heads.append(head.split(b"\r\n\r\n", 1)[0])
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        )
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(answer, listeners)


@pytest.mark.parametrize("template", _TRICKY)
async def test_req_sec_007_the_request_line_sent_is_the_url_the_policy_admitted(
    template: str,
) -> None:
    heads: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve_heads, heads)
        policy = EgressPolicy(allow_http=True, ports=frozenset({port})).with_allow("127.0.0.1")
        network_backend = RecordingBackend()
        resolver = MapResolver(
            {
                "example.org": ["127.0.0.1"],
                "xn--bcher-kva.example.org": ["127.0.0.1"],
            }
        )
        judged = policy.judge_url(template.format(port=port), upgrade_http=False)
        assert isinstance(judged, AdmittedURL), template
        async with (
            build_fetch_client(
                policy,
                user_agent="rypsok/0 (+test)",
                resolver=resolver,
                network_backend=network_backend,
            ) as client,
            client.stream(judged) as response,
        ):
            assert bytes(await read_bounded(response, 100)) == b"ok"
        nursery.cancel_scope.cancel()
    (head,) = heads
    request_line, *fields = head.split(b"\r\n")
    assert request_line == b"GET " + judged.path.encode("ascii") + b" HTTP/1.1"
    hosts = [f.split(b":", 1)[1].strip() for f in fields if f.lower().startswith(b"host:")]
    assert hosts == [judged.authority.encode("ascii")]
    # The connection went to the admitted host's address and port, nowhere else.
    assert network_backend.attempts == [(ipaddress.ip_address("127.0.0.1"), port)]


_URL_CHARS: Final = st.sampled_from(
    [*"abcXYZ019-._~!$&'()*+,;=:@/?#[]%{}|\\^` <>\"", "%2e", "%2E", "..", "\u00e9", "\u3002"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["example.org", "B\u00fccher.example", "93.184.215.14", "[2606:4700::1]"]),
    st.lists(_URL_CHARS, max_size=30).map("".join),
)
def test_req_sec_007_the_request_built_holds_the_admitted_parts_unchanged(
    host: str, rest: str
) -> None:
    policy = EgressPolicy()
    judged = policy.judge_url(f"https://{host}/{rest}")
    if not isinstance(judged, AdmittedURL):
        return
    request = fetch_request(
        judged, user_agent="rypsok/0", accept="*/*", timeouts=FetchTimeouts(1.0, connect=1.0)
    )
    assert request.url.target == judged.path.encode("ascii")
    assert request.url.host == judged.host.encode("ascii")
    assert request.url.port == judged.port
    assert dict(request.headers)[b"Host"] == judged.authority.encode("ascii")
