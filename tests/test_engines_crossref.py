"""The Crossref driver against a local server replaying a recorded works answer."""

from __future__ import annotations

from typing import Any

import pytest
from keyless_fakes import COMMON_STATUSES, ask, json_reply, outcome_of, query, recorded_json

from rypsok.core.engines.crossref import CROSSREF_RECORD, CrossrefEngine, doi_url, mailto
from rypsok.core.model import Category
from testkit.servers import Reply

CAPTURE = "crossref/works-work-list.real-capture.abridged.json"


async def _search(reply: Reply, contact: str = "") -> tuple[Any, list[Any]]:
    return await ask(
        {"/works": reply},
        lambda http, url: CrossrefEngine("crossref", http, contact=contact, base_url=url),
        query("palliative care", category=Category.SCIENCE),
    )


async def test_req_test_002_crossref_recorded_answer_gives_doi_links() -> None:
    answer, requests = await _search(json_reply(recorded_json(CAPTURE)))
    assert [(r.title, r.url) for r in answer.results] == [
        ("Pediatric Palliative Care", "https://doi.org/10.1093/med/9780190244187.001.0001"),
        ("Structure and Processes of Care", "https://doi.org/10.1093/med/9780190223755.001.0001"),
    ]
    assert answer.results[0].date is None  # issued names a month only
    assert dict(requests[0].query) == {"query": "palliative care", "rows": "10"}


async def test_req_cmp_004_the_operators_address_puts_requests_in_the_polite_pool() -> None:
    _, requests = await _search(
        json_reply(recorded_json(CAPTURE)), contact="mailto:ops@example.org"
    )
    assert requests[0].param("mailto") == "ops@example.org"


def test_req_cmp_004_mailto_reads_an_address_and_nothing_else() -> None:
    assert mailto("ops@example.org") == "ops@example.org"
    assert mailto("https://example.org/contact") is None
    assert mailto("") is None


def test_req_eng_012_doi_url_percent_encodes_what_a_path_cannot_hold() -> None:
    assert doi_url("10.1000/a b#c?d%") == "https://doi.org/10.1000/a%20b%23c%3Fd%25"
    assert doi_url("10.1002/(SICI)1097-4571") == "https://doi.org/10.1002/(SICI)1097-4571"


async def test_req_test_002_a_work_without_title_or_doi_is_left_out() -> None:
    payload = recorded_json(CAPTURE)
    payload["message"]["items"][0]["title"] = []
    del payload["message"]["items"][1]["DOI"]
    answer, _ = await _search(json_reply(payload))
    assert answer.results == ()


@pytest.mark.parametrize(
    ("reply", "failure", "wait"), [*COMMON_STATUSES, (Reply(status=403), "blocked", None)]
)
async def test_req_eng_006_crossref_classifies_each_failure(
    reply: Reply, failure: str, wait: float | None
) -> None:
    assert await outcome_of(_search, reply) == (failure, wait)


@pytest.mark.parametrize(
    "payload",
    [
        {"status": "ok", "message-type": "work", "message": {}},
        {"status": "ok", "message-type": "work-list", "message": {"items": {}}},
        {"status": "ok", "message-type": "work-list", "message": []},
    ],
)
async def test_req_eng_006_crossref_drifted_format_is_a_parse_failure(payload: object) -> None:
    assert await outcome_of(_search, json_reply(payload)) == ("parse_failure", None)


def test_req_eng_010_crossref_record() -> None:
    r = CROSSREF_RECORD
    assert (r.rate_per_minute, r.burst, r.concurrency) == (60, 5, 2)
    assert r.cacheable
    assert r.time_ranges == frozenset()
