"""REQ-PAGE-007 at each of its rules' ends, read through web_fetch itself: the byte order
mark before the header, a meta read only in HTML, a meta naming UTF-16, and the measure by
which UTF-8's structure holds or disproves a meta (decisions/fetch-charset-decoding)."""

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


# A text each encoding of the web can write, with letters beyond what its nearest neighbours
# share; where a browser decodes a label with a superset, a letter only the superset has.
_SAMPLES = {
    "utf-8": "Grüße, 世界 𠀀",
    "ibm866": "Привет",
    "iso-8859-2": "Żółć",
    "iso-8859-3": "Ħġż",
    "iso-8859-4": "ĀĒĪ",
    "iso-8859-5": "Привет",
    "iso-8859-6": "مرحبا",
    "iso-8859-7": "Γειά",
    "iso-8859-8": "שלום",
    "iso-8859-8-i": "שלום",
    "iso-8859-10": "ĀĒĢ",
    "iso-8859-13": "Ąčė",
    "iso-8859-14": "Ŵŷ",
    "iso-8859-15": "€œ",
    "iso-8859-16": "Șț",
    "koi8-r": "Привет",
    "koi8-u": "Привіт",
    "macintosh": "Grüße",
    "windows-874": "สวัสดี €",
    "windows-1250": "Żółć €",
    "windows-1251": "Привет €",
    "windows-1252": "Grüße €",
    "windows-1253": "Γειά €",
    "windows-1254": "Ğüş €",
    "windows-1255": "שלום €",
    "windows-1256": "مرحبا €",
    "windows-1257": "Ąčė €",
    "windows-1258": "Đông €",
    "x-mac-cyrillic": "Привет",
    "gbk": "世界 𠀀",
    "gb18030": "世界 𠀀",
    "big5": "世界",
    "euc-jp": "日本",
    "iso-2022-jp": "日本",
    "shift_jis": "日本 ①",
    "euc-kr": "한국 똠",
    "utf-16be": "Grüße, 世界",
    "utf-16le": "Grüße, 世界",
}
# What a browser decodes each with, where Python's codec of the same name is narrower.
_CODECS = {"gbk": "gb18030", "shift_jis": "cp932", "euc-kr": "cp949"}


def _labels() -> list[tuple[str, str]]:
    """Every label of the Encoding Standard's table, with the encoding it names."""
    import webencodings.labels

    return sorted(
        (label, name)
        for label, name in webencodings.labels.LABELS.items()
        if name not in ("replacement", "x-user-defined")
    )


@pytest.mark.parametrize(("label", "name"), _labels(), ids=lambda value: value)
def test_req_page_007_every_label_of_the_encoding_standard_is_read_as_a_browser_reads_it(
    label: str, name: str
) -> None:
    """A header naming any label of the web's encodings decodes the page with that encoding:
    the labels Python's codecs do not know (windows-874, x-cp1251, koi8, unicode-1-1-utf-8,
    …) included, and with the superset a browser uses."""
    import webencodings

    from rypsok.core.fetch.content import Kind, decode

    sample = _SAMPLES[name]
    codec = _CODECS.get(name) or webencodings.lookup(name).codec_info.name
    page = f"<html><body><p>{sample}</p></body></html>"
    text = decode(f"text/html; charset={label}", page.encode(codec), Kind.HTML)
    assert sample in text


@pytest.mark.parametrize("label", ["iso-2022-kr", "hz-gb-2312", "x-user-defined", "utf-7"])
def test_req_page_007_a_label_of_no_web_encoding_is_no_declaration(label: str) -> None:
    # The Encoding Standard's "replacement" labels, x-user-defined and UTF-7 are read as if
    # the page declared nothing: a UTF-8 body reads as UTF-8.
    from rypsok.core.fetch.content import Kind, decode

    page = "<html><body><p>Grüße, 世界</p></body></html>"
    assert "Grüße, 世界" in decode(f"text/html; charset={label}", page.encode(), Kind.HTML)


# The detector (charset_normalizer) answers with Python's codec names. What a browser would
# decode a page of each with: the web's encoding of that name, its superset where the
# Encoding Standard decodes with one, and nothing for a codec no web page declares.
_DETECTED = [
    ("utf_8", "utf-8"),
    ("utf_16", "utf-16"),
    ("utf_16_be", "utf-16-be"),
    ("utf_16_le", "utf-16-le"),
    ("ascii", "cp1252"),
    ("latin_1", "cp1252"),
    ("iso8859_1", "cp1252"),
    ("iso8859_9", "cp1254"),
    ("iso8859_11", "cp874"),
    ("tis_620", "cp874"),
    ("gb2312", "gb18030"),
    ("gbk", "gb18030"),
    ("gb18030", "gb18030"),
    ("big5", "big5hkscs"),
    ("big5hkscs", "big5hkscs"),
    ("shift_jis", "cp932"),
    ("cp932", "cp932"),
    ("euc_kr", "cp949"),
    ("cp949", "cp949"),
    ("euc_jp", "euc_jp"),
    ("iso2022_jp", "iso2022_jp"),
    ("cp866", "cp866"),
    ("koi8_r", "koi8-r"),
    ("koi8_u", "koi8-u"),
    ("mac_roman", "mac-roman"),
    ("mac_cyrillic", "mac-cyrillic"),
    ("cp874", "cp874"),
    *((f"iso8859_{n}", f"iso8859-{n}") for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
    *((f"cp{n}", f"cp{n}") for n in range(1250, 1259)),
    # Codecs of no web encoding: DOS and Mac pages no site declares, UTF-32, EBCDIC.
    ("cp437", None),
    ("cp850", None),
    ("cp852", None),
    ("mac_greek", None),
    ("utf_32", None),
    ("cp500", None),
    ("iso2022_kr", None),
    ("hz", None),
]


@pytest.mark.parametrize(("codec", "expected"), _DETECTED, ids=lambda value: str(value))
def test_req_page_007_a_detected_charset_is_read_as_a_browser_would(
    codec: str, expected: str | None
) -> None:
    from rypsok.core.fetch.content import _known

    assert _known(codec) == expected
