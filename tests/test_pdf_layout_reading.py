"""The layout analysis of a PDF, on documents composed in each test (REQ-PDF-001..012).

Each document is written by testkit.pdf_writer, read by read_document (PDFium and the
layout analysis) and written as Markdown by render_markdown, the path web_fetch's worker
runs; the links are judged by web_fetch's own rule for a page's links.
"""

from __future__ import annotations

import functools
import io

import pytest

from rypsok.core.fetch.markdown.links import link_target
from rypsok.core.fetch.pdf.model import PdfEncrypted, PdfUnreadable
from rypsok.core.fetch.pdf.read import read_document
from rypsok.core.fetch.pdf.render import render_markdown
from testkit.pdf_writer import Link, Page, Text, pdf_bytes, text_lines

JUDGE = functools.partial(link_target, "https://example.org/paper.pdf")


def markdown_of(data: bytes, *, max_pages: int = 100, max_chars: int = 1_000_000) -> str:
    doc = read_document(data, max_pages=max_pages, max_chars=max_chars)
    return render_markdown(doc, judge_link=JUDGE).markdown


def column(word: str, count: int, *, x: float, y: float = 100.0) -> tuple[Text, ...]:
    """`count` lines of prose about 200 points wide, each naming `word` and its number."""
    lines = [f"{word}{n} reads on along this column of text" for n in range(count)]
    return text_lines(lines, x=x, y=y, size=10)


def test_req_pdf_002_two_columns_read_column_by_column() -> None:
    left = column("leftword", 12, x=60)
    right = column("rightword", 12, x=320)
    # The content stream interleaves the columns line by line, as some producers write them.
    interleaved = tuple(t for pair in zip(left, right, strict=True) for t in pair)
    md = markdown_of(pdf_bytes([Page(texts=interleaved)]))
    positions = [md.index(f"leftword{n} ") for n in range(12)]
    positions += [md.index(f"rightword{n} ") for n in range(12)]
    assert positions == sorted(positions)


def test_req_pdf_002_full_width_title_before_the_columns() -> None:
    title = (
        Text(x=60, y=60, text="A title that runs right across both of the columns here", size=14),
    )
    page = Page(
        texts=title + column("rightword", 10, x=320, y=100) + column("leftword", 10, x=60, y=100)
    )
    md = markdown_of(pdf_bytes([page]))
    assert md.index("A title") < md.index("leftword0 ") < md.index("leftword9 ")
    assert md.index("leftword9 ") < md.index("rightword0 ")


def test_req_pdf_003_heading_levels_from_size_and_weight() -> None:
    texts = (
        Text(72, 80, "Annual Findings", size=24, font="Helvetica-Bold"),
        *text_lines(["The body text of the report says what was found this year."], y=120),
        Text(72, 160, "Methods Used", size=16, font="Helvetica-Bold"),
        *text_lines(["Samples were taken every week from the three sites."], y=190),
        Text(72, 230, "Field Sites", size=12, font="Helvetica-Bold"),
        *text_lines(["The sites lie along the river, a day apart on foot."], y=255),
    )
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    lines = md.splitlines()
    assert "# Annual Findings" in lines
    assert "## Methods Used" in lines
    assert "### Field Sites" in lines
    assert "The body text of the report says what was found this year." in lines


def test_req_pdf_004_hyphenated_word_rejoined_compound_kept_ligature_expanded() -> None:
    texts = text_lines(
        [
            "The automatic extrac-",
            "tion of text is a well-",
            "known problem; we \ufb01nd a well-known answer in the",
            "\ufb02ow of the page.",
        ]
    )
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert "The automatic extraction of text is a well-known problem;" in md
    assert "we find a well-known answer in the flow of the page." in md
    assert "extrac-" not in md
    assert "\ufb01" not in md


def test_req_pdf_005_running_header_footer_and_page_numbers_removed() -> None:
    pages = []
    bodies = [
        "First page speaks of rivers.",
        "Second page speaks of hills.",
        "Third page speaks of roads.",
    ]
    for number, body in enumerate(bodies, start=1):
        texts = (
            Text(72, 40, "ACME Quarterly Report", size=9),
            *text_lines([body, "It goes on for a second line of ordinary text."], y=100),
            Text(280, 760, f"Page {number} of 3", size=9),
        )
        pages.append(Page(texts=texts))
    md = markdown_of(pdf_bytes(pages))
    assert "ACME" not in md
    assert "Page" not in md
    for body in bodies:
        assert body in md


def test_req_pdf_005_lone_page_numbers_removed() -> None:
    pages = [
        Page(
            texts=(
                *text_lines([f"Text of page {n} in one line."], y=100),
                Text(300, 760, str(n), size=10),
            )
        )
        for n in (7, 8)
    ]
    md = markdown_of(pdf_bytes(pages))
    expected = "Text of page 7 in one line. Text of page 8 in one line."
    assert md.split() == expected.split()


def test_req_pdf_006_bulleted_and_numbered_lists() -> None:
    texts = (
        *text_lines(["Bring these things along:"], y=100),
        *text_lines(["\u2022 apples from the orchard", "\u2022 pears"], x=90, y=125),
        *text_lines(["Then follow the steps:"], y=175),
        *text_lines(["1. wash the fruit", "2. cut it up"], x=90, y=200),
    )
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert "- apples from the orchard\n- pears" in md
    assert "1. wash the fruit\n2. cut it up" in md


def test_req_pdf_007_table_as_markdown_table() -> None:
    rows = [
        ("Name", "Count", "Share"),
        ("Oak", "120", "41.5"),
        ("Birch", "88", "30.2"),
        ("Alder", "84", "28.3"),
    ]
    texts = text_lines(["The trees counted in the survey were these."], y=90)
    for col, x in enumerate((72, 200, 330)):
        texts += text_lines([row[col] for row in rows], x=x, y=120, leading=1.6)
    texts += text_lines(["The oak leads by a wide margin in every plot."], y=200)
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert (
        "| Name | Count | Share |\n| --- | --- | --- |\n| Oak | 120 | 41.5 |\n"
        "| Birch | 88 | 30.2 |\n| Alder | 84 | 28.3 |"
    ) in md
    assert md.index("survey") < md.index("| Name") < md.index("wide margin")


def test_req_pdf_008_footnote_after_its_page_text() -> None:
    first = (
        *column("leftword", 10, x=60),
        *column("rightword", 10, x=320),
        Text(60, 700, "1 A note at the foot of the left column.", size=7),
    )
    second = text_lines(["The second page begins with this sentence."], y=100)
    md = markdown_of(pdf_bytes([Page(texts=first), Page(texts=second)]))
    note = md.index("A note at the foot")
    assert md.index("rightword9 ") < note < md.index("The second page")


def test_req_pdf_009_links_through_the_page_link_rule() -> None:
    texts = text_lines(["Read the project site for more.", "Or do not click here at all."])
    links = (
        Link(x0=118, y0=90, x1=174, y1=103, uri="https://example.org/project"),
        Link(x0=120, y0=104, x1=185, y1=117, uri="javascript:alert(1)"),
    )
    md = markdown_of(pdf_bytes([Page(texts=texts, links=links)]))
    assert "[project site](https://example.org/project)" in md
    assert "javascript" not in md
    assert "click here" in md


def test_req_pdf_011_title_from_metadata_else_first_heading() -> None:
    texts = (
        Text(72, 80, "Heading Of The Page", size=20, font="Helvetica-Bold"),
        *text_lines(["Some text under the heading of the page."], y=120),
    )
    with_title = read_document(
        pdf_bytes([Page(texts=texts)], title="Meta Title"), max_pages=10, max_chars=10_000
    )
    without = read_document(pdf_bytes([Page(texts=texts)]), max_pages=10, max_chars=10_000)
    assert with_title.title == "Meta Title"
    assert without.title == "Heading Of The Page"


def test_req_pdf_012_pages_and_characters_bounded() -> None:
    pages = [Page(texts=text_lines([f"Page number{n} text goes here."])) for n in range(5)]
    doc = read_document(pdf_bytes(pages), max_pages=2, max_chars=100_000)
    assert (doc.pages_read, doc.pages_total) == (2, 5)
    md = render_markdown(doc, judge_link=JUDGE).markdown
    assert "number1 " in md
    assert "number2 " not in md
    long = text_lines(["Many words go on and on in this line of text."] * 30)
    cut = read_document(pdf_bytes([Page(texts=long)]), max_pages=5, max_chars=120)
    assert 100 <= sum(len(b.text) for b in cut.blocks) <= 120
    assert cut.text_cut is True
    assert doc.text_cut is False  # pages left out are the page bound's, not the characters'


def test_req_pdf_012_text_as_long_as_the_bound_is_whole() -> None:
    data = pdf_bytes(
        [Page(texts=text_lines(["Many words go on and on in this line of text."] * 8))]
    )
    size = sum(len(b.text) for b in read_document(data, max_pages=5, max_chars=10_000).blocks)
    for bound, cut in ((size + 1, False), (size, False), (size - 1, True)):
        doc = read_document(data, max_pages=5, max_chars=bound)
        assert doc.text_cut is cut, bound
        assert sum(len(b.text) for b in doc.blocks) == min(size, bound)


def test_req_pdf_001_no_text_layer_and_not_a_pdf() -> None:
    doc = read_document(pdf_bytes([Page()]), max_pages=5, max_chars=1000)
    assert doc.has_text_layer is False
    assert doc.blocks == ()
    with pytest.raises(PdfUnreadable):
        read_document(b"<html>not a pdf</html>", max_pages=5, max_chars=1000)


def test_req_pdf_004_word_with_own_hyphens_keeps_the_line_end_one() -> None:
    texts = text_lines(["We report the state-of-", "the-art results of the survey."])
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert "We report the state-of-the-art results of the survey." in md


def test_req_pdf_007_wrapped_cell_joins_its_row() -> None:
    texts = text_lines(["The notes of the survey wrap inside their cells."], y=90)
    # Rows 36 points apart. Birch's note goes on a line under its row (TeX's way); Alder's
    # is centred on its row, a line above it and a line below (a browser's way).
    rows = [
        ("Name", "Count", "Note", 120),
        ("Oak", "120", "old wood", 156),
        ("Birch", "88", "pale bark", 192),
        ("Alder", "84", "on", 240),
    ]
    for name, count, note, y in rows:
        texts += (Text(72, y, name), Text(200, y, count), Text(330, y, note))
    texts += (Text(330, 204, "on hills"), Text(330, 228, "wet"), Text(330, 252, "ground"))
    texts += text_lines(["The oak leads by a wide margin in every plot."], y=300)
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert (
        "| Name | Count | Note |\n| --- | --- | --- |\n| Oak | 120 | old wood |\n"
        "| Birch | 88 | pale bark on hills |\n| Alder | 84 | wet on ground |"
    ) in md


def test_req_pdf_007_justified_prose_stretched_word_by_word_is_no_table() -> None:
    words = [
        ["Narrow", "columns", "stretch", "their"],
        ["words", "apart", "when", "text"],
        ["is", "justified", "like", "this"],
    ]
    texts: tuple[Text, ...] = ()
    for row, line in enumerate(words):
        # Each word placed alone with the same wide gap between each two, as justification
        # spreads a line.
        x = 72.0
        for word in line:
            texts += (Text(x, 100 + row * 14, word, font="Courier"),)
            x += 0.6 * 11 * len(word) + 30.0
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert "|" not in md
    assert " ".join(w for line in words for w in line) in md


def test_req_pdf_001_encrypted_document_named_so() -> None:
    pypdf = pytest.importorskip("pypdf")  # a development dependency: the test's encryptor
    plain = pdf_bytes([Page(texts=text_lines(["A secret line of text."]))])
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(plain)))
    writer.encrypt(user_password="a password", owner_password="owner", algorithm="AES-128")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(PdfEncrypted):
        read_document(locked.getvalue(), max_pages=5, max_chars=1000)
    # A document encrypted with an empty user password opens as a viewer opens it.
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(plain)))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    open_one = io.BytesIO()
    writer.write(open_one)
    doc = read_document(open_one.getvalue(), max_pages=5, max_chars=1000)
    assert doc.blocks[0].text == "A secret line of text."


def test_req_pdf_006_nested_list_items() -> None:
    texts = (
        *text_lines(["The plan has parts:"], y=100),
        *text_lines(["1. gather the wood"], x=90, y=125),
        *text_lines(["\u2022 oak from the hill", "\u2022 birch"], x=110, y=140),
        *text_lines(["2. build the shed"], x=90, y=170),
    )
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert "1. gather the wood\n   - oak from the hill\n   - birch\n2. build the shed" in md


def test_req_pdf_004_first_line_indent_and_hanging_indent() -> None:
    mono = functools.partial(Text, font="Courier", size=10)
    first = "[1] A. Author and B. Writer. A long title of a paper that"
    second = "[2] C. Scholar. Another paper with a long title set full."
    assert len(first) == len(second)  # in Courier both fill the same width
    texts = (
        # Two paragraphs set as TeX sets them: no space between, the first line indented.
        mono(90, 100, "The first paragraph starts here and runs"),
        mono(72, 112.5, "on to a short end."),
        mono(90, 125, "The second paragraph begins indented too and"),
        mono(72, 137.5, "ends on its own line."),
        # A reference list: each entry's first line fills the column, the rest hang under it.
        mono(72, 200, first),
        mono(90, 212.5, "fills the line. In Proceedings, 2020."),
        mono(72, 225, second),
        mono(90, 237.5, "and ends here. Journal, 2021."),
    )
    md = markdown_of(pdf_bytes([Page(texts=texts)]))
    assert md.strip().split("\n\n") == [
        "The first paragraph starts here and runs on to a short end.",
        "The second paragraph begins indented too and ends on its own line.",
        "\\[1\\] " + first[4:] + " fills the line. In Proceedings, 2020.",
        "\\[2\\] " + second[4:] + " and ends here. Journal, 2021.",
    ]
