"""The steps the JSON drivers share (rypsok.core.engines.answers), apart from any driver."""

from __future__ import annotations

import json
import re
from datetime import date

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_network import ProviderNetwork, tls_for

from rypsok.core.engines.answers import (
    calendar_date,
    json_object,
    object_items,
    raise_for_status,
    require_within_limits,
)
from rypsok.core.engines.base import EngineAnswer, EngineFailure, EngineQuery, RawResult
from rypsok.core.engines.brave import BraveEngine
from rypsok.core.engines.client import EngineClient, EngineResponse
from rypsok.core.engines.wikipedia import WIKIPEDIA_RECORD, WikipediaEngine
from rypsok.core.model import FAILURE_CLASSES, Category, Reason, SafeSearch
from testkit.servers import Reply, serve_http

_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")


def _response(status: int, headers: dict[str, str] | None = None) -> EngineResponse:
    return EngineResponse(status=status, headers=httpx.Headers(headers or {}), body=b"")


def _failure(status: int, headers: dict[str, str] | None = None) -> EngineFailure:
    with pytest.raises(EngineFailure) as caught:
        raise_for_status(_response(status, headers), {403: Reason.BLOCKED})
    return caught.value


@pytest.mark.parametrize("status", [200, 204, 299])
def test_req_eng_006_a_2xx_is_no_failure(status: int) -> None:
    raise_for_status(_response(status), {status: Reason.BLOCKED})


def test_req_eng_006_429_is_rate_limited_with_the_retry_after_wait() -> None:
    failure = _failure(429, {"Retry-After": "7"})
    assert failure.failure_class is Reason.RATE_LIMITED
    assert failure.retry_after_s == 7.0


def test_req_eng_006_429_reads_the_wait_the_driver_names() -> None:
    with pytest.raises(EngineFailure) as caught:
        raise_for_status(_response(429), {}, lambda headers: 3.5)
    assert caught.value.retry_after_s == 3.5


def test_req_eng_006_a_refusal_is_the_driver_class_and_the_rest_request_failure() -> None:
    assert _failure(403).failure_class is Reason.BLOCKED
    for status in (301, 400, 404, 500, 503):
        failure = _failure(status)
        assert failure.failure_class is Reason.REQUEST_FAILURE
        assert failure.retry_after_s is None


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'"text"', b"\xff\xfe{}", b""])
def test_req_eng_006_a_body_that_is_not_a_json_object_is_a_parse_failure(body: bytes) -> None:
    with pytest.raises(EngineFailure) as caught:
        json_object(body)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_eng_005_a_json_object_is_returned_as_decoded() -> None:
    assert json_object(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


@pytest.mark.parametrize("items", [None, {"a": 1}, "text", [{"a": 1}, 2], [[]]])
def test_req_eng_006_a_result_list_of_other_than_objects_is_a_parse_failure(
    items: object,
) -> None:
    with pytest.raises(EngineFailure) as caught:
        object_items(items)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_eng_005_a_list_of_objects_passes_whole() -> None:
    assert object_items([{"a": 1}, {}]) == [{"a": 1}, {}]
    assert object_items([]) == []


@given(st.dates(min_value=date(1000, 1, 1), max_value=date(9999, 12, 31)))
def test_req_eng_005_a_timestamp_keeps_its_calendar_day(day: date) -> None:
    assert calendar_date(f"{day.isoformat()}T12:00:00Z", _DAY) == day.isoformat()


@pytest.mark.parametrize(
    "value", [None, 20240101, "", "2024-01-01", "2024-02-30T00:00:00Z", "2024-13-01T00:00:00Z"]
)
def test_req_eng_005_no_date_for_a_field_that_is_not_one(value: object) -> None:
    assert calendar_date(value, _DAY) is None


def test_req_eng_006_a_query_over_the_record_is_a_request_failure() -> None:
    require_within_limits(WIKIPEDIA_RECORD, "rust")
    with pytest.raises(EngineFailure) as caught:
        require_within_limits(WIKIPEDIA_RECORD, "x" * (WIKIPEDIA_RECORD.max_query_chars + 1))
    assert caught.value.failure_class is Reason.REQUEST_FAILURE


# -- REQ-SEC-014: whatever a provider answers, a driver ends with an answer or a failure class

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = st.sampled_from(["title", "snippet", "url", "timestamp", "description", "page_age"])
_ITEMS = st.lists(st.dictionaries(_FIELDS, _JSON_VALUES, max_size=5) | _JSON_VALUES, max_size=4)


def _shaped(items: object) -> list[bytes]:
    """The same items in each driver's envelope, so the fuzz reaches the item parsers."""
    return [
        json.dumps({"query": {"search": items}}).encode(),
        json.dumps({"web": {"results": items}, "type": "search"}).encode(),
        json.dumps({"results": items, "type": "news"}).encode(),
    ]


def _nested(depth: int, opener: str) -> bytes:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return (opener * depth + "1" + closer * depth).encode()


_BODIES = st.one_of(
    st.binary(max_size=600),
    _JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    _ITEMS.flatmap(lambda items: st.sampled_from(_shaped(items))),
    st.builds(
        _nested, st.integers(min_value=500, max_value=200_000), st.sampled_from(["[", '{"a":'])
    ),
)


async def _drive(driver: str, status: int, body: bytes) -> object:
    host = "en.wikipedia.org" if driver == "wikipedia" else "api.search.brave.com"
    reply = Reply(status=status, body=body, headers=(("Retry-After", "abc"),))
    async with serve_http(default=reply, tls=tls_for(host)) as server:
        return await _drive_through(driver, ProviderNetwork({host: server}))


async def _drive_through(driver: str, network: ProviderNetwork) -> object:
    async with EngineClient(**network.http_options()) as http:
        engine: WikipediaEngine | BraveEngine
        if driver == "wikipedia":
            engine = WikipediaEngine("wikipedia", http, None)
        elif driver == "brave":
            engine = BraveEngine("brave", http, "BSA-fuzz-key-0123456789", "web")
        else:
            engine = BraveEngine("brave", http, "BSA-fuzz-key-0123456789", "news")
        query = EngineQuery(
            query="rust",
            category=Category.GENERAL,
            language="en",
            region="US",
            safe_search=SafeSearch.MODERATE,
            time_range=None,
            count=10,
        )
        try:
            return await engine.search(query)
        except EngineFailure as failure:
            return failure


@settings(max_examples=150, deadline=None)
@given(
    driver=st.sampled_from(["wikipedia", "brave", "brave-news"]),
    status=st.sampled_from([200, 200, 200, 204, 301, 403, 429, 500]),
    body=_BODIES,
)
def test_req_sec_014_malformed_answers_end_as_a_failure_class_in_both_drivers(
    driver: str, status: int, body: bytes
) -> None:
    # Anything but an answer or an EngineFailure escapes trio.run and fails the example.
    outcome = trio.run(_drive, driver, status, body)
    if isinstance(outcome, EngineFailure):
        assert outcome.failure_class in FAILURE_CLASSES
    else:
        assert isinstance(outcome, EngineAnswer)
        for item in outcome.results:
            assert isinstance(item, RawResult)
            assert isinstance(item.title, str)
            assert isinstance(item.snippet, str)
            assert isinstance(item.url, str)


def test_req_sec_014_a_body_nested_past_the_decoder_bound_is_a_parse_failure() -> None:
    for opener in ("[", '{"a":'):
        outcome = trio.run(_drive, "wikipedia", 200, _nested(100_000, opener))
        assert isinstance(outcome, EngineFailure)
        assert outcome.failure_class is Reason.PARSE_FAILURE
