"""Shared pieces of the keyless drivers' tests: the recorded answers and a query."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from rypsok.core.engines.base import EngineQuery
from rypsok.core.model import Category, SafeSearch, TimeRange
from testkit.servers import Reply

RECORDED = Path(__file__).parent / "data" / "engines"


def recorded(name: str) -> bytes:
    """A recorded answer under tests/data/engines (see its README)."""
    return (RECORDED / name).read_bytes()


def recorded_json(name: str) -> Any:
    return json.loads(recorded(name))


def json_reply(payload: Any, *, gzipped: bool = False) -> Reply:
    body = json.dumps(payload).encode()
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    if gzipped:
        body = gzip.compress(body)
        headers = (*headers, ("Content-Encoding", "gzip"))
    return Reply(headers=headers, body=body)


def query(
    text: str = "rust",
    *,
    category: Category = Category.GENERAL,
    count: int = 10,
    time_range: TimeRange | None = None,
    language: str = "en",
) -> EngineQuery:
    return EngineQuery(
        query=text,
        category=category,
        language=language,
        region="US",
        safe_search=SafeSearch.MODERATE,
        time_range=time_range,
        count=count,
    )


# The statuses every keyless driver classifies the same way (the records' error rows).
COMMON_STATUSES = (
    (Reply(status=429, headers=(("Retry-After", "7"),)), "rate_limited", 7.0),
    (Reply(status=500), "request_failure", None),
    (
        Reply(status=302, headers=(("Location", "https://elsewhere.example/"),)),
        "request_failure",
        None,
    ),
    (Reply(body=b"<html>not the answer</html>"), "parse_failure", None),
)


async def ask(
    routes: dict[str, Any], build: Any, engine_query: EngineQuery
) -> tuple[Any, list[Any]]:
    """Serve `routes` on loopback, build the engine with `build(http, server_url)`, ask it
    once; returns the answer, or raises its EngineFailure outside the server's nursery, and
    the requests the server saw."""
    from rypsok.core.engines.base import EngineFailure
    from rypsok.core.engines.client import EngineClient
    from testkit.servers import serve_http

    failure: EngineFailure | None = None
    answer: Any = None
    async with serve_http(routes) as server, EngineClient() as http:
        engine = build(http, server.url)
        try:
            answer = await engine.search(engine_query)
        except EngineFailure as exc:
            failure = exc
        requests = list(server.requests)
    if failure is not None:
        raise failure
    return answer, requests


async def outcome_of(search: Any, reply: Reply) -> tuple[str, float | None]:
    """The failure class and wait of `await search(reply)`, which must fail."""
    from rypsok.core.engines.base import EngineFailure

    try:
        await search(reply)
    except EngineFailure as exc:
        return str(exc.failure_class), exc.retry_after_s
    raise AssertionError("the driver answered; a failure was expected")
