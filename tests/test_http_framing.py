"""The listener's reading of HTTP/1 heads and HTTP/2 frame headers (`rypsok.mcp.http_framing`),
sans-I/O: the same verdict and the same bytes passed on however the bytes are split."""

from __future__ import annotations

import hyperframe.frame
import pytest

from rypsok.mcp.http_framing import H2FrameParser, Http1RequestParser

_BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
_CHUNKED = (
    b"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\n" + _BODY[:5] + b"\r\n%x\r\n" % (len(_BODY) - 5) + _BODY[5:] + b"\r\n"
    b"0\r\nTrailer-Field: x\r\n\r\n"
)
_LENGTH = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY)
_BAD_NEXT = b"POST /mcp HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"


def _fed(gate: Http1RequestParser, *parts: bytes) -> bytes:
    return b"".join(gate.feed(part) for part in parts)


@pytest.mark.parametrize("stream", [_CHUNKED + _LENGTH, _LENGTH + _CHUNKED])
def test_req_sec_018_the_gate_passes_the_same_bytes_however_they_are_split(stream: bytes) -> None:
    whole = Http1RequestParser(16384)
    expected = _fed(whole, stream)
    assert whole.refused is None
    assert expected.count(b"POST /mcp HTTP/1.1\r\n") == 2
    for cut in range(1, len(stream)):
        gate = Http1RequestParser(16384)
        assert _fed(gate, stream[:cut], stream[cut:]) == expected, cut
        assert gate.refused is None
    trickled = Http1RequestParser(16384)
    assert _fed(trickled, *(stream[i : i + 1] for i in range(len(stream)))) == expected


@pytest.mark.parametrize("first", [_CHUNKED, _LENGTH])
def test_req_sec_018_a_head_after_a_body_is_checked_where_h11_will_read_it(first: bytes) -> None:
    """The body's framing is followed: the head after it is the one checked, and refused."""
    gate = Http1RequestParser(16384)
    passed = _fed(gate, first + _BAD_NEXT)
    assert passed == _fed(Http1RequestParser(16384), first)
    assert gate.refused is not None
    assert gate.refused.status == 400


def test_req_sec_018_a_body_that_looks_like_a_head_is_passed_as_a_body() -> None:
    body = b"GET /x HTTP/1.1\r\nX: a\r\n b\r\n\r\n"
    request = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    gate = Http1RequestParser(16384)
    assert _fed(gate, request).endswith(body)
    assert gate.refused is None
    assert not gate.in_body


def test_req_sec_018_a_head_above_the_bound_is_431_before_its_end() -> None:
    gate = Http1RequestParser(100)
    gate.feed(b"POST /mcp HTTP/1.1\r\nX: " + b"a" * 100)
    assert gate.refused is not None
    assert (gate.refused.status, gate.refused.reason) == (431, None)


def _frame(frame: hyperframe.frame.Frame) -> bytes:
    return bytes(frame.serialize())


def test_req_sec_018_the_h2_scanner_sums_a_header_block_across_frames_and_reads() -> None:
    headers = hyperframe.frame.HeadersFrame(1)
    headers.data = b"\x82" * 10000
    first = hyperframe.frame.ContinuationFrame(1)
    first.data = b"\x82" * 6000
    data = hyperframe.frame.DataFrame(3)
    data.data = b"x" * 30000  # a DATA payload is not a header block
    closing = hyperframe.frame.ContinuationFrame(1)
    closing.data = b"\x82" * 384
    closing.flags.add("END_HEADERS")
    within = _frame(headers) + _frame(first) + _frame(closing) + _frame(data)
    for cut in range(0, len(within), 997):
        scanner = H2FrameParser(16384)
        assert scanner.feed(within[:cut])
        assert scanner.feed(within[cut:])
        assert not scanner.in_block
    beyond = hyperframe.frame.ContinuationFrame(1)
    beyond.data = b"\x82" * 385
    scanner = H2FrameParser(16384)
    assert scanner.feed(_frame(headers) + _frame(first))
    assert scanner.in_block
    assert not scanner.feed(_frame(beyond))
