"""What web_fetch's extraction keeps of a page: the classes of fault of issue 17, and a
fidelity set of constructs an agent needs intact.

REQ-PAGE-002 (main-content preference), REQ-PAGE-006 (malformed content), REQ-FETCH-002
(main content extraction), REQ-FETCH-004 (rendering), LIM-F10. Every page here is written
for its test; each runs through `extract_document`, the function web_fetch's worker thread
runs.
"""

from __future__ import annotations

import pytest

from rypsok.core.fetch.extract import DocumentKind, ExtractionOutcome, extract_document

MAX_NODES = 100_000  # LIM-F10
MAX_DEPTH = 256  # LIM-F11
BASE = "https://example.org/docs/page"

# Sentences long enough to score as paragraphs, each with words found nowhere else.
STORY = [
    "The harbour authority opened the northern quay on Monday, after three years of work, "
    "and the first ferry docked there before noon with two hundred passengers aboard.",
    "Engineers had rebuilt the sea wall with basalt blocks, which weigh more than granite, "
    "so that winter storms no longer throw shingle across the coastal road.",
    "Fishermen, who had moored at the southern jetty during the works, said the new berths "
    "were deeper, wider, and far easier to reach at low tide than the old ones.",
    "The council expects the quay to pay for itself within a decade, through mooring fees, "
    "a small levy on cruise visitors, and the rent of the restored warehouses.",
]


def extract(html: str) -> str:
    result = extract_document(
        html, DocumentKind.HTML, BASE, max_nodes=MAX_NODES, max_depth=MAX_DEPTH
    )
    assert result.outcome is ExtractionOutcome.OK
    return result.content


def paragraphs(texts: list[str]) -> str:
    return "".join(f"<p>{text}</p>" for text in texts)


CHROME = (
    '<header><a href="/">Harbour News</a></header>'
    '<nav><a href="/a">Home</a> <a href="/b">Ports</a> <a href="/c">Ferries</a></nav>'
)
FOOTER = "<footer><p>Copyright Harbour News, all rights reserved, since 1999.</p></footer>"


# --- 1. Markup after </html> ------------------------------------------------------------------


@pytest.mark.parametrize(
    "trailer",
    [
        "<script>window.tracker = 1;</script>",
        '<div id="overlay"><p>Trailing element text.</p></div>',
        "<!-- served by cache 7 --><script>x()</script><img src=/pixel.gif>",
    ],
)
def test_req_page_006_markup_after_html_end_keeps_the_article(trailer: str) -> None:
    html = (
        "<!DOCTYPE html><html><head><title>Quay</title></head><body>"
        f"{CHROME}<article><h1>The northern quay opens</h1>{paragraphs(STORY)}</article>"
        f"{FOOTER}</body></html>{trailer}"
    )
    content = extract(html)
    for text in STORY:
        assert text in content
    assert "window.tracker" not in content
