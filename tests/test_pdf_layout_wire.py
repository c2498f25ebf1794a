"""The wire form of a read PDF: what the parent accepts from the worker (REQ-PDF-010)."""

from __future__ import annotations

import copy
import json

import pytest

from rypsok.core.fetch.pdf.model import (
    MAX_WIRE_BLOCKS,
    MAX_WIRE_LINK_CHARS,
    PdfBlock,
    PdfRun,
    PdfText,
    PdfWireError,
    from_wire,
    to_wire,
)
from rypsok.core.fetch.pdf.read import read_document
from testkit.pdf_writer import Link, Page, Text, pdf_bytes, text_lines

DOC = PdfText(
    title="A title",
    blocks=(
        PdfBlock(kind="heading", page=0, runs=(PdfRun("Intro"),), level=1),
        PdfBlock(kind="paragraph", page=0, runs=(PdfRun("See "), PdfRun("here", "https://x.org/"))),
        PdfBlock(kind="list_item", page=1, runs=(PdfRun("one"),), ordered=True, number=1),
        PdfBlock(kind="table", page=1, rows=(("a", "b"), ("1", "2"))),
        PdfBlock(kind="footnote", page=1, runs=(PdfRun("1 A note."),)),
    ),
    pages_read=2,
    pages_total=3,
    has_text_layer=True,
    text_cut=True,
)


def test_req_pdf_010_wire_round_trip_through_json() -> None:
    assert from_wire(json.loads(json.dumps(to_wire(DOC)))) == DOC
    data = pdf_bytes(
        [
            Page(
                texts=(
                    Text(72, 80, "Heading", size=20, font="Helvetica-Bold"),
                    *text_lines(["Body text with a link."], y=120),
                ),
                links=(Link(72, 110, 200, 125, "https://example.org/"),),
            )
        ],
        title="T",
    )
    read = read_document(data, max_pages=5, max_chars=10_000)
    assert from_wire(json.loads(json.dumps(to_wire(read)))) == read


def _broken(change: str) -> object:
    wire = copy.deepcopy(to_wire(DOC))
    blocks = wire["blocks"]
    assert isinstance(blocks, list)
    if change == "extra key":
        wire["pickle"] = "x"
    elif change == "missing key":
        del wire["title"]
    elif change == "bool as count":
        wire["pages_read"] = True
    elif change == "cut flag as a number":
        wire["text_cut"] = 1
    elif change == "more read than total":
        wire["pages_read"] = 4
    elif change == "unknown kind":
        blocks[0]["kind"] = "script"
    elif change == "heading level 7":
        blocks[0]["level"] = 7
    elif change == "level on a paragraph":
        blocks[1]["level"] = 2
    elif change == "page past the pages read":
        blocks[1]["page"] = 2
    elif change == "lone surrogate":
        blocks[1]["runs"][0][0] = "\ud800"
    elif change == "run not a pair":
        blocks[1]["runs"][0] = ["a", None, "c"]
    elif change == "number as text":
        blocks[2]["number"] = "1"
    elif change == "table with runs":
        blocks[3]["runs"] = [["x", None]]
    elif change == "cell not text":
        blocks[3]["rows"][0][0] = 5
    elif change == "long link":
        blocks[1]["runs"][1][1] = "https://x.org/" + "a" * MAX_WIRE_LINK_CHARS
    elif change == "not an object":
        return [wire]
    return wire


@pytest.mark.parametrize(
    "change",
    [
        "extra key",
        "missing key",
        "bool as count",
        "cut flag as a number",
        "more read than total",
        "unknown kind",
        "heading level 7",
        "level on a paragraph",
        "page past the pages read",
        "lone surrogate",
        "run not a pair",
        "number as text",
        "table with runs",
        "cell not text",
        "long link",
        "not an object",
    ],
)
def test_req_pdf_010_malformed_wire_rejected(change: str) -> None:
    with pytest.raises(PdfWireError):
        from_wire(_broken(change))


def test_req_pdf_010_oversized_wire_rejected() -> None:
    wire = to_wire(DOC)
    with pytest.raises(PdfWireError, match="longer than"):
        from_wire(wire, max_chars=20)
    assert from_wire(wire, max_chars=100) == DOC
    block = {
        "kind": "paragraph",
        "page": 0,
        "level": 0,
        "ordered": False,
        "number": 0,
        "runs": [],
        "rows": [],
    }
    many = dict(wire, blocks=[block] * (MAX_WIRE_BLOCKS + 1))
    with pytest.raises(PdfWireError, match="more than"):
        from_wire(many)
