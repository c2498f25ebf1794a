"""Link targets as the Markdown writer writes them (REQ-FETCH-004, REQ-RANK-003).

A link's URL is resolved against the page's, written in ASCII as web_search writes URLs
(`returned_url`), or dropped (the link keeps its text) when it is not an http(s) URL or is
one web_search would not return.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urljoin, urlsplit

from rypsok.core.fetch.markdown.escape import nfc
from rypsok.core.model import Reason
from rypsok.core.urls import MAX_URL_CHARS, returned_url

__all__ = ["LinkTargets", "absolute_http_url", "link_target"]


def absolute_http_url(base_url: str, href: str) -> str | None:
    """`href` resolved against `base_url` when the result is an http(s) URL, else None."""
    href = href.strip()
    if not href:
        return None
    try:
        url = urljoin(base_url, href)
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    # Characters that would end the Markdown link early are percent-encoded.
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


# In a link's target: what is not printable ASCII, and what could end the target or change
# how it is read (a space or a parenthesis ends it, `<` and a backslash change its form).
_LINK_UNSAFE: Final = re.compile(r'[^\x21-\x7e]|[()<>\\`"]')


_REFERENCE_IN_URL: Final = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _percent_encoded(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "replace"))


def link_target(base_url: str, href: str) -> str | None:
    """The target of a link as rypsok writes it, or None when the link keeps only its text.

    The URL is resolved as `absolute_http_url` does, then written in ASCII: everything after
    the host that is not printable ASCII, and every character that would end or change the
    Markdown target, percent-encoded as UTF-8 (as a browser sends it), and the rest as
    web_search writes its URLs (`returned_url`, REQ-RANK-003: the host in its IDNA form,
    THR-24, tracking parameters removed). A target web_search would not return (a host
    web_fetch refuses, credentials, longer than LIM-F9) keeps only the link's text.
    """
    target = _target(base_url, href)
    return None if target is None else target[0]


def _target(base_url: str, href: str) -> tuple[str, int] | None:
    """`link_target`'s answer, and the length of the URL it was checked against LIM-F9 at."""
    url = absolute_http_url(base_url, href)
    if url is None:
        return None
    parts = urlsplit(url)
    head = f"{parts.scheme}://{parts.netloc}"
    if not url.startswith(head):
        return None
    url = head + _LINK_UNSAFE.sub(_percent_encoded, nfc(url[len(head) :]))
    shown = returned_url(url)
    if isinstance(shown, Reason):
        return None
    # A reader decodes character references in a target too: "&lt;" would become "<".
    return _REFERENCE_IN_URL.sub("\\\\&", shown), len(shown)


# A link written as a plain path from the root of its site, or as an http(s) origin and such
# a path: none of what resolving, encoding or returning changes in a path (no dot segment,
# no empty segment, no parameters, query or fragment, nothing to percent-encode or to
# escape). Its target is the target of its site's root ("/") with the path in place of the
# "/", so the work of resolving is done once per site, not once per link (resolving each of
# a page's 100,000 links costs about two seconds).
# (No "//" and no "/." in the path: every "/" of it is followed by neither. Matched as
# segments, each a run of one character class without going back, not character by
# character: a page of 100,000 links asks it 100,000 times.)
_PLAIN_LINK: Final = re.compile(
    r"((?:https?://[A-Za-z0-9.:-]++)?+)"
    r"(/(?![/.])[A-Za-z0-9_~!$'*+,=:@%&.-]*+(?:/(?![/.])[A-Za-z0-9_~!$'*+,=:@%&.-]*+)*+)",
    re.ASCII,
)
# Distinct sites remembered for one page; links to others are resolved one by one.
_SITES_REMEMBERED: Final = 256


class LinkTargets:
    """`link_target` for the links of one page, the common plain ones at the cost of a
    match (the shared work cached per site)."""

    __slots__ = ("base_url", "sites")

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        # origin as written ("" for a path from the base's root) -> the root's target with
        # its final "/" off and LIM-F9's room left for the path, or None (no target).
        self.sites: dict[str, tuple[str, int] | None] = {}

    def target(self, href: str) -> str | None:
        match = _PLAIN_LINK.fullmatch(href)
        if match is None:
            return link_target(self.base_url, href)
        origin, path = match.groups()
        if origin in self.sites:
            site = self.sites[origin]
        elif len(self.sites) >= _SITES_REMEMBERED:
            return link_target(self.base_url, href)
        else:
            root = _target(self.base_url, origin + "/")
            site = self.sites[origin] = (
                None
                if root is None or not root[0].endswith("/")
                else (root[0][:-1], MAX_URL_CHARS - (root[1] - 1))
            )
        if site is None or len(path) > site[1]:
            return None
        return site[0] + path
