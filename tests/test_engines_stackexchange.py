"""The Stack Exchange driver against a local server replaying a recorded API answer."""

from __future__ import annotations

from typing import Any

import pytest
from keyless_fakes import COMMON_STATUSES, ask, json_reply, outcome_of, query, recorded_json

from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.stackexchange import STACKEXCHANGE_RECORD, StackExchangeEngine
from rypsok.core.model import Category, Reason
from rypsok.core.telemetry import Secret
from testkit.servers import Reply, serve_http

CAPTURE = "stackexchange/search-advanced-q=java-filter=withbody.real-capture.json"
PATH = "/2.3/search/advanced"


def _engine(http: EngineClient, url: str, **kwargs: Any) -> StackExchangeEngine:
    return StackExchangeEngine("so", http, base_url=f"{url}/2.3", **kwargs)


async def _search(reply: Reply, **kwargs: Any) -> tuple[Any, list[Any]]:
    return await ask(
        {PATH: reply},
        lambda http, url: _engine(http, url, **kwargs),
        query("java", category=Category.CODE),
    )


async def test_req_test_002_stackexchange_recorded_gzip_answer_parses() -> None:
    # The provider compresses every answer: the recorded one is served gzip-compressed.
    answer, requests = await _search(json_reply(recorded_json(CAPTURE), gzipped=True))
    first = answer.results[0]
    assert (
        first.title
        == "A fatal error has been detected by the Java Runtime Environment (SIGBUS (0x7))"
    )
    assert first.url.startswith("https://stackoverflow.com/questions/53554542/")
    assert first.snippet.startswith("<p>We have written JMH")  # raw: the boundary cleans it
    assert first.date == "2018-11-30"
    assert dict(requests[0].query) == {
        "q": "java",
        "site": "stackoverflow",
        "order": "desc",
        "sort": "relevance",
        "pagesize": "10",
        "filter": "withbody",
    }


async def test_req_cmp_002_the_key_and_site_are_sent_when_configured() -> None:
    _, requests = await _search(
        json_reply(recorded_json(CAPTURE)), site="superuser", api_key=Secret("k3y")
    )
    assert requests[0].param("site") == "superuser"
    assert requests[0].param("key") == "k3y"


@pytest.mark.parametrize(
    ("change", "least_wait"),
    [({"backoff": 12}, 11.0), ({"quota_remaining": 0}, 1.0)],
)
async def test_req_res_002_backoff_and_spent_quota_make_the_next_call_wait(
    change: dict[str, int], least_wait: float
) -> None:
    payload = recorded_json(CAPTURE) | change
    async with serve_http({PATH: json_reply(payload)}) as server, EngineClient() as http:
        engine = _engine(http, server.url)
        first = await engine.search(query("java"))
        try:
            await engine.search(query("java"))
        except EngineFailure as exc:
            failure: EngineFailure | None = exc
        else:
            failure = None
        sent = len(server.requests)
    assert len(first.results) == 2  # the answer that asked for the wait is still used
    assert failure is not None
    assert failure.failure_class is Reason.RATE_LIMITED
    assert failure.retry_after_s is not None
    assert failure.retry_after_s >= least_wait
    assert sent == 1  # the second call sent nothing


@pytest.mark.parametrize(
    ("reply", "failure", "wait"),
    [
        *COMMON_STATUSES,
        (Reply(status=503, headers=(("Retry-After", "30"),)), "rate_limited", 30.0),
        (Reply(status=403), "blocked", None),
        (Reply(status=400, body=b'{"error_id":400}'), "request_failure", None),
    ],
)
async def test_req_eng_006_stackexchange_classifies_each_failure(
    reply: Reply, failure: str, wait: float | None
) -> None:
    assert await outcome_of(_search, reply) == (failure, wait)


@pytest.mark.parametrize(
    "payload",
    [
        {"items": "none"},
        {"items": [{"title": 1, "link": "https://x.example/"}]},
        {"quota_max": 300},
    ],
)
async def test_req_eng_006_stackexchange_drifted_format_is_a_parse_failure(payload: object) -> None:
    assert await outcome_of(_search, json_reply(payload)) == ("parse_failure", None)


async def test_req_sec_010_stackexchange_gzip_bomb_stops_at_the_bound() -> None:
    big = {"items": [], "pad": "0" * (STACKEXCHANGE_RECORD.response_max_bytes * 4)}
    with pytest.raises(EngineFailure) as caught:
        await _search(json_reply(big, gzipped=True))
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_sec_010_the_key_is_not_in_the_engines_repr() -> None:
    engine = StackExchangeEngine("so", EngineClient(), api_key=Secret("k3y-value"))
    assert "k3y-value" not in repr(engine)


def test_req_eng_010_stackexchange_record() -> None:
    r = STACKEXCHANGE_RECORD
    assert (r.rate_per_minute, r.burst, r.concurrency) == (10, 2, 1)
    assert not r.cacheable
    assert not r.attribution_required
    assert not r.needs_credential
    assert not r.languages_all
