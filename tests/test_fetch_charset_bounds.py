"""REQ-PAGE-007 at each of its rules' ends, read through web_fetch itself: the byte order
mark before the header, a meta read only in HTML, a meta naming UTF-16, and the measure by
which UTF-8's structure holds or disproves a meta (decisions.md, fetchpath and its merge)."""

from __future__ import annotations

import codecs

import pytest
from fetch_sites import Page
from test_fetch_realpath_pages import FRENCH, HTML, article, content, read

CP1252_HEADER = (("Content-Type", "text/html; charset=windows-1252"),)
RUSSIAN = "Портовое управление открыло северный причал в понедельник после трёх лет работ."


@pytest.mark.parametrize(
    ("mark", "encoding"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ],
    ids=["utf-8", "utf-16-le", "utf-16-be"],
)
async def test_req_page_007_a_byte_order_mark_decides_before_the_header(
    mark: bytes, encoding: str
) -> None:
    # Russian too: UTF-16 units of Latin-1 letters read as windows-1252 would still come out
    # right once the NULs are dropped; Cyrillic ones would not.
    body = mark + article(FRENCH + " " + RUSSIAN).encode(encoding)
    # A byte the mark's encoding cannot read, in the head: replaced, never fatal.
    broken = mark + "<html><head>".encode(encoding) + b"\xff\xdf\xff\xdf" + body[len(mark) :]
    answers = await read(
        {
            "/bom": Page(headers=CP1252_HEADER, body=body),
            "/broken": Page(headers=CP1252_HEADER, body=broken),
        }
    )
    for path, answer in answers.items():
        text = content(answer)
        assert FRENCH + " " + RUSSIAN in text, path
        assert "\ufeff" not in text, path


async def test_req_page_007_a_meta_in_a_text_is_no_declaration() -> None:
    # A plain text that quotes a meta element is not declared by it: detection reads it.
    body = ('Copy this: <meta charset="iso-8859-1">\n\n' + (RUSSIAN + "\n") * 6).encode("cp1251")
    answers = await read({"/notes": Page(headers=(("Content-Type", "text/plain"),), body=body)})
    assert RUSSIAN in content(answers["/notes"])


@pytest.mark.parametrize("text", [FRENCH, "The quay opened on Monday."], ids=["latin", "ascii"])
async def test_req_page_007_a_meta_naming_utf16_in_an_ascii_compatible_page_is_utf8(
    text: str,
) -> None:
    page = article(text, '<meta charset="utf-16"><title>Quay</title>').encode("utf-8")
    answers = await read({"/p": Page(headers=HTML, body=page)})
    assert text in content(answers["/p"])


async def test_req_page_007_a_utf8_meta_holds_while_its_bytes_against_it_are_no_more() -> None:
    # One character beyond ASCII read well, one byte that is not UTF-8: the meta holds, the
    # byte is replaced (one more byte against it and detection would decide).
    page = article("Le café du port. \xff", '<meta charset="utf-8"><title>Quay</title>')
    body = page.encode("utf-8").replace("\xff".encode(), b"\xff")
    answers = await read({"/p": Page(headers=HTML, body=body)})
    text = content(answers["/p"])
    assert "Le café du port. \ufffd" in text


@pytest.mark.parametrize(
    ("words", "stray", "as_utf8"),
    [
        # One character beyond ASCII and nothing against: UTF-8 whatever the meta says.
        ("café", b"", True),
        # Eight bytes saved by UTF-8's sequences against one that is not: still UTF-8.
        ("é" * 8, b"\xff", True),
        # Seven against one: the meta's windows-1252 stands.
        ("é" * 7, b"\xff", False),
    ],
    ids=["one", "eight-to-one", "seven-to-one"],
)
async def test_req_page_007_a_legacy_meta_yields_to_utf8_only_past_the_proof(
    words: str, stray: bytes, as_utf8: bool
) -> None:
    # One paragraph: every byte beyond ASCII in the body is counted here.
    page = (
        '<html><head><meta charset="windows-1252"><title>Quay</title></head><body>'
        f"<h1>The quay</h1><p>Le {words} du port, rebuilt after three years of work.</p>"
        "</body></html>"
    )
    body = page.encode("utf-8").replace(b" du port", stray + b" du port", 1)
    answers = await read({"/p": Page(headers=HTML, body=body)})
    text = content(answers["/p"])
    if as_utf8:
        assert f"Le {words}" in text
    else:
        assert f"Le {words}" not in text
        assert "Le " + words.encode("utf-8").decode("cp1252") in text


async def test_req_page_007_a_pages_own_replacement_characters_are_no_bytes_against_utf8() -> None:
    # U+FFFD written by the page is valid UTF-8 (three bytes): with one accented letter it is
    # evidence for UTF-8, never against it, so the legacy meta yields.
    page = article("Le café \ufffd du port", '<meta charset="windows-1252"><title>Quay</title>')
    answers = await read({"/p": Page(headers=HTML, body=page.encode("utf-8"))})
    assert "Le café \ufffd du port" in content(answers["/p"])


async def test_req_page_007_a_meta_at_the_first_byte_declares_the_page() -> None:
    # ISO-8859-15's euro sign is 0xA4, which windows-1252 (what detection takes for such a
    # page) reads as a currency sign: only the meta, at the body's very start, says which.
    page = (
        '<meta charset="iso-8859-15"><title>Quay</title><h1>The quay</h1>'
        "<p>Le ticket du port coûte 3 € depuis lundi, après trois années de travaux.</p>"
    )
    answers = await read({"/p": Page(headers=HTML, body=page.encode("iso-8859-15"))})
    assert "coûte 3 € depuis" in content(answers["/p"])
