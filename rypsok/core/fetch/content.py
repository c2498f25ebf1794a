"""What a fetched body is and how it reads: media type, charset, and the cut to max_chars.

REQ-PAGE-005: the media type is the response header's; sniffing only tells HTML from text
when the header names no type. REQ-PAGE-007: the declared charset (header, then a meta
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

from rypsok.core.boundary import clean_decoded_text

__all__ = [
    "MEDIA_TYPE_MAX_CHARS",
    "Cut",
    "Kind",
    "classify",
    "cut",
    "decode",
    "media_type_of",
]

MEDIA_TYPE_MAX_CHARS: Final = 2048  # LIM-F9: the media type is external text, bounded


class Kind(StrEnum):
    """The readings of REQ-FETCH-008; the values are the extractor's document kinds."""

    HTML = "html"
    XHTML = "xhtml"
    PLAIN = "plain"
    MARKDOWN = "markdown"

    @property
    def is_html(self) -> bool:
        return self in (Kind.HTML, Kind.XHTML)


_READABLE: Final = {
    "text/html": Kind.HTML,
    "application/xhtml+xml": Kind.XHTML,
    "text/plain": Kind.PLAIN,
    "text/markdown": Kind.MARKDOWN,
    "text/x-markdown": Kind.MARKDOWN,
}

# How far into a body the sniffer and the meta charset look (the HTML standard's prescan
# reads 1024 bytes; a little more tolerates a long comment before the head).
_PRESCAN_BYTES: Final = 4096
_HTML_START = re.compile(
    rb"^(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title|meta|"
    rb"p|div|h1|script|style|table|a|br|b|iframe|font)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:+-]{1,40})", re.I)
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
    if essence is None:
        # No declared type: sniffing tells HTML from text, nothing else.
        return Kind.HTML if _HTML_START.match(head[:_PRESCAN_BYTES]) else Kind.PLAIN
    return _READABLE.get(essence)


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
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        *(f"cp{n}" for n in range(1250, 1259)),
        "gbk",
        "gb2312",
        "gb18030",
        "big5",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "shift_jis",
        "cp932",
        "euc_kr",
        "cp949",
    }
)


def _known(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    # The HTML standard reads a declared Latin-1 as windows-1252, its superset.
    if name in ("latin-1", "iso8859-1", "ascii"):
        return "cp1252"
    return name if name in _WEB_ENCODINGS else None


def declared_charset(content_type: str | None, body: bytes | bytearray, kind: Kind) -> str | None:
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if content_type is not None:
        match = _CHARSET_PARAM.search(content_type)
        found = _known(match.group(1)) if match is not None else None
        if found is not None:
            return found
    if kind.is_html:
        match_b = _META_CHARSET.search(body[:_PRESCAN_BYTES])
        if match_b is not None:
            found = _known(match_b.group(1).decode("ascii", "replace"))
            if found is not None:
                # A page that declares UTF-16 in a meta is ASCII-compatible by then.
                return "utf-8" if found.startswith("utf-16") else found
    return None


def decode(content_type: str | None, body: bytes | bytearray, kind: Kind) -> str:
    """The body as text: its declared charset, else a detected one, else UTF-8; errors
    are replaced (REQ-PAGE-007)."""
    charset = declared_charset(content_type, body, kind)
    if charset is None:
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        best = charset_normalizer.from_bytes(body).best()
        charset = (_known(best.encoding) if best is not None else None) or "utf-8"
    if charset == "utf-8" and body.startswith(codecs.BOM_UTF8):
        charset = "utf-8-sig"
    return body.decode(charset, errors="replace")


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
