"""REQ-PAGE-007's Latin weighing (`_latin_choice`) at the bounds and ties that decide it:
the sample's end, the bytes counted, the tie rule, the count of each letter, the charsets
the detector may answer, and the alphabets only one language needs
(decisions/fetch-charset-decoding). The detector's answer is given, so each case holds the
weighing itself whatever the detector ranks; the pages read through web_fetch are in
tests/test_fetch_realpath_pages.py."""

from __future__ import annotations

import pytest

from rypsok.core.fetch.content import _latin_choice

# The part of a page weighed, as the decision record names it.
SAMPLE_BYTES = 256 * 1024


def beside_letters(counts: dict[int, int]) -> bytes:
    """Each byte beyond ASCII as often as given, each between two ASCII letters."""
    return b" ".join(b"x" + bytes([byte]) + b"x" for byte, n in counts.items() for _ in range(n))


def test_req_page_007_a_letter_on_the_samples_last_byte_is_weighed() -> None:
    # Polish ł (0xB3 in windows-1250) read as ³ by the detector's windows-1257: the byte at
    # the sample's last place decides; one place further it is not read.
    inside = b"a" * (SAMPLE_BYTES - 1) + b"\xb3a"
    past = b"a" * SAMPLE_BYTES + b"\xb3a"
    assert _latin_choice(inside, "cp1257") == "cp1250"
    assert _latin_choice(past, "cp1257") == "cp1257"


@pytest.mark.parametrize("detected", ["cp1252", "cp1250", "iso8859-2", "cp1254"])
def test_req_page_007_a_tie_keeps_the_detectors_charset(detected: str) -> None:
    # German ß is 0xDF in each of these: every one explains the page alike.
    assert _latin_choice(b"Die Stra\xdfe ist gro\xdf.", detected) == detected


def test_req_page_007_a_page_of_no_letter_beyond_ascii_keeps_the_detectors_charset() -> None:
    # Dashes and a copyright sign between spaces tell no letter: nothing to weigh.
    assert _latin_choice(b"The quay \x96 opened \x96 \xa9 2008", "cp1254") == "cp1254"


def test_req_page_007_a_charset_reading_a_control_code_is_out_even_unweighed() -> None:
    # Windows' dashes are control codes in ISO-8859-15: with no letter to weigh, the first
    # charset that reads them is taken.
    assert _latin_choice(b"The quay \x96 opened \x96 today", "iso8859-15") == "cp1252"


def test_req_page_007_the_last_control_code_puts_a_charset_out() -> None:
    # 0x9F is Ÿ in windows-1252 and U+009F, the last C1 control, in ISO-8859-15; the page's
    # ß ties every other charset, so only the control code puts the detector's pick out.
    assert _latin_choice(b"Die Stra\xdfe \x9f", "iso8859-15") == "cp1252"


def test_req_page_007_signs_after_a_word_are_no_letters() -> None:
    # Windows® (0xAE, Ž in windows-1250) four times and one café: only the é is a letter,
    # which every charset explains, so the detector's windows-1252 stands.
    body = b"Windows\xae Office\xae Excel\xae Word\xae at the caf\xe9"
    assert _latin_choice(body, "cp1252") == "cp1252"


def test_req_page_007_each_letter_counts_as_often_as_it_stands() -> None:
    # Ó three times and Ť (0x8D, unread in windows-1252) once: windows-1250 reads both as
    # Slovak letters. Ã four times, ¥ and ä twice each: windows-1252 explains six of eight
    # (Portuguese), ISO-8859-2 Ă, Ľ and ä as no one language.
    assert _latin_choice(beside_letters({0xD3: 3, 0x8D: 1}), "cp1252") == "cp1250"
    assert _latin_choice(beside_letters({0xC3: 4, 0xA5: 2, 0xE4: 2}), "cp1252") == "cp1252"


def test_req_page_007_the_tables_last_byte_is_a_letter_weighed() -> None:
    # ÿ is 0xFF, the last byte of each table: French in windows-1252, a dot above (˙) in
    # windows-1250, which the detector answered.
    assert _latin_choice(b"L'Ha\xff-les-Roses", "cp1250") == "cp1252"


@pytest.mark.parametrize(
    ("detected", "text", "encoding"),
    [
        # ISO-8859-3, -4, -15 and Mac Roman answered by the detector for pages they misread.
        ("iso8859-3", "Władze portu otworzyły nabrzeże.", "cp1250"),
        ("iso8859-4", "Správa přístavu v pondělí otevřela nábřeží.", "cp1250"),
        ("iso8859-15", "Gyönyörű idő volt, a nő fűt vágott és őszintén örült.", "cp1250"),
        ("mac-roman", "Die Straße ist groß, und die Maße passen genau.", "cp1252"),
    ],
    ids=["iso-8859-3", "iso-8859-4", "iso-8859-15", "mac-roman"],
)
def test_req_page_007_a_latin_charset_the_detector_answers_is_weighed(
    detected: str, text: str, encoding: str
) -> None:
    assert _latin_choice(text.encode(encoding), detected) == encoding


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        # Maltese ċ, ġ, ħ and Esperanto ĉ, ĝ, ŝ, ŭ: ISO-8859-3 alone reads them.
        ("Il-Gvern ħabbar li l-ġnien ta' Ħal Qormi se jinfetaħ; iċ-ċentru ġdid.", "iso8859-3"),
        ("Ĉiuj ŝatas la ĝardenon; la ĥoro kantis ĵaŭde.", "iso8859-3"),
    ],
    ids=["maltese", "esperanto"],
)
def test_req_page_007_iso_8859_3_keeps_the_letters_only_it_reads(text: str, encoding: str) -> None:
    assert _latin_choice(text.encode(encoding), "iso8859-3") == "iso8859-3"
