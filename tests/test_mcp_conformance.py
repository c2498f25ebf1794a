"""The conformance harness itself: it passes on the book's calls and notices a difference."""

from __future__ import annotations

import copy
import json

import trio

from conformance.__main__ import CALLS, call_case
from testkit.mediawiki import FixtureWiki


async def test_req_ctx_003_harness_matches_the_book_and_catches_one_changed_byte() -> None:
    case = json.loads((CALLS / "first-search.json").read_text(encoding="utf-8"))
    changed = copy.deepcopy(case)
    text = changed["response"]["result"]["content"][0]["text"]
    changed["response"]["result"]["content"][0]["text"] = text.replace('":', '": ', 1)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(FixtureWiki().serve)
        assert await call_case(case, port) == ""
        assert await call_case(changed, port) != ""
        nursery.cancel_scope.cancel()


async def test_req_ctx_003_the_fetch_cases_replay_against_the_fixture_site() -> None:
    from testkit.fetch_site import FixtureSite, temporary_folder

    case = json.loads((CALLS / "web-fetch-continuation-1.json").read_text(encoding="utf-8"))
    changed = copy.deepcopy(case)
    changed["response"]["result"]["structuredContent"]["next_start_char"] = 499
    with temporary_folder() as folder:
        site = FixtureSite(folder)
        async with trio.open_nursery() as nursery:
            wiki_port = await nursery.start(FixtureWiki().serve)
            site_port = await nursery.start(site.serve)
            where = (site_port, str(site.ca_file))
            assert await call_case(case, wiki_port, where) == ""
            assert await call_case(changed, wiki_port, where) != ""
            nursery.cancel_scope.cancel()
