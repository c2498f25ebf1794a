"""The steps the JSON drivers share (rypsok.core.engines.answers), apart from any driver."""

from __future__ import annotations

import re
from datetime import date

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rypsok.core.engines.answers import (
    calendar_date,
    json_object,
    object_items,
    raise_for_status,
    require_within_limits,
)
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.http import EngineResponse
from rypsok.core.engines.wikipedia import WIKIPEDIA_RECORD
from rypsok.core.model import Reason

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
