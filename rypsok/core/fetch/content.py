"""What a fetched body is and how it reads: media type, charset, and the cut to max_chars.

REQ-PAGE-005: the media type is the response header's; sniffing only tells HTML from text
when the header names no type, and a PDF from the rest when the header names none or only
`application/octet-stream` (REQ-PDF-101: the MIME Sniffing standard's `%PDF-` signature).
REQ-PAGE-007: the declared charset (header, then a meta
declaration), else detection; undecodable bytes are replaced, never fatal.

Implements REQ-FETCH-005 (the cut and `next_start_char`).
"""

from __future__ import annotations

import codecs
import re
from enum import StrEnum
from typing import Final

import attrs
import charset_normalizer
import webencodings

from rypsok.core.untrusted_text import clean_decoded_text

__all__ = [
    "MEDIA_TYPE_MAX_CHARS",
    "PDF_SIGNATURE",
    "Cut",
    "Kind",
    "classify",
    "cut",
    "decode",
    "media_type_of",
]

MEDIA_TYPE_MAX_CHARS: Final = 2048  # LIM-F9: the media type is external text, bounded


class Kind(StrEnum):
    """The readings of REQ-FETCH-008; the values are the extractor's document kinds, and PDF,
    which a worker process reads instead (REQ-PDF-101)."""

    HTML = "html"
    XHTML = "xhtml"
    PLAIN = "plain"
    MARKDOWN = "markdown"
    PDF = "pdf"

    @property
    def is_html(self) -> bool:
        return self in (Kind.HTML, Kind.XHTML)


_READABLE: Final = {
    "text/html": Kind.HTML,
    "application/xhtml+xml": Kind.XHTML,
    "text/plain": Kind.PLAIN,
    "text/markdown": Kind.MARKDOWN,
    "text/x-markdown": Kind.MARKDOWN,
    "application/pdf": Kind.PDF,
    "application/x-pdf": Kind.PDF,
}
# The signature of a PDF (the MIME Sniffing standard's pattern for application/pdf), and the
# types a server gives a file it does not know the type of, which the signature overrides.
PDF_SIGNATURE: Final = b"%PDF-"
_UNTYPED: Final = frozenset({"application/octet-stream", "binary/octet-stream"})

# How far into a body the sniffer looks (the HTML standard's prescan reads 1024 bytes; a
# little more tolerates a long comment before the head).
_PRESCAN_BYTES: Final = 4096
# How far a meta charset is looked for. A browser's prescan reads 1024 bytes, but its parser
# still changes to the charset of a meta it meets later; pages of the 2000s put long inline
# scripts and styles first (a meta after 20 KB of script was detected as windows-1250: a
# Spanish ñ came back as ń). The head of such a page, not the whole body, is read.
_META_PRESCAN_BYTES: Final = 65536
_HTML_START = re.compile(
    rb"^(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]{0,200}>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|"
    rb"head|body|title|meta|p|div|h1|script|style|table|a|br|b|iframe|font)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)
# A document's own structure on a line of its own, after something that is not HTML (a
# wrapper an archive or a generator wrote first: `<text id="...">`, a banner line).
_HTML_LINE = re.compile(rb"^[ \t]*<(?:!doctype\s+html|html|head|body)[\s>]", re.I | re.M)
# Tags of HTML elements, start or end; a text holds a few at most.
_HTML_TAG = re.compile(
    rb"</?(?:html|head|body|title|meta|link|p|div|span|table|tr|td|th|a|br|hr|img|ul|ol|li|"
    rb"h[1-6]|script|style|form|input|b|i|em|strong|font|center|iframe|frameset|frame)[\s>/]",
    re.I,
)
_HTML_TAGS_MIN: Final = 8
# A meta's attributes are read for 512 bytes at most: over 64 KiB of `<meta` without a `>`,
# an unbounded look would read the rest of the window from each one (quadratic).
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:+-]{1,40})", re.I
)
_CHARSET_PARAM = re.compile(r";\s*charset\s*=\s*\"?([A-Za-z0-9_.:+-]{1,40})", re.I)


def media_type_of(content_type: str | None) -> str | None:
    """The lower-cased essence (type/subtype) of a Content-Type value, or None if absent."""
    if content_type is None:
        return None
    essence = content_type.split(";", 1)[0].strip().lower()
    return essence or None


def bounded_media_type(essence: str) -> str:
    """The media type as the caller is told it: external text, cleaned and bounded."""
    return clean_decoded_text(essence, MEDIA_TYPE_MAX_CHARS).text


def classify(essence: str | None, head: bytes | bytearray) -> Kind | None:
    """The reading of a body, or None for a type rypsok does not read."""
    if (essence is None or essence in _UNTYPED) and head.startswith(PDF_SIGNATURE):
        return Kind.PDF
    if essence is None:
        # No declared type: sniffing tells HTML from text, nothing else.
        return Kind.HTML if _sniffs_as_html(bytes(head[:_PRESCAN_BYTES])) else Kind.PLAIN
    return _READABLE.get(essence)


def _sniffs_as_html(head: bytes) -> bool:
    """HTML when the body starts as HTML does; or when, after something else, a line opens
    the document's own structure (a doctype, <html>, <head>, <body>); or when its first
    bytes hold more element tags than a text would. The MIME Sniffing standard looks at the
    first tag only, and a page behind a wrapper or a banner line was read as text, its
    markup and scripts as words (bench-extract --through-fetch: CleanEval's and
    CleanPortalEval's pages, F1 0.48 and 0.09 served without a type)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        # The text of a UTF-16 page is what is sniffed, not its bytes.
        head = head.decode("utf-16", errors="replace").encode("utf-8", errors="replace")
    if _HTML_START.match(head) or _HTML_LINE.search(head):
        return True
    return any(count >= _HTML_TAGS_MIN for count, _ in enumerate(_HTML_TAG.finditer(head), 1))


# The encodings of the WHATWG Encoding Standard, by the name Python's codecs give them (a
# browser reads no other: UTF-7, UTF-32, EBCDIC and Python's own codecs such as
# unicode_escape, idna or base64 are not charsets of the web). A label naming anything else
# counts as no declaration.
_WEB_ENCODINGS: Final = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-be",
        "utf-16-le",
        "cp866",
        # 9 and 11 are read as their Windows supersets (`_SUPERSETS`), never by these names.
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        *(f"cp{n}" for n in (1250, 1251, 1252, 1253, 1254, 1255, 1256, 1257, 1258)),
        # GB2312, GBK, Big5, Shift_JIS and EUC-KR likewise reach this set as their supersets.
        "gb18030",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "cp932",
        "cp949",
    }
)


# What the Encoding Standard decodes a label as, where that is a superset of the charset
# the label names (a browser reads a page declared gb2312 as GBK, the characters beyond
# GB2312 included: decoded as strict GB2312, "镕" of a Chinese page of the time became
# U+FFFD; shift_jis pages use Microsoft's extensions, "①"; and so on).
_SUPERSETS: Final = {
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
}


def _known(name: str) -> str | None:
    """The web's encoding a Python codec name names (the detector's answers), or None."""
    try:
        codec = codecs.lookup(name).name
    except LookupError:
        return None
    codec = _SUPERSETS.get(codec, codec)
    return codec if codec in _WEB_ENCODINGS else None


def _declared(label: str) -> str | None:
    """The web's encoding a declared label names, by its Python codec, or None: the label
    read as a browser reads it, through the Encoding Standard's table of labels
    (webencodings': `windows-874`, `x-cp1251`, `koi8`, `unicode-1-1-utf-8` and the other
    labels Python's codecs do not know), then the superset a browser decodes with."""
    encoding = webencodings.lookup(label)
    return _known(encoding.codec_info.name) if encoding is not None else None


def _header_charset(content_type: str | None) -> str | None:
    if content_type is None:
        return None
    match = _CHARSET_PARAM.search(content_type)
    return _declared(match.group(1)) if match is not None else None


def _meta_charset(body: bytes | bytearray, kind: Kind) -> str | None:
    if not kind.is_html:
        return None
    match = _META_CHARSET.search(body, 0, _META_PRESCAN_BYTES)
    if match is None:
        return None
    found = _declared(match.group(1).decode("ascii", "replace"))
    # A page that declares UTF-16 in a meta is ASCII-compatible by then.
    return "utf-8" if found is not None and found.startswith("utf-16") else found


# A declared legacy charset yields to UTF-8 only when the body's valid UTF-8 sequences
# outweigh its invalid bytes this many times over (text in a legacy charset forms a valid
# multi-byte sequence only by chance, and then rarely); a declared UTF-8 holds while they
# are at least as many.
_UTF8_PROOF: Final = 8


@attrs.frozen
class _Utf8Reading:
    """The body read as UTF-8 with errors replaced; `evidence`, the bytes its multi-byte
    sequences saved (about one per character beyond ASCII, more for CJK); `invalid`, the
    runs of bytes that did not read (the page's own U+FFFD, valid UTF-8, not counted)."""

    text: str
    evidence: int
    invalid: int

    @classmethod
    def of(cls, body: bytes | bytearray) -> _Utf8Reading:
        text = body.decode("utf-8", errors="replace")
        invalid = text.count("\ufffd") - body.count("\ufffd".encode()) if not text.isascii() else 0
        return cls(text, len(body) - len(text), invalid)

    def holds(self) -> bool:
        """A declared UTF-8 holds: no byte against it, or no more against it than for it."""
        return self.invalid <= self.evidence

    def proves(self) -> bool:
        """UTF-8 whatever a legacy charset declared: it reads, beyond ASCII, nearly whole."""
        return self.evidence > 0 and self.evidence >= _UTF8_PROOF * self.invalid


def decode(content_type: str | None, body: bytes | bytearray, kind: Kind) -> str:
    """The body as text (REQ-PAGE-007); errors are replaced, never fatal.

    A byte order mark decides, then the header's charset (the HTML standard's "certain"
    declaration; bytes that do not fit it are replaced). A meta element's charset is a
    tentative one, and it yields to bytes that disprove it, which only UTF-8's structure
    can: a legacy charset over a body that reads as UTF-8 beyond ASCII is UTF-8 (a page
    saved again as UTF-8 that kept its old meta), and UTF-8 over a body with more bytes that
    are not UTF-8 than that are is no declaration (a template changed before its texts
    were). With no declaration that holds: UTF-8 when the body is valid UTF-8, else the
    charset detected, else UTF-8 (decisions/fetch-charset-decoding)."""
    if body.startswith(codecs.BOM_UTF8):
        return body.decode("utf-8-sig", errors="replace")
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return body.decode("utf-16", errors="replace")
    reading = _Utf8Reading.of(body)
    charset = _charset_for(reading, content_type, body, kind)
    if charset is None:
        return reading.text
    # One text of the page at a time beside its bytes (REQ-PERF-003's estimate).
    del reading
    if charset is _DETECT:
        charset = _detected(body)
    return body.decode(charset, errors="replace")


def _detected(body: bytes | bytearray) -> str:
    """The charset detection ranks first among the web's, else UTF-8 (replacing). The
    detector also weighs DOS and Mac code pages no web page declares; the first of them
    used to end the look, and an English windows-1252 page of curly quotes and a euro sign,
    ranked cp852 first, was read as UTF-8 with every quote replaced. Between the Latin
    single-byte charsets the detector often cannot tell (it ranked windows-1250 first for
    Spanish and Portuguese pages, windows-1258 for Italian, windows-1257 for Polish), the
    one whose letters one language's alphabet explains best is taken (`_latin_choice`)."""
    for match in charset_normalizer.from_bytes(body):
        known = _known(match.encoding)
        if known is not None:
            return _latin_choice(body, known) if known in _LATIN_FAMILY else known
    return "utf-8"


# The single-byte charsets of Latin-script languages the detector confuses, in the order a
# tie is settled (the web's most used first).
_LATIN_SINGLE_BYTE: Final = ("cp1252", "cp1250", "iso8859-2", "cp1257", "cp1254", "cp1258")
# The charsets whose choice by the detector is weighed against those (the ISO-8859 Latin
# parts, which read the bytes 0x80-0x9F, windows' quotes and dashes, as control codes).
_LATIN_FAMILY: Final = frozenset(
    {*_LATIN_SINGLE_BYTE, "mac-roman", *(f"iso8859-{n}" for n in (3, 4, 10, 13, 14, 15, 16))}
)
# The letters beyond ASCII of the languages written in them (lower case; upper is added).
# Albanian's (ç, ë, â) is no entry: French's holds all three, so it never explains more.
_ALPHABETS: Final = tuple(
    frozenset(letters + letters.upper())
    for letters in (
        "áéíóúüñ",  # Spanish
        "áâãàçéêíóôõú",  # Portuguese
        "àâæçéèêëîïôœùûüÿ",  # French
        "äöüß",  # German
        "àèéìíîòóù",  # Italian
        "éëïóöü",  # Dutch
        "åäöé",  # Swedish, Finnish
        "æøåéóô",  # Danish, Norwegian
        "áéíóúýþðæö",  # Icelandic
        "àçèéíïòóúü",  # Catalan
        "ąćęłńóśźż",  # Polish
        "áčďéěíňóřšťúůýž",  # Czech
        "áäčďéíĺľňóôŕšťúýž",  # Slovak
        "áéíóöőúüű",  # Hungarian
        "ăâîşţșț",  # Romanian
        "čćđšž",  # Croatian, Serbian, Bosnian, Slovene
        "âçğıîöşüûİ",  # Turkish (İ, the capital of the ASCII i, is no upper case here)
        "ąčęėįšųūž",  # Lithuanian
        "āčēģīķļņšūž",  # Latvian
        "äõöüšž",  # Estonian
        "àèìòùċġħż",  # Maltese (ISO-8859-3)
        "ĉĝĥĵŝŭ",  # Esperanto (ISO-8859-3)
    )
)
_ASCII_BYTES: Final = bytes(range(128))
# A byte beyond ASCII beside an ASCII letter stands where a letter stands ("se?or",
# "W?adze"); one between spaces may be a sign ("? 2008" is a copyright sign in windows-1252
# and Š in ISO-8859-2) and tells nothing.
_LETTER_POSITION: Final = re.compile(rb"(?<=[A-Za-z])[\x80-\xff]|[\x80-\xff](?=[A-Za-z])")
# The part of a body whose bytes beyond ASCII are counted: enough to know its letters, and
# a bound on the work (a body of bytes beyond ASCII between letters finds 128 Ki of them).
_LATIN_SAMPLE_BYTES: Final = 256 * 1024


# Each charset's reading of the bytes 0x80-0xFF, and the bytes some of them read as a letter.
_LATIN_TABLES: Final = {
    charset: bytes(range(128, 256)).decode(charset, errors="replace") for charset in _LATIN_FAMILY
}
# Left out: the bytes windows-1252 reads as a sign that stands after a word ("Windows®",
# "Company©", "nº", "20°"), which ISO-8859-2 and windows-1250 read as letters (Ž, Š, ş):
# a Western page of trademarks was otherwise read as Central European.
_AFTER_WORD_SIGNS: Final = "©®™°ªº"
_LETTER_BYTES: Final = frozenset(
    byte
    for table in _LATIN_TABLES.values()
    for byte, char in enumerate(table, 128)
    if char.isalpha() and _LATIN_TABLES["cp1252"][byte - 128] not in _AFTER_WORD_SIGNS
)


def _latin_choice(body: bytes | bytearray, detected: str) -> str:
    """Among the Latin single-byte charsets, the one in which the body's bytes beyond ASCII
    that stand beside a letter read as the letters of one language, as far as one explains
    them; ties keep the detector's, then the order above. A charset that reads a byte of
    the body as a control code is out (the HTML standard reads ISO-8859-1 as windows-1252
    for the same reason: such bytes are windows' quotes and dashes)."""
    sample = bytes(body[:_LATIN_SAMPLE_BYTES])
    present = set(sample.translate(None, _ASCII_BYTES))
    counts: dict[int, int] = {}
    for found in _LETTER_POSITION.findall(sample):
        if found[0] in _LETTER_BYTES:
            counts[found[0]] = counts.get(found[0], 0) + 1
    best, best_fit = detected, -1.0
    for charset in (detected, *_LATIN_SINGLE_BYTE):
        table = _LATIN_TABLES[charset]
        if any("\x80" <= table[byte - 128] <= "\x9f" for byte in present):
            continue
        fit = _latin_fit(counts, table)
        if fit > best_fit:
            best, best_fit = charset, fit
    return best


def _latin_fit(counts: dict[int, int], table: str) -> float:
    """The share of the body's bytes that some of these charsets read as a letter which,
    read through `table`, are letters of one alphabet (a byte read as a symbol, a combining
    mark or nothing counts against it: windows-1257 reads Polish ł as ³, windows-1258
    Italian ì as a combining accent)."""
    total = sum(counts.values())
    if not total:
        return 0.0
    letters: dict[str, int] = {}
    for byte, count in counts.items():
        char = table[byte - 128]
        letters[char] = letters.get(char, 0) + count
    held = max(sum(n for c, n in letters.items() if c in alphabet) for alphabet in _ALPHABETS)
    return held / total


_DETECT: Final = "detect"


def _charset_for(
    reading: _Utf8Reading, content_type: str | None, body: bytes | bytearray, kind: Kind
) -> str | None:
    """The charset to decode with: None when the UTF-8 reading stands, _DETECT when none is
    declared that holds and the body is not valid UTF-8."""
    header = _header_charset(content_type)
    if header is not None:
        # Certain (the HTML standard; REQ-PAGE-007 decodes "according to the declared
        # charset"): bytes that do not fit it are replaced, never read as another charset.
        return None if header == "utf-8" else header
    meta = _meta_charset(body, kind)
    if meta == "utf-8":
        if reading.holds():
            return None
    elif meta is not None:
        return None if reading.proves() else meta
    return None if not reading.invalid else _DETECT


@attrs.frozen(kw_only=True)
class Cut:
    text: str
    truncated: bool
    next_start_char: int | None


def cut(content: str, start_char: int, max_chars: int) -> Cut | int:
    """`max_chars` scalar values from `start_char`, or the content length when `start_char`
    is at or past the end (the caller is told the length). A Python str indexes scalar
    values, so no cut can split one."""
    length = len(content)
    if start_char >= length:
        return length
    end = start_char + max_chars
    if end >= length:
        return Cut(text=content[start_char:], truncated=False, next_start_char=None)
    return Cut(text=content[start_char:end], truncated=True, next_start_char=end)
