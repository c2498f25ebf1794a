"""Fuzz targets for every parser REQ-SEC-023 lists, and a runner with a time budget.

A target is one parser fed arbitrary bytes or text. It passes when the parser returns, or
raises the one refusal its contract names (a configuration error, a rule error, an engine
failure); anything else -- another exception, a hang past Hypothesis's health checks -- is a
crash, which is a No-Go for a release and becomes a test (book/maintainers/releasing.md).

    tools/fuzz                      every target, 300 s each (the release checks' budget)
    tools/fuzz --seconds 5 robots   one target, five seconds

Hypothesis generates the inputs (its structure-aware strategies reach deeper into a parser
than random bytes alone); each round runs a fresh seed, rounds repeat until the budget ends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rypsok.config.load import load_config_bytes
from rypsok.config.messages import ConfigError
from rypsok.config.rules import RuleError, parse_egress_rule
from rypsok.core.egress.policy import EgressPolicy
from rypsok.core.engines.answers import json_object, object_items
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import parse_retry_after
from rypsok.core.engines.duckduckgo import parse_results_page
from rypsok.core.fetch.content import Kind, decode
from rypsok.core.fetch.extract import DocumentKind, extract_document
from rypsok.core.fetch.markdown.links import link_target
from rypsok.core.fetch.pdf.isolation import Failure, WorkerFailed
from rypsok.core.fetch.pdf.isolation import _document as read_worker_answer
from rypsok.core.fetch.pdf.render import render_markdown
from rypsok.core.fetch.pdf.worker import answer as worker_answer
from rypsok.core.fetch.pdf.worker import answer_limit
from rypsok.core.fetch.robots import Robots
from rypsok.core.secret_scan import find_secrets, mask_secrets
from rypsok.core.untrusted_text import clean_decoded_text, clean_markup_text
from rypsok.core.urls import normalize_url
from testkit import pdf_hostile
from testkit.pdf_writer import Link, Page, Text, pdf_bytes, text_lines

if TYPE_CHECKING:
    from collections.abc import Callable

# Every code point, unpaired surrogates included: what a JSON string on the wire can carry.
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=2000)
ANY_BYTES = st.binary(max_size=20000)
HTML_PIECES = st.lists(
    st.sampled_from(
        [
            "<html>",
            "</html>",
            "<body>",
            "<p>",
            "</p>",
            "<div class=post>",
            "</div>",
            "<table>",
            "<td colspan=9999>",
            "<pre><code class=language-py>",
            "<!--",
            "-->",
            "<script>",
            "</script>",
            "<a href='javascript:x'>",
            "</a>",
            "<h1>",
            "</h1>",
            "<li>",
            "&#0;",
            "&amp;",
            "<meta charset=utf-7>",
            "<![CDATA[",
            "]]>",
            "<!DOCTYPE html>",
            "text ",
            "\x00",
        ]
    ),
    max_size=200,
).map("".join)


def _never_raises(call: Callable[[Any], object]) -> Callable[[Any], None]:
    def target(value: Any) -> None:
        call(value)

    return target


def _refuses_with(
    call: Callable[[Any], object], *refusals: type[BaseException]
) -> Callable[[Any], None]:
    def target(value: Any) -> None:
        with contextlib.suppress(*refusals):
            call(value)

    return target


def _html_pipeline(data: bytes) -> None:
    for kind in DocumentKind:
        extract_document(
            data, kind, "https://example.org/a/", max_nodes=5000, max_depth=64, encoding="utf-8"
        )


def _html_text(text: str) -> None:
    extract_document(text, DocumentKind.HTML, "https://example.org/", max_nodes=5000, max_depth=64)


def _charset(pair: tuple[str, bytes]) -> None:
    content_type, body = pair
    # decode reads every declaration itself (the mark, the header, a meta) before detection.
    for kind in Kind:
        decode(content_type, body, kind)


def _robots(pair: tuple[bytes, str]) -> None:
    body, path = pair
    Robots.parse(body).allows("https://example.org/" + path)


def _provider_json(body: bytes) -> None:
    object_items(json_object(body).get("results"))


def _retry_after(value: str) -> None:
    try:
        headers = httpx.Headers({"retry-after": value, "date": value})
    except (UnicodeEncodeError, ValueError):
        return  # not a header value httpx would ever hand the driver
    parse_retry_after(headers, now_unix=0.0)


def _pdf_seeds() -> list[bytes]:
    """Documents the PDF mutations start from: a paper with a heading, a list, a link and
    compressed pages, and the small hostile shapes of the web_fetch tests."""
    paper = Page(
        texts=(
            Text(72, 90, "A Heading", size=20, font="Helvetica-Bold"),
            *text_lines(["Body text of the paper, long enough to reflow.", "- an item"], y=130),
            Text(72, 200, "ﬁnal link", size=11),
        ),
        links=(Link(72, 190, 300, 205, "https://example.org/x"),),
    )
    return [
        pdf_bytes([paper, paper], title="Seed", compress=True),
        pdf_bytes([paper]),
        pdf_hostile.encrypted(),
        pdf_hostile.scan(),
        pdf_hostile.deep_nesting(2000),
        pdf_hostile.with_actions("/nonexistent/marker"),
    ]


_PDF_SEEDS = _pdf_seeds()
# A document mutated: a seed, bytes spliced in at offsets (a hostile fragment or arbitrary
# bytes), and a cut.
_PDF_FRAGMENTS = st.sampled_from(
    [
        b"[[[[[[[[[[",
        b"<< /Length 999999999 >>",
        b"/FlateDecode",
        b"endstream",
        b"0 0 obj",
        b"xref\n0 1\n",
        b"/Count 5000",
        b"/Kids [1 0 R]",
        b"%%EOF",
        b"trailer << /Root 3 0 R >>",
    ]
)
PDF_MUTATIONS = st.tuples(
    st.sampled_from(range(len(_PDF_SEEDS))),
    st.lists(
        st.tuples(st.integers(0, 4000), st.one_of(_PDF_FRAGMENTS, st.binary(max_size=24))),
        max_size=6,
    ),
    st.one_of(st.none(), st.integers(0, 4000)),
)


def _pdf_document(mutation: tuple[int, list[tuple[int, bytes]], int | None]) -> None:
    """The PDF path in one process: the worker's answer to the document, read back as the
    serving process reads it (as hostile data), and the Markdown. A crash of the reading
    (PDFium's) ends the fuzzer, a hang trips Hypothesis's health checks."""
    seed, splices, cut = mutation
    data = bytearray(_PDF_SEEDS[seed])
    for offset, fragment in splices:
        at = offset % (len(data) + 1)
        data[at : at + len(fragment)] = fragment
    if cut is not None:
        del data[cut:]
    reply = worker_answer(bytes(data), max_pages=20, max_chars=20000)
    try:
        doc = read_worker_answer(reply, 0, answer_limit(20000), 20000)
    except WorkerFailed as failed:
        if failed.failure is Failure.MEMORY:
            raise AssertionError("a small document ran out of memory") from None
        return
    render_markdown(doc, judge_link=lambda href: link_target("https://example.org/", href))


def _pdf_answer(pair: tuple[bytes, int]) -> None:
    """A worker's answer and exit status as the serving process reads them: a document, or
    WorkerFailed, nothing else."""
    answer, code = pair
    with contextlib.suppress(WorkerFailed):
        read_worker_answer(answer, code, 1 << 20, 10000)


# Answers shaped like a worker's, each field open to any JSON value.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ANY_TEXT, inner, max_size=5),
    max_leaves=30,
)
_BLOCK = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["heading", "paragraph", "list_item", "table", "footnote", "x"]),
        "page": st.integers(-1, 3),
        "level": st.integers(-1, 7),
        "ordered": st.booleans() | _JSON,
        "number": st.integers(-1, 10),
        "runs": st.lists(st.tuples(ANY_TEXT, st.none() | ANY_TEXT).map(list), max_size=3) | _JSON,
        "rows": st.lists(st.lists(ANY_TEXT, max_size=3), max_size=3) | _JSON,
    }
)
_ANSWER = st.fixed_dictionaries(
    {
        "v": st.just(1) | _JSON,
        "title": st.none() | ANY_TEXT | _JSON,
        "pages_read": st.integers(0, 3),
        "pages_total": st.integers(0, 3),
        "has_text_layer": st.booleans(),
        "blocks": st.lists(_BLOCK, max_size=4),
    }
)
PDF_ANSWERS = st.tuples(
    st.one_of(
        ANY_BYTES,
        _ANSWER.map(lambda a: json.dumps({"ok": a}).encode()),
        _JSON.map(lambda a: json.dumps({"ok": a}).encode()),
    ),
    st.sampled_from([0, 1, -6, -9, -11, -24]),
)

_POLICY = EgressPolicy()

TARGETS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], None]]] = {
    "text-cleaner": (ANY_TEXT, _never_raises(lambda t: clean_markup_text(t, 300))),
    "content-cleaner": (ANY_TEXT, _never_raises(lambda t: clean_decoded_text(t, 300))),
    "charset-decoding": (st.tuples(ANY_TEXT, ANY_BYTES), _charset),
    "html-pipeline": (ANY_BYTES, _html_pipeline),
    "html-structure": (HTML_PIECES, _html_text),
    "scraping-reader": (
        st.one_of(ANY_BYTES, HTML_PIECES.map(str.encode)),
        _refuses_with(parse_results_page, EngineFailure),
    ),
    "url-normalization": (ANY_TEXT, _never_raises(normalize_url)),
    "secret-check": (ANY_TEXT, _never_raises(lambda t: (find_secrets(t), mask_secrets(t)))),
    "configuration": (
        st.one_of(ANY_BYTES, ANY_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))),
        _refuses_with(lambda b: load_config_bytes(b, {}, "fuzz"), ConfigError),
    ),
    "egress-url": (ANY_TEXT, _never_raises(_POLICY.judge_url)),
    "egress-rule": (ANY_TEXT, _refuses_with(parse_egress_rule, RuleError)),
    "robots-txt": (st.tuples(ANY_BYTES, ANY_TEXT), _robots),
    "provider-json": (ANY_BYTES, _refuses_with(_provider_json, EngineFailure)),
    "retry-after": (ANY_TEXT, _retry_after),
    "pdf-document": (PDF_MUTATIONS, _pdf_document),
    "pdf-answer": (PDF_ANSWERS, _pdf_answer),
}


def run(name: str, seconds: float, *, examples_per_round: int = 200) -> int:
    """Rounds of `name` until `seconds` pass; returns the number of inputs tried."""
    strategy, target = TARGETS[name]
    tried = 0

    @settings(
        max_examples=examples_per_round,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one_round(value: Any) -> None:
        nonlocal tried
        tried += 1
        target(value)

    end = time.monotonic() + seconds
    while True:
        one_round()
        if time.monotonic() >= end:
            return tried


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/fuzz", description=__doc__.splitlines()[0])
    parser.add_argument(
        "targets", nargs="*", choices=[[], *TARGETS], metavar="TARGET", help=", ".join(TARGETS)
    )
    parser.add_argument("--seconds", type=float, default=300.0, help="budget per target")
    parser.add_argument("--list", action="store_true", help="list the targets, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        sys.stdout.write("".join(f"{name}\n" for name in TARGETS))
        return 0
    for name in args.targets or TARGETS:
        started = time.monotonic()
        tried = run(name, args.seconds)
        sys.stdout.write(
            f"{name}: {tried} inputs in {time.monotonic() - started:.0f} s, no crash\n"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
