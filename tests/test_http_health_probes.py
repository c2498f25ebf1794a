"""One judgement of the requests answered without a token by design (REQ-DEP-002,
REQ-SEC-018): whatever the app answers as a health probe or a CORS preflight makes room at
the connection cap, and whatever it asks a token of does not.

Each form of request-target is sent twice: to the admission's judgement on the raw head
(`Admission.tokenless`, before hypercorn parses it), and through the real listener over
loopback to the app, whose answer says how it routed it. Then the repro of the outside
probe: a tokenless flood holds the cap, and a probe in another form than the exact
`GET /healthz` is answered all the same.
"""

from __future__ import annotations

import pytest
import trio
from http_helpers import CALLERS, CALLERS_ENV, closed_by_server, http_counts, make_config, serving

from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.http_refusals import RefusalLog
from rypsok.mcp.listener.admission import Admission
from rypsok.mcp.listener.heads import whole_http1_head
from rypsok.mcp.listener.memory import MemoryReturn

ORIGIN = "http://app.example"
CORS = f'[service.http]\nallowed_origins = ["{ORIGIN}"]\n' + CALLERS
_PREFLIGHT = f"Origin: {ORIGIN}\r\nAccess-Control-Request-Method: POST\r\n".encode()

# (request line, more header fields, whether the app answers it without a token by design)
FORMS = {
    "exact": (b"GET /healthz", b"", True),
    "query": (b"GET /healthz?x=1", b"", True),
    "empty-query": (b"GET /healthz?", b"", True),
    "percent-encoded": (b"GET /%68ealthz", b"", True),
    "percent-encoded-lower-hex": (b"GET /health%7a", b"", True),
    "absolute-http": (b"GET http://127.0.0.1/healthz", b"", True),
    "absolute-http-upper-scheme-query": (b"GET HTTP://127.0.0.1/healthz?x=1", b"", True),
    # The framing passes on the absolute form of http only: https is refused 400.
    "absolute-https": (b"GET https://127.0.0.1/healthz", b"", False),
    "head": (b"HEAD /healthz", b"", True),
    "head-query": (b"HEAD /healthz?x=1", b"", True),
    "readyz": (b"GET /readyz", b"", True),
    "readyz-empty-query": (b"GET /readyz?", b"", True),
    "readyz-head-percent-encoded": (b"HEAD /%72eadyz", b"", True),
    "readyz-absolute-http": (b"GET http://127.0.0.1/readyz?probe=1", b"", True),
    "trailing-slash": (b"GET /healthz/", b"", False),
    "double-slash": (b"GET //healthz", b"", False),
    "upper-case": (b"GET /HEALTHZ", b"", False),
    "encoded-question-mark": (b"GET /healthz%3F", b"", False),
    "longer-path": (b"GET /healthzz", b"", False),
    "absolute-http-double-slash": (b"GET http://127.0.0.1//healthz", b"", False),
    "post": (b"POST /healthz", b"", False),
    "lower-case-method": (b"get /healthz", b"", False),
    "preflight": (b"OPTIONS /mcp", _PREFLIGHT, True),
    "options-without-preflight-field": (b"OPTIONS /mcp", f"Origin: {ORIGIN}\r\n".encode(), False),
}


def _head(line: bytes, fields: bytes) -> bytes:
    return line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"Connection: close\r\n\r\n"


def _answered_by_design(answer: bytes, line: bytes) -> bool:
    """Whether the app's answer is a probe's (200 with the health body; a HEAD's without
    it) or a preflight's (204 with the CORS fields), not a request for a token (401) or
    another refusal."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0]
    if line.startswith(b"OPTIONS "):
        return status.startswith(b"HTTP/1.1 204 ") and b"access-control-allow-origin" in head
    if not status.startswith(b"HTTP/1.1 200 "):
        return False
    if line.startswith(b"HEAD "):
        return body == b"" and b"content-length: " in head.lower()
    return body in (b'{"status":"ok"}', b'{"status":"ready"}')


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
async def test_req_dep_002_the_admission_judges_a_probe_as_the_app_routes_it(
    form: tuple[bytes, bytes, bool],
) -> None:
    line, fields, by_design = form
    head = _head(line, fields)
    config = make_config(CORS, CALLERS_ENV)
    admission = Admission(
        config, Callers.from_config(config, CALLERS_ENV), RefusalLog(), MemoryReturn()
    )
    # At the cap a tokenless head makes no room; one answered without a token by design does.
    makes_room = not admission.tokenless(whole_http1_head(head))
    async with serving(config, CALLERS_ENV) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(head)
            answer = await closed_by_server(stream, 10)
    assert (makes_room, _answered_by_design(answer, line)) == (by_design, by_design)


ONE_CALLER = '[service.http]\n[[service.http.auth.callers]]\nid = "alpha"\ntoken_env = "T"\n'
_FLOOD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a head begun, never ended


@pytest.mark.parametrize(
    ("line", "answered"),
    [
        (b"GET /healthz?x=1", True),
        (b"GET /%68ealthz", True),
        (b"HEAD /readyz?", True),
        (b"GET http://127.0.0.1/healthz", True),
        (b"GET /healthz/", False),
    ],
)
async def test_req_dep_002_at_the_cap_a_probe_in_any_form_the_app_routes_makes_room(
    line: bytes, answered: bool
) -> None:
    """Four connections at most, one caller (tokens required), six connections of a
    tokenless flood that began a head and wait: a probe the app routes as one is answered,
    a flood's connection closed for it; a request the app would ask a token of is closed
    unanswered (`too_many_connections`)."""
    env = {"T": "t" * 40}
    config = make_config(ONE_CALLER, env, max_connections=4, idle_timeout_s=60)
    async with serving(config, env) as server:
        flood = []
        try:
            for _ in range(6):
                stream = await trio.open_tcp_stream("127.0.0.1", server.port)
                await stream.send_all(_FLOOD)
                flood.append(stream)
            with trio.fail_after(10):
                while server.listener.connections < 4:  # noqa: ASYNC110 # no event to wait on
                    await trio.sleep(0.01)
            await trio.sleep(1.5)  # the flood settled past the grace, as the outside probe's
            refused = http_counts().get("too_many_connections", 0)
            probe = await trio.open_tcp_stream("127.0.0.1", server.port)
            async with probe:
                await probe.send_all(_head(line, b""))
                answer = await closed_by_server(probe, 10)
        finally:
            for stream in flood:
                await stream.aclose()
    if answered:
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert http_counts().get("too_many_connections", 0) == refused
    else:
        assert answer == b""
        assert http_counts()["too_many_connections"] == refused + 1


@pytest.mark.parametrize(
    "path", [b"/healthz/", b"//healthz", b"/HEALTHZ", b"/healthz%3F", b"/healthzz", b"/readyz/"]
)
async def test_req_dep_002_a_path_that_is_no_probe_is_asked_for_a_token(path: bytes) -> None:
    """The match is exact and case-sensitive (book: deployment, Health): any other path is the
    gate's, which asks a caller's token of it (401 with the Bearer challenge), never the
    health answer."""
    config = make_config(CORS, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(_head(b"GET " + path, b""))
            answer = await closed_by_server(stream, 10)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401 ")
    assert b"www-authenticate: bearer" in head.lower()
    assert b'"status"' not in body
