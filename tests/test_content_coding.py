"""The bounded decoder of engine answers and pages (rypsok.core.content_coding), on its own."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib
from typing import Any

import pytest

from rypsok.core import content_coding
from rypsok.core.content_coding import BoundedDecoder, OverBound, UnreadableCoding

# Random bytes repeated at a distance above 16 KiB: only a decoder with the full 32 KiB window
# reads them back, so a smaller window is an error, not a silent success.
FAR = random.Random(7).randbytes(20000) * 3
STEP = content_coding._STEP_BYTES


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


def _decode(
    coding: str, chunks: list[bytes], limit: int, *, prefix: bool = False
) -> tuple[bytes, list[bytes]]:
    kept: list[bytes] = []
    decoder = BoundedDecoder(coding, limit, kept, prefix=prefix)
    for chunk in chunks:
        decoder.feed(chunk)
    decoder.finish()
    return b"".join(kept), kept


class _Recorder:
    """zlib's decompressor, noting what each step produced."""

    def __init__(self, wbits: int, steps: list[int]) -> None:
        self._real = _REAL_DECOMPRESSOBJ(wbits=wbits)
        self._steps = steps

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out: bytes = self._real.decompress(data, max_length)
        self._steps.append(len(out))
        return out

    def __getattr__(self, name: str) -> Any:
        # flush, eof, unconsumed_tail: zlib's own.
        return getattr(self._real, name)


_REAL_DECOMPRESSOBJ: Any = zlib.decompressobj


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    produced: list[int] = []
    # The decoder's `zlib` is this module's: its decompressor is replaced for both.
    monkeypatch.setattr(zlib, "decompressobj", lambda wbits: _Recorder(wbits, produced))
    return produced


# --- identity ----------------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["", "identity"])
def test_req_sec_010_an_identity_body_of_the_limit_is_kept_as_it_came(coding: str) -> None:
    chunks = [b"a" * 4, b"b" * 3, b"c" * 3]
    body, kept = _decode(coding, chunks, 10)
    assert body == b"aaaabbbccc"
    assert kept == chunks
    assert all(piece is chunk for piece, chunk in zip(kept, chunks, strict=True))


@pytest.mark.parametrize("coding", ["", "identity"])
def test_req_sec_010_one_identity_byte_past_the_limit_is_over_and_not_kept(coding: str) -> None:
    kept: list[bytes] = []
    decoder = BoundedDecoder(coding, 10, kept)
    decoder.feed(b"a" * 6)
    with pytest.raises(OverBound):
        decoder.feed(b"b" * 5)
    assert kept == [b"a" * 6]


def test_req_sec_010_an_empty_piece_is_not_handed_on() -> None:
    kept: list[bytes] = []
    decoder = BoundedDecoder("", 0, kept)
    decoder.feed(b"")
    decoder.finish()
    assert kept == []
    # A gzip stream's flush yields nothing at its end: nothing is handed on for it either.
    _, kept = _decode("gzip", [gzip.compress(b"{}")], 2)
    assert kept == [b"{}"]


def test_lim_f13_with_prefix_the_first_limit_bytes_are_kept_then_over() -> None:
    kept: list[bytes] = []
    decoder = BoundedDecoder("", 10, kept, prefix=True)
    decoder.feed(b"a" * 6)
    with pytest.raises(OverBound):
        decoder.feed(b"b" * 7)
    assert kept == [b"a" * 6, b"b" * 4]
    # Exactly the limit is not over, with a prefix too.
    assert _decode("", [b"a" * 6, b"b" * 4], 10, prefix=True)[0] == b"a" * 6 + b"b" * 4


def test_lim_f13_with_prefix_a_chunk_that_lands_past_the_limit_keeps_nothing_more() -> None:
    kept: list[bytes] = []
    decoder = BoundedDecoder("", 10, kept, prefix=True)
    decoder.feed(b"a" * 10)
    with pytest.raises(OverBound):
        decoder.feed(b"b")
    # The count was already at the limit: no empty piece is handed on for the last chunk.
    assert kept == [b"a" * 10]
    # Nor for a compressed stream whose first chunk decodes to exactly the limit.
    compressor = zlib.compressobj(wbits=31)
    first = compressor.compress(b"a" * 10) + compressor.flush(zlib.Z_SYNC_FLUSH)
    kept = []
    decoder = BoundedDecoder("gzip", 10, kept, prefix=True)
    decoder.feed(first)
    with pytest.raises(OverBound):
        decoder.feed(compressor.compress(b"b") + compressor.flush())
    assert kept == [b"a" * 10]


# --- gzip: steps and the bound -----------------------------------------------------------


def test_req_sec_013_a_gzip_bomb_is_cut_one_byte_past_the_limit(steps: list[int]) -> None:
    bomb = gzip.compress(b"\0" * (8 * STEP), compresslevel=9)
    limit = 3 * STEP + 100
    kept: list[bytes] = []
    decoder = BoundedDecoder("gzip", limit, kept)
    with pytest.raises(OverBound):
        decoder.feed(bomb)
    # Steps of at most 64 KiB, each no larger than what the bound still allows plus one.
    assert steps == [STEP, STEP, STEP, 101]
    assert sum(len(piece) for piece in kept) == 3 * STEP


def test_req_sec_013_a_small_limit_is_one_step_of_the_limit_plus_one(steps: list[int]) -> None:
    kept: list[bytes] = []
    decoder = BoundedDecoder("gzip", 1000, kept)
    with pytest.raises(OverBound):
        decoder.feed(gzip.compress(b"\0" * 5000))
    assert steps == [1001]
    assert kept == []


def test_req_sec_013_a_gzip_body_of_exactly_the_limit_is_read_and_one_byte_more_is_not() -> None:
    payload = b"x" * (2 * STEP + 7)
    limit = len(payload)
    assert _decode("gzip", [gzip.compress(payload)], limit)[0] == payload
    with pytest.raises(OverBound):
        _decode("gzip", [gzip.compress(payload + b"y")], limit)


def test_req_sec_013_with_prefix_a_bomb_keeps_exactly_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (8 * STEP), compresslevel=9)
    kept: list[bytes] = []
    decoder = BoundedDecoder("gzip", 2 * STEP + 5, kept, prefix=True)
    with pytest.raises(OverBound):
        decoder.feed(bomb)
    assert b"".join(kept) == b"\0" * (2 * STEP + 5)


def test_req_sec_013_gzip_is_read_across_chunks_with_its_whole_window() -> None:
    compressed = gzip.compress(FAR)
    chunks = [compressed[i : i + 1000] for i in range(0, len(compressed), 1000)]
    for coding in ("gzip", "x-gzip"):
        assert _decode(coding, chunks, len(FAR))[0] == FAR


def test_req_sec_013_trailing_bytes_after_the_stream_are_ignored() -> None:
    compressed = gzip.compress(b"{}")
    assert _decode("gzip", [compressed + b"trailing"], 2)[0] == b"{}"
    assert _decode("gzip", [compressed, b"trailing", b"more"], 2)[0] == b"{}"


# --- deflate: zlib-wrapped, or raw tried once --------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_req_sec_013_bytes_sent_after_the_streams_end_are_not_kept(coding: str) -> None:
    # A provider that goes on sending after its compressed stream ended: 200 chunks of
    # 64 KiB (12.5 MiB) must not pile up anywhere (zlib would keep them all as its
    # `unused_data`); only the stream's own bytes are decoded.
    compressed = gzip.compress(b"answer") if coding == "gzip" else zlib.compress(b"answer")
    out: list[bytes] = []
    decoder = BoundedDecoder(coding, 100, out)
    decoder.feed(compressed)
    junk = b"\xff" * 65536
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(200):
            decoder.feed(junk)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    decoder.finish()
    assert out == [b"answer"]
    assert after - before < 65536  # nothing of the 12.5 MiB is held


def test_req_sec_013_deflate_is_read_zlib_wrapped_and_raw() -> None:
    assert _decode("deflate", [zlib.compress(FAR)], len(FAR))[0] == FAR
    raw = _raw_deflate(FAR)
    assert _decode("deflate", [raw[:100], raw[100:]], len(FAR))[0] == FAR


def test_req_sec_013_raw_deflate_is_tried_on_the_first_chunk_only() -> None:
    # The first byte of a zlib header takes nothing out and fails nothing; the next chunk is
    # raw deflate, which the zlib reading refuses. The stream had begun: it is not re-read raw.
    raw = _raw_deflate(b"hello")
    assert _decode("deflate", [raw], 5)[0] == b"hello"
    kept: list[bytes] = []
    decoder = BoundedDecoder("deflate", 100, kept)
    decoder.feed(b"\x78")
    with pytest.raises(UnreadableCoding):
        decoder.feed(raw)
    assert kept == []


def test_req_sec_013_a_stream_that_is_neither_form_is_unreadable() -> None:
    # gzip framing under deflate fails zlib and raw alike, once each.
    with pytest.raises(UnreadableCoding):
        _decode("deflate", [gzip.compress(b"{}")], 100)
    with pytest.raises(UnreadableCoding):
        _decode("deflate", [b"\xff" * 10], 100)


def test_req_sec_013_a_zlib_stream_broken_after_its_start_is_unreadable() -> None:
    compressor = zlib.compressobj()
    begun = compressor.compress(b"{}" * 100) + compressor.flush(zlib.Z_FULL_FLUSH)
    kept: list[bytes] = []
    decoder = BoundedDecoder("deflate", 1000, kept)
    decoder.feed(begun)
    assert kept == [b"{}" * 100]
    # The next block declares the reserved block type.
    with pytest.raises(UnreadableCoding):
        decoder.feed(b"\x07")


def test_req_sec_013_the_raw_fallback_is_deflates_only() -> None:
    for coding in ("gzip", "x-gzip"):
        with pytest.raises(UnreadableCoding):
            _decode(coding, [_raw_deflate(b"{}")], 100)
        # Nor is a zlib-wrapped stream read as gzip.
        with pytest.raises(UnreadableCoding):
            _decode(coding, [zlib.compress(b"{}")], 100)


# --- codings not read, streams that do not end ------------------------------------------


@pytest.mark.parametrize(
    "coding", ["br", "zstd", "compress", "gzip, deflate", "deflate, gzip", "GZIP", " gzip", "*"]
)
def test_req_sec_013_another_or_a_stacked_coding_is_refused_at_once(coding: str) -> None:
    with pytest.raises(UnreadableCoding):
        BoundedDecoder(coding, 100, [])


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_req_sec_013_a_truncated_stream_is_unreadable_at_its_end(coding: str) -> None:
    compressed = gzip.compress(b"{}" * 1000) if coding == "gzip" else zlib.compress(b"{}" * 1000)
    kept: list[bytes] = []
    decoder = BoundedDecoder(coding, 2000, kept)
    decoder.feed(compressed[:-6])
    with pytest.raises(UnreadableCoding):
        decoder.finish()


def test_req_sec_013_a_corrupt_gzip_stream_is_unreadable() -> None:
    with pytest.raises(UnreadableCoding):
        _decode("gzip", [b"\x1f\x8bnot gzip"], 100)


def test_req_sec_013_an_empty_compressed_body_is_unreadable_and_an_empty_identity_one_is_not() -> (
    None
):
    with pytest.raises(UnreadableCoding):
        _decode("gzip", [], 100)
    assert _decode("", [], 100)[0] == b""


def _cut_with_output_held() -> tuple[bytes, int]:
    """A gzip stream of zeros without its trailer whose last output zlib still holds
    when the input runs out (a match cut by the 64 KiB step): only the flush at the end gives
    it. Found, not hard-coded, so that another zlib build finds its own."""
    for size in range(STEP + 1, STEP + 64):
        cut = gzip.compress(b"\0" * size)[:-8]
        z = zlib.decompressobj(wbits=31)
        produced = len(z.decompress(cut, STEP))
        if not z.unconsumed_tail and produced == STEP and z.flush():
            return cut, size
    raise AssertionError("no cut stream holds output back")


def test_req_sec_013_what_a_cut_stream_still_holds_counts_against_the_limit() -> None:
    cut, size = _cut_with_output_held()
    kept: list[bytes] = []
    decoder = BoundedDecoder("gzip", STEP, kept, prefix=True)
    decoder.feed(cut)
    assert b"".join(kept) == b"\0" * STEP
    # What is held comes out at the end, past the limit: over, not unreadable.
    with pytest.raises(OverBound):
        decoder.finish()
    # Under a limit it fits, it is kept before the cut stream is refused.
    kept.clear()
    decoder = BoundedDecoder("gzip", size, kept)
    decoder.feed(cut)
    with pytest.raises(UnreadableCoding):
        decoder.finish()
    assert b"".join(kept) == b"\0" * size
