"""REQ-PAGE-005's sniff of an untyped body, each of its three signs alone and its range
ends, read through web_fetch itself (`Rypsok.fetch` from a loopback site)."""

from __future__ import annotations

import codecs

from fetch_sites import Page
from test_fetch_realpath_pages import ENGLISH, NO_TYPE, article, content, read


async def test_req_page_005_an_untyped_body_that_starts_as_html_is_html_with_few_tags() -> None:
    # Three tags: only the start of the body says HTML.
    page = f"<!DOCTYPE html>\n<title>Quay</title>\n<p>{ENGLISH}"
    answers = await read({"/short": Page(headers=NO_TYPE, body=page.encode())})
    text = content(answers["/short"])
    assert ENGLISH in text
    assert "<p>" not in text
    assert "DOCTYPE" not in text


async def test_req_page_005_a_document_line_after_a_wrapper_is_html_with_few_tags() -> None:
    # Four tags, after a line that is not HTML: only the <html> line of its own says HTML.
    page = f"Archived copy of http://example.org/quay\n<html>\n<p>{ENGLISH}</p>\n</html>\n"
    answers = await read({"/wrapped": Page(headers=NO_TYPE, body=page.encode())})
    text = content(answers["/wrapped"])
    assert ENGLISH in text
    assert "<p>" not in text
    assert "<html>" not in text


async def test_req_page_005_eight_element_tags_are_html_seven_are_text() -> None:
    # After a line that is not HTML and with no document line, the count of element tags
    # decides: eight make HTML, seven leave the body a text that quotes them.
    eight = "Notes on markup\n" + "<b>bold</b> " * 4 + ENGLISH
    seven = "Notes on markup\n" + "<b>bold</b> " * 3 + "<b>bold " + ENGLISH
    answers = await read(
        {
            "/eight": Page(headers=NO_TYPE, body=eight.encode()),
            "/seven": Page(headers=NO_TYPE, body=seven.encode()),
        }
    )
    as_html = content(answers["/eight"])
    assert "<b>" not in as_html
    assert ENGLISH in as_html
    as_text = content(answers["/seven"])
    assert "<b>bold</b>" in as_text
    assert ENGLISH in as_text


async def test_req_page_005_an_untyped_utf16_body_with_a_broken_pair_is_sniffed() -> None:
    # A lone surrogate among the first bytes of a UTF-16 body: the sniff reads the text with
    # the bad unit replaced, never fails the call.
    body = (
        codecs.BOM_UTF16_LE
        + "<html><head><title>Quay</title></head>".encode("utf-16-le")
        + b"\x00\xd8"
        + article(ENGLISH).encode("utf-16-le")
    )
    answers = await read({"/broken": Page(headers=NO_TYPE, body=body)})
    text = content(answers["/broken"])
    assert ENGLISH in text
    assert "<p>" not in text
