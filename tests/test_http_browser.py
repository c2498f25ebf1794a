"""Browser hosts and refusal floods: a CORS preflight from a listed origin is
answered before the token is asked for, every answer to a listed origin carries the CORS
headers and no other origin gets them; refusals are counted one by one and logged in
aggregate, one line per reason and family per interval.
"""

from __future__ import annotations

import json

import httpx
import pytest
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    call_body,
    http_counts,
    make_config,
    modern_headers,
    serving,
)
from search_fakes import capture_logs

from rypsok.core import telemetry

ORIGIN = "https://app.example"
CONFIG = CALLERS + f'[service.http]\nallowed_origins = ["{ORIGIN}"]\n'


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


def _preflight_headers(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    }


async def test_req_mcp_003_a_preflight_from_a_listed_origin_is_answered_without_a_token() -> None:
    config = make_config(CONFIG, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        response = await client.options(server.url, headers=_preflight_headers(ORIGIN))
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "mcp-session-id"} <= allowed
    assert response.headers["vary"].lower() == "origin"
    assert http_counts() == {}


@pytest.mark.parametrize("origin", ["https://evil.example", "null"])
async def test_req_sec_018_a_preflight_from_another_origin_is_refused_without_cors(
    origin: str,
) -> None:
    config = make_config(CONFIG, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        response = await client.options(server.url, headers=_preflight_headers(origin))
    assert response.status_code == 403
    assert not any(name.startswith("access-control-") for name in response.headers)


async def test_req_mcp_003_answers_to_a_listed_origin_carry_cors_headers() -> None:
    body = json.dumps(call_body("engine_status")).encode()
    headers = modern_headers("tools/call", "engine_status", Origin=ORIGIN)
    config = make_config(CONFIG, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        served = await client.post(
            server.url, content=body, headers={**headers, "Authorization": f"Bearer {TOKEN_A}"}
        )
        unauthorized = await client.post(server.url, content=body, headers=headers)
        other = await client.post(
            server.url,
            content=body,
            headers={
                **headers,
                "Origin": "https://evil.example",
                "Authorization": f"Bearer {TOKEN_A}",
            },
        )
    assert served.status_code == 200
    assert served.headers["access-control-allow-origin"] == ORIGIN
    exposed = served.headers["access-control-expose-headers"].lower()
    assert "mcp-session-id" in exposed
    # The browser hands the page a 401 (and its WWW-Authenticate) only with these headers.
    assert unauthorized.status_code == 401
    assert unauthorized.headers["access-control-allow-origin"] == ORIGIN
    assert "www-authenticate" in exposed
    assert other.status_code == 403
    assert "access-control-allow-origin" not in other.headers


# -- refusals logged in aggregate ----------------------------------------------------------------


async def test_req_obs_005_a_flood_of_refusals_is_counted_each_and_logged_in_aggregate() -> None:
    body = json.dumps(call_body("engine_status")).encode()
    headers = modern_headers("tools/call", "engine_status")
    with capture_logs() as logs:
        async with serving(make_config(CALLERS, CALLERS_ENV), CALLERS_ENV) as server:
            async with httpx.AsyncClient() as client:
                for _ in range(200):
                    response = await client.post(server.url, content=body, headers=headers)
                    assert response.status_code == 401
            during = len(logs.named("http_refused"))
    lines = logs.named("http_refused")
    assert during == 1  # the first at once; the rest wait for the interval's end
    assert [(e["reason"], e["family"]) for e in lines] == [("unauthorized", "ipv4")] * 2
    assert sum(e["count"] for e in lines) == 200  # the shutdown writes what was pending
    assert http_counts() == {"unauthorized": 200}
