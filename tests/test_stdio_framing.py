"""Newline framing of the stdio transport under LIM-O3, and the parser on arbitrary bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mcp_helpers import dispatcher

from rypsok.mcp.protocol import Call, Cancel, Nothing, Reply, jsonrpc
from rypsok.mcp.protocol.stdio_lines import MAX_LINE_BYTES, LineDecoder


def test_req_mcp_002_lim_o3_bound_is_16_mib_with_the_newline() -> None:
    assert MAX_LINE_BYTES == 16 * 1024 * 1024
    splitter = LineDecoder(8)
    assert splitter.feed(b"1234567\n") == [b"1234567"]  # 7 bytes + newline = 8: kept
    assert splitter.feed(b"12345678\n") == []  # 9 with the newline: dropped
    assert splitter.dropped == 1
    assert splitter.feed(b"ok\n") == [b"ok"]


def test_req_mcp_002_lim_o3_overlong_line_in_pieces_is_dropped_without_being_held() -> None:
    splitter = LineDecoder(10)
    assert splitter.feed(b"abcdef") == []
    assert splitter.feed(b"ghijkl") == []  # past the bound: dropped at once
    assert splitter.dropped == 1
    assert len(splitter._buffer) == 0
    assert splitter.feed(b"more and more bytes without end") == []
    assert len(splitter._buffer) == 0
    assert splitter.feed(b"tail\nnext\n") == [b"next"]
    assert splitter.dropped == 1


def test_req_mcp_002_last_line_without_newline_is_served_at_end_of_input() -> None:
    splitter = LineDecoder(100)
    assert splitter.feed(b"a\nb") == [b"a"]
    assert splitter.finish() == b"b"
    assert splitter.finish() is None


@given(st.lists(st.binary(max_size=30), max_size=12), st.integers(min_value=1, max_value=20))
def test_req_mcp_002_lim_o3_splitting_is_independent_of_how_the_bytes_arrive(
    pieces: list[bytes], chunk: int
) -> None:
    data = b"".join(pieces)
    whole = LineDecoder(16)
    expected = whole.feed(data)
    expected_last = whole.finish()
    split = LineDecoder(16)
    got = []
    for start in range(0, len(data), chunk):
        got += split.feed(data[start : start + chunk])
    assert got == expected
    assert split.finish() == expected_last
    kept = [line for line in data.split(b"\n")[:-1] if len(line) + 1 <= 16]
    assert got == kept


@given(st.binary(max_size=200))
def test_req_mcp_001_any_line_gets_a_json_rpc_answer_or_none(line: bytes) -> None:
    action = dispatcher().handle(jsonrpc.parse(line))
    assert isinstance(action, Reply | Nothing | Call | Cancel)
    if isinstance(action, Reply):
        encoded = jsonrpc.encode(action.payload)
        assert encoded.count(b"\n") == 1


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["jsonrpc", "id", "method", "params", "_meta"]), inner
            )
        ),
        max_leaves=10,
    )
)
def test_req_mcp_001_any_json_value_is_classified_without_error(value: object) -> None:
    message = jsonrpc.parse_one(value)
    assert isinstance(
        message, jsonrpc.Request | jsonrpc.Notification | jsonrpc.Response | jsonrpc.Invalid
    )
    if isinstance(message, jsonrpc.Request):
        assert isinstance(message.id, str | int)
        assert not isinstance(message.id, bool)
