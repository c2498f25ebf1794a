"""robots.txt as RFC 9309 reads it (REQ-CMP-005): Google's public test cases as data.

The cases restate those of google/robotstxt (robots_test.cc) in this project's own words:
a file, the crawler the file is read for, a URL and the verdict. rypsok reads a file for
its own token only, so the crawler a case asks about is renamed `rypsok` in the file's
user-agent lines, and the other crawlers keep their names.

Left out, each for its reason:
- the validity of a crawler's own token (IsValidUserAgentToObey), the empty token and the
  crawler token with a space: rypsok's token is fixed and valid;
- an empty URL and a URL that is not percent-encoded: rypsok checks the URL the egress
  policy wrote, always absolute and encoded;
- the rule `%62%61%7A` against the URL `/baz`: Google's matcher compares the escapes as
  written, RFC 9309 §2.2.2 decodes escaped unreserved characters first; rypsok (Protego)
  follows the RFC, so that rule matches `/baz` (a case below says so);
- a line longer than 16664 bytes cut short: Google's own bound; rypsok's is the 512 KiB of
  the whole file (LIM-F13), so a long rule is read whole (the verdicts that do not depend
  on the cut are kept below);
- the count of lines and directives a parser reports: restated as verdicts (each line
  ending, the byte order mark).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.fetch.robots import PRODUCT_TOKEN, Robots, canonical

_AGENT_LINE = re.compile(r"(?im)^([ \t]*user[- ]?agent[ \t]*:?[ \t]*)(.*)$")


def read_for(text: str | bytes, crawler: str | None) -> Robots:
    """The file as rypsok reads it, when the case asks about `crawler` (None: only `*`
    can apply, the crawler the case asks about is in no group)."""
    if isinstance(text, bytes):
        return Robots.parse(text)
    if crawler is not None:
        name = re.compile(rf"(?i)(?<![A-Za-z_-]){re.escape(crawler)}(?![A-Za-z_-])")

        def rename(line: re.Match[str]) -> str:
            return line.group(1) + name.sub(PRODUCT_TOKEN, line.group(2))

        text = _AGENT_LINE.sub(rename, text)
    return Robots.parse(text.encode("utf-8"))


GROUPS = (
    "allow: /foo/bar/\n"
    "\n"
    "user-agent: FooBot\n"
    "disallow: /\n"
    "allow: /x/\n"
    "user-agent: BarBot\n"
    "disallow: /\n"
    "allow: /y/\n"
    "\n"
    "\n"
    "allow: /w/\n"
    "user-agent: BazBot\n"
    "\n"
    "user-agent: FooBot\n"
    "allow: /z/\n"
    "disallow: /\n"
)
DOCUMENTED = "user-agent: FooBot\ndisallow: /\nallow: {}\n"
FISH_PATHS = (
    ("/bar", False),
    ("/fish", True),
    ("/fish.html", True),
    ("/fish/salmon.html", True),
    ("/fishheads", True),
    ("/fishheads/yummy.html", True),
    ("/fish.html?id=anything", True),
    ("/Fish.asp", False),
    ("/catfish", False),
    ("/?id=fish", False),
)
LINES = "User-Agent: foo{eol}Allow: /some/path{eol}User-Agent: bar{eol}{eol}{eol}Disallow: /"
LONG = "/x/" + "a" * 16650

Case = tuple[str, str | bytes, str | None, str, bool]


def paths(name: str, text: str, table: tuple[tuple[str, bool], ...]) -> list[Case]:
    """The cases of one file for FooBot, one a path of foo.bar."""
    return [(f"{name}-{path}", text, "FooBot", "http://foo.bar" + path, ok) for path, ok in table]


# (case id, file, crawler asked about, URL, allowed)
CASES: list[Case] = [
    # An empty file allows everything.
    ("empty-file", "", "FooBot", "http://foo.bar/", True),
    # Lines are name: value; unknown names are no rules; a missing colon is read when the
    # line is two words.
    ("line", "user-agent: FooBot\ndisallow: /\n", "FooBot", "http://foo.bar/x/y", False),
    ("unknown-names", "foo: FooBot\nbar: /\n", "FooBot", "http://foo.bar/x/y", True),
    ("no-colon", "user-agent FooBot\ndisallow /\n", "FooBot", "http://foo.bar/x/y", False),
    # Groups: user-agent lines then rules; a later group of the same crawler adds to it;
    # rules before any user-agent line belong to no group.
    ("groups-foo-x", GROUPS, "FooBot", "http://foo.bar/x/b", True),
    ("groups-foo-z", GROUPS, "FooBot", "http://foo.bar/z/d", True),
    ("groups-foo-y", GROUPS, "FooBot", "http://foo.bar/y/c", False),
    ("groups-bar-y", GROUPS, "BarBot", "http://foo.bar/y/c", True),
    ("groups-bar-w", GROUPS, "BarBot", "http://foo.bar/w/a", True),
    ("groups-bar-z", GROUPS, "BarBot", "http://foo.bar/z/d", False),
    ("groups-baz-z", GROUPS, "BazBot", "http://foo.bar/z/d", True),
    ("outside-foo", GROUPS, "FooBot", "http://foo.bar/foo/bar/", False),
    ("outside-bar", GROUPS, "BarBot", "http://foo.bar/foo/bar/", False),
    ("outside-baz", GROUPS, "BazBot", "http://foo.bar/foo/bar/", False),
    # A line of another kind does not close a group.
    *[
        (f"other-line-{i}-{crawler}", text, crawler, "http://foo.bar/", False)
        for i, text in enumerate(
            (
                "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\n"
                "User-agent: *\nDisallow: /\n",
                "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
                "User-agent: FooBot\nCrawl-delay: 10\nUser-agent: *\nDisallow: /\n",
            )
        )
        for crawler in ("FooBot", "BarBot")
    ],
    # Names of lines are read in any case.
    *[
        (f"name-case-{name}-{allowed}", text, "FooBot", url, allowed)
        for name, text in (
            ("upper", "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n"),
            ("lower", "user-agent: FooBot\nallow: /x/\ndisallow: /\n"),
            ("mixed", "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"),
        )
        for url, allowed in (("http://foo.bar/x/y", True), ("http://foo.bar/a/b", False))
    ],
    # The token of a user-agent line is matched in any case, and is its first word.
    *[
        (f"agent-case-{text[12:19]}-{allowed}", text, "Foo", url, allowed)
        for text in (
            "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
            "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
            "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
        )
        for url, allowed in (("http://foo.bar/x/y", True), ("http://foo.bar/a/b", False))
    ],
    (
        "agent-first-word",
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    # `*` applies when no group names the crawler; nothing applies when neither does.
    ("global-empty", "", "FooBot", "http://foo.bar/x/y", True),
    (
        "global-named",
        "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "global-other",
        "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        "BarBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "only-specific",
        "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n"
        "user-agent: BazBot\ndisallow: /\n",
        None,
        "http://foo.bar/x/y",
        True,
    ),
    # Paths are matched with their case.
    (
        "path-case-same",
        "user-agent: FooBot\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "path-case-other",
        "user-agent: FooBot\ndisallow: /X/\n",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    # The longest match wins; on a tie, allow.
    *[
        (f"longest-{i}", text, "FooBot", url, allowed)
        for i, (text, url, allowed) in enumerate(
            (
                ("disallow: /x/page.html\nallow: /x/\n", "http://foo.bar/x/page.html", False),
                ("allow: /x/page.html\ndisallow: /x/\n", "http://foo.bar/x/page.html", True),
                ("allow: /x/page.html\ndisallow: /x/\n", "http://foo.bar/x/", False),
                ("disallow: \nallow: \n", "http://foo.bar/x/page.html", True),
                ("disallow: /\nallow: /\n", "http://foo.bar/x/page.html", True),
                ("disallow: /x\nallow: /x/\n", "http://foo.bar/x", False),
                ("disallow: /x\nallow: /x/\n", "http://foo.bar/x/", True),
                (
                    "disallow: /x/page.html\nallow: /x/page.html\n",
                    "http://foo.bar/x/page.html",
                    True,
                ),
                ("allow: /page\ndisallow: /*.html\n", "http://foo.bar/page.html", False),
                ("allow: /page\ndisallow: /*.html\n", "http://foo.bar/page", True),
                ("allow: /x/page.\ndisallow: /*.html\n", "http://foo.bar/x/page.html", True),
                ("allow: /x/page.\ndisallow: /*.html\n", "http://foo.bar/x/y.html", False),
            )
        )
        for text in ["user-agent: FooBot\n" + text]
    ],
    (
        "group-over-global-x",
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        "http://foo.bar/x/page",
        True,
    ),
    (
        "group-over-global-y",
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        "http://foo.bar/y/page",
        False,
    ),
    # Encoding: a query with a URL in it; a non-ASCII rule against the encoded URL.
    (
        "query-with-url",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
        True,
    ),
    (
        "rule-unencoded",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "rule-encoded",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "rule-escaped-unreserved",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        "http://foo.bar/foo/bar/%62%61%7A",
        True,
    ),
    (
        "rule-escaped-unreserved-rfc",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        "http://foo.bar/foo/bar/baz",
        True,
    ),
    (
        "rule-escaped-lower",
        "User-agent: FooBot\nDisallow: /%aa\n",
        "FooBot",
        "http://a.b/%AA",
        False,
    ),
    ("rule-non-ascii", "User-agent: FooBot\nDisallow: /á\n", "FooBot", "http://a.b/%C3%A1", False),
    # `*` any characters, `$` the end, `#` a comment.
    *[
        (f"special-{i}", "User-agent: FooBot\n" + text, "FooBot", "http://foo.bar" + path, ok)
        for i, (text, path, ok) in enumerate(
            (
                ("Disallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "/foo/bar/quz", False),
                ("Disallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "/foo/quz", True),
                ("Disallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "/foo//quz", True),
                ("Disallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "/foo/bax/quz", True),
                ("Disallow: /foo/bar$\nAllow: /foo/bar/qux\n", "/foo/bar", False),
                ("Disallow: /foo/bar$\nAllow: /foo/bar/qux\n", "/foo/bar/qux", True),
                ("Disallow: /foo/bar$\nAllow: /foo/bar/qux\n", "/foo/bar/", True),
                ("Disallow: /foo/bar$\nAllow: /foo/bar/qux\n", "/foo/bar/baz", True),
                ("# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n", "/foo/bar", True),
                ("# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n", "/foo/quz", False),
            )
        )
    ],
    # An allowed index.html allows its directory.
    *[
        (
            f"index-html-{i}",
            "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
            None,
            u,
            ok,
        )
        for i, (u, ok) in enumerate(
            (
                ("http://foo.com/allowed-slash/", True),
                ("http://foo.com/allowed-slash/index.htm", False),
                ("http://foo.com/allowed-slash/index.html", True),
                ("http://foo.com/anyother-url", False),
            )
        )
    ],
    # Long lines: the verdicts that do not depend on Google's cut.
    (
        "long-rule-other",
        f"user-agent: FooBot\ndisallow: {LONG}/qux\n",
        "FooBot",
        "http://foo.bar/fux",
        True,
    ),
    (
        "long-rule-whole",
        f"user-agent: FooBot\ndisallow: {LONG}/qux\n",
        "FooBot",
        f"http://foo.bar{LONG}/qux",
        False,
    ),
    (
        "long-allow-root",
        f"user-agent: FooBot\ndisallow: /\nallow: {LONG}/qux\n",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "long-allow-whole",
        f"user-agent: FooBot\ndisallow: /\nallow: {LONG}/qux\n",
        "FooBot",
        f"http://foo.bar{LONG}/qux",
        True,
    ),
    # The documentation's examples: a path, `/fish*` as `/fish`, `/fish/`, `/*.php`,
    # `/*.php$`, `/fish*.php`.
    *paths("fish", DOCUMENTED.format("/fish"), FISH_PATHS),
    *paths("fish*", DOCUMENTED.format("/fish*"), FISH_PATHS),
    *paths(
        "fish-dir",
        DOCUMENTED.format("/fish/"),
        (
            ("/bar", False),
            ("/fish/", True),
            ("/fish/salmon", True),
            ("/fish/?salmon", True),
            ("/fish/salmon.html", True),
            ("/fish/?id=anything", True),
            ("/fish", False),
            ("/fish.html", False),
            ("/Fish/Salmon.html", False),
        ),
    ),
    *paths(
        "php",
        DOCUMENTED.format("/*.php"),
        (
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/folder/filename.php?parameters", True),
            ("//folder/any.php.file.html", True),
            ("/filename.php/", True),
            ("/index?f=filename.php/", True),
            ("/php/", False),
            ("/index?php", False),
            ("/windows.PHP", False),
        ),
    ),
    *paths(
        "php-end",
        DOCUMENTED.format("/*.php$"),
        (
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/filename.php?parameters", False),
            ("/filename.php/", False),
            ("/filename.php5", False),
            ("/php/", False),
            ("/filename?php", False),
            ("/aaaphpaaa", False),
            ("//windows.PHP", False),
        ),
    ),
    *paths(
        "fish-php",
        DOCUMENTED.format("/fish*.php"),
        (
            ("/bar", False),
            ("/fish.php", True),
            ("/fishheads/catfish.php?parameters", True),
            ("/Fish.PHP", False),
        ),
    ),
    # The documentation's order of precedence.
    (
        "order-p",
        "user-agent: FooBot\nallow: /p\ndisallow: /\n",
        "FooBot",
        "http://example.com/page",
        True,
    ),
    (
        "order-tie",
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        "FooBot",
        "http://example.com/folder/page",
        True,
    ),
    (
        "order-htm",
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        "FooBot",
        "http://example.com/page.htm",
        False,
    ),
    (
        "order-root",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/",
        True,
    ),
    (
        "order-root-page",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/page.html",
        False,
    ),
    # Every line ending (LF, CR LF, CR, mixed, none at the end) reads the same file.
    *[
        (f"eol-{name}-{crawler}-{path}", text, crawler, "http://foo.bar" + path, ok)
        for name, text in (
            ("lf", LINES.format(eol="\n")),
            ("crlf", LINES.format(eol="\r\n")),
            ("cr", LINES.format(eol="\r")),
            ("mixed", LINES.format(eol="\n").replace("path\n", "path\r\n", 1) + "\r\n"),
        )
        for crawler, path, ok in (("foo", "/some/path", True), ("bar", "/some/path", False))
    ],
    # A byte order mark (whole or its first bytes) is skipped; another sequence is not,
    # and one later in the file spoils its line.
    *[
        (
            f"bom-{i}",
            bom + b"User-Agent: rypsok\nDisallow: /AnyValue\n",
            None,
            "http://a.b/AnyValue",
            ok,
        )
        for i, (bom, ok) in enumerate(
            (
                (b"\xef\xbb\xbf", False),
                (b"\xef\xbb", False),
                (b"\xef", False),
                (b"\xef\x11\xbf", True),
            )
        )
    ],
    (
        "bom-inside",
        b"User-Agent: rypsok\n\xef\xbb\xbfDisallow: /AnyValue\n",
        None,
        "http://a.b/AnyValue",
        True,
    ),
    # A sitemap line anywhere changes nothing.
    (
        "sitemap-first",
        "Sitemap: http://foo.bar/s.xml\nUser-Agent: foo\nDisallow: /\n",
        "foo",
        "http://foo.bar/",
        False,
    ),
    (
        "sitemap-last",
        "User-Agent: foo\nDisallow: /\nSitemap: http://foo.bar/s.xml\n",
        "foo",
        "http://foo.bar/",
        False,
    ),
    # The path of a URL: no path is `/`, the fragment is no part of it.
    ("path-none", "User-agent: *\nDisallow: /$\n", None, "http://www.example.com", False),
    (
        "path-fragment",
        "User-agent: *\nDisallow: /a/b?c=d&e=f$\n",
        None,
        "http://www.example.com/a/b?c=d&e=f#fragment",
        False,
    ),
    ("path-params", "User-agent: *\nDisallow: /a;b$\n", None, "http://example.com/a;b#c", False),
]


@pytest.mark.parametrize(
    ("text", "crawler", "url", "allowed"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_req_cmp_005_google_robots_txt_cases(
    text: str | bytes, crawler: str | None, url: str, allowed: bool
) -> None:
    assert read_for(text, crawler).allows(url) is allowed


def test_req_cmp_005_case_ids_are_distinct() -> None:
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))


# --- the tables, entry by entry and at the ends of each range -------------------------------


@pytest.mark.parametrize("name", ["User-agent", "user-agent", "USERAGENT", "User agent"])
def test_req_cmp_005_every_spelling_of_user_agent_starts_a_group(name: str) -> None:
    assert not Robots.parse(f"{name}: rypsok\nDisallow: /\n".encode()).allows("http://a.b/p")


@pytest.mark.parametrize(
    "name", ["Disallow", "DISALLOW", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"]
)
def test_req_cmp_005_every_spelling_of_disallow_is_a_rule(name: str) -> None:
    assert not Robots.parse(f"User-agent: rypsok\n{name}: /\n".encode()).allows("http://a.b/p")


@pytest.mark.parametrize("name", ["Allow", "ALLOW", "allow"])
def test_req_cmp_005_every_spelling_of_allow_is_a_rule(name: str) -> None:
    text = f"User-agent: rypsok\nDisallow: /\n{name}: /p\n"
    assert Robots.parse(text.encode()).allows("http://a.b/p")


@pytest.mark.parametrize(
    "line",
    [
        "Dissallowed: /",
        "Disallows: /",
        "Allowed: /",
        "User-agents: /",
        "Agent: /",
        "XDisallow: /",
        "Disallow X: /",
        # Without a colon a line is read only when it is two words.
        "Disallow / x",
        "Disallow\t/\tx",
        "Disallow",
    ],
)
def test_req_cmp_005_a_near_spelling_is_no_record(line: str) -> None:
    # Neither a rule nor a user-agent line: the group of rypsok disallows /p alone.
    text = f"User-agent: rypsok\nDisallow: /p\n{line}\n"
    robots = Robots.parse(text.encode())
    assert not robots.allows("http://a.b/p")
    assert robots.allows("http://a.b/q")


def test_req_cmp_005_a_rule_is_read_to_its_last_character() -> None:
    robots = Robots.parse(b"User-agent: rypsok\nDisallow: /aX \t\nDisallow: X/b\n")
    assert not robots.allows("http://a.b/aX")
    assert robots.allows("http://a.b/ab")
    assert robots.allows("http://a.b/b")


def test_req_cmp_005_what_protego_is_given() -> None:
    text = (
        "\ufeffSitemap: /s.xml\n"
        "User-agent: other # a comment\r\n"
        "Crawl-delay: 1\r"
        "USER-AGENT: Rypsok/2\n"
        "\n"
        "disallow /a # no colon\n"
        "Allow: /a/b\u2028c\n"
        "User-agent: * 1.0\n"
        "Disallow:\n"
    )
    assert canonical(text) == (
        "user-agent: \n"
        "user-agent: rypsok\n"
        "disallow: /a\n"
        "allow: /a/b%E2%80%A8c\n"
        "user-agent: *\n"
        "disallow: "
    )


@pytest.mark.parametrize("separator", [" ", "\t", "  \t "])
def test_req_cmp_005_two_words_without_a_colon_are_a_record(separator: str) -> None:
    # A comment is no part of the line: these are still two words.
    text = f"user-agent{separator}rypsok # us\ndisallow{separator}/p# the page\n"
    robots = Robots.parse(text.encode())
    assert not robots.allows("http://a.b/p")
    assert robots.allows("http://a.b/q")


# The ends of the ranges of a product token: A-Z, a-z, `-`, `_` go on; the characters just
# outside them, a digit, `/`, a space and a tab end it.
@pytest.mark.parametrize("after", ["A", "Z", "a", "z", "-", "_"])
def test_req_cmp_005_a_letter_hyphen_or_underscore_makes_another_token(after: str) -> None:
    text = f"User-agent: rypsok{after}\nDisallow: /\n"
    assert Robots.parse(text.encode()).allows("http://a.b/p")


@pytest.mark.parametrize("after", ["@", "[", "`", "{", ",", ".", "/", "0", "9", " x", "\tx", "*"])
def test_req_cmp_005_any_other_character_ends_the_token(after: str) -> None:
    text = f"User-agent: rypsok{after}\nDisallow: /\n"
    assert not Robots.parse(text.encode()).allows("http://a.b/p")


@pytest.mark.parametrize("value", ["*", "* ", "*\tcomment", "* 1.0"])
def test_req_cmp_005_a_star_alone_or_before_a_space_is_every_crawler(value: str) -> None:
    assert not Robots.parse(f"User-agent: {value}\nDisallow: /\n".encode()).allows("http://a.b/")


@pytest.mark.parametrize("value", ["*rypsok", "*bot", "**", "/rypsok", "ツ", ""])
def test_req_cmp_005_a_user_agent_line_that_names_no_token_names_nobody(value: str) -> None:
    # It still ends the group before it: /q is not added to rypsok's rules.
    text = f"User-agent: rypsok\nDisallow: /p\nUser-agent: {value}\nDisallow: /q\n"
    robots = Robots.parse(text.encode())
    assert not robots.allows("http://a.b/p")
    assert robots.allows("http://a.b/q")


@pytest.mark.parametrize(
    "char", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
)
def test_req_cmp_005_a_character_that_is_no_line_end_stays_inside_its_rule(char: str) -> None:
    text = f"User-agent: rypsok\nDisallow: /a{char}b\n"
    robots = Robots.parse(text.encode())
    assert robots.allows("http://a.b/a")
    escaped = "".join(f"%{byte:02X}" for byte in char.encode())
    assert not robots.allows(f"http://a.b/a{escaped}b")


@pytest.mark.parametrize("eol", ["\r", "\n", "\r\n"])
def test_req_cmp_005_cr_and_lf_end_a_line(eol: str) -> None:
    robots = Robots.parse(f"User-agent: rypsok{eol}Disallow: /a{eol}b\n".encode())
    assert not robots.allows("http://a.b/a")


# --- properties ------------------------------------------------------------------------------

_PATHS = ("/", "/a", "/a/b", "/b", "/b.html", "/c?x=1")
_RECORD = st.sampled_from(
    [
        "User-agent: rypsok",
        "User-agent: *",
        "User-agent: other",
        "Disallow: /a",
        "Disallow: /",
        "Allow: /a/b",
        "Allow: /b",
        "Disallow: /*.html$",
        "",
    ]
)
_OTHER = st.sampled_from(["Crawl-delay", "Sitemap", "Host", "Request-rate", "X-Note", "Noindex"])


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(_RECORD, max_size=12),
    where=st.integers(min_value=0, max_value=12),
    name=_OTHER,
    value=st.text(alphabet="abc/:.0123 ", max_size=12),
)
def test_req_cmp_005_a_line_of_another_kind_never_changes_a_verdict(
    records: list[str], where: int, name: str, value: str
) -> None:
    plain = "\n".join(records)
    mixed = "\n".join([*records[:where], f"{name}: {value}", *records[where:]])
    before = Robots.parse(plain.encode())
    after = Robots.parse(mixed.encode())
    for path in _PATHS:
        assert after.allows("http://a.b" + path) is before.allows("http://a.b" + path)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_req_cmp_005_any_bytes_are_read_without_error(body: bytes) -> None:
    robots = Robots.parse(body)
    for path in _PATHS:
        assert isinstance(robots.allows("http://a.b" + path), bool)
    # What Protego is given is only records, one a line.
    for line in canonical(body.decode("utf-8", errors="replace")).split("\n"):
        assert line == "" or line.split(":", 1)[0] in {"user-agent", "allow", "disallow"}
