"""The content boundary's behaviours that the full mutation run of `rypsok/core/boundary.py`
found untested (issue 18.6, third round): each test states the requirement it holds, and
fails on the mutant that survived without it (book/maintainers/mutation.md)."""

from __future__ import annotations

from rypsok.core.boundary import clean_in_pieces, looks_like_instruction

# The piece size the decisions record (decisions.md, issue 23.1 and 23.2): "a text longer
# than 16,384 characters is now cut into pieces".
_PIECE = 16_384


def _prose(length: int) -> str:
    text = ("Ownership and borrowing keep values safe, said the compiler. " * 400)[:length]
    assert len(text) == length
    return text


def test_req_sec_003_a_text_longer_than_one_piece_is_read_in_pieces() -> None:
    # The checkpoint runs between pieces only: a text of exactly one piece is one scan, and
    # one character more is read piece by piece (the GIL passing, an abandoned read ending).
    calls: list[int] = []
    assert not looks_like_instruction(_prose(_PIECE), lambda: calls.append(1))
    assert calls == []
    assert not looks_like_instruction(_prose(_PIECE + 1), lambda: calls.append(1))
    assert calls


def test_req_sec_015_a_text_longer_than_one_piece_is_cleaned_in_pieces() -> None:
    calls: list[int] = []
    text = _prose(_PIECE)
    assert clean_in_pieces(text, lambda: calls.append(1)) == (text, 0)
    assert calls == []
    longer = _prose(_PIECE + 1)
    assert clean_in_pieces(longer, lambda: calls.append(1)) == (longer, 0)
    assert calls
