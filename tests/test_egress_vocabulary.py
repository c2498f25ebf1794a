"""The refusal classes as the operator's log names them (REQ-PRIV-004, REQ-SEC-006,
REQ-SEC-009; book/egress.md "What is refused" and "The log", book/logs.md `refused`).

A refusal is logged as the event `refused` with its class (`str(refusal)`), never the host.
Each class is reached here through the component's public use (a URL judged, an address
judged, a request given to the fetch client), and its logged name checked; the address
classes are the ones the book's table names.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Final

import httpcore
import pytest

from rypsok.core.egress import EgressPolicy, EgressRefused, Refusal
from rypsok.core.egress.clients import EgressTransport
from rypsok.core.egress.policy import Denial
from rypsok.core.egress.testing import MapResolver, RecordingBackend

ROOT: Final = Path(__file__).resolve().parent.parent
POLICY: Final = EgressPolicy(deny=EgressPolicy().with_allow("blocked.example.org").allow)

# A URL for each class judged on the URL, and the class the log names.
_URLS: Final[tuple[tuple[str, str], ...]] = (
    ("https://0.0.0.0/", "unspecified"),
    ("https://0.1.2.3/", "this_network"),
    ("https://127.0.0.1/", "loopback"),
    ("https://10.0.0.1/", "private"),
    ("https://100.64.0.1/", "cgnat"),
    ("https://169.254.1.1/", "link_local"),
    ("https://[fec0::1]/", "site_local"),
    ("https://[fc00::1]/", "unique_local"),
    ("https://224.0.0.1/", "multicast"),
    ("https://255.255.255.255/", "broadcast"),
    ("https://198.18.0.1/", "benchmarking"),
    ("https://192.0.2.1/", "documentation"),
    ("https://192.0.0.1/", "protocol_assignment"),
    ("https://240.0.0.1/", "reserved"),
    ("https://[64:ff9b::808:808]/", "nat64"),
    ("https://[2001::1]/", "teredo"),
    ("https://[::102:304]/", "ipv4_compatible"),
    ("https://169.254.169.254/", "metadata"),
    ("https://localhost/", "localhost"),
    ("https://intranet/", "single_label"),
    ("https://printer.local/", "special_use_name"),
    ("https://a..example.org/", "malformed_host"),
    ("https://[fe80::1%25eth0]/", "zone_id"),
    ("https://blocked.example.org/", "deny_rule"),
    ("https://exa mple.org/", "malformed_url"),
    ("ftp://example.org/", "scheme"),
    ("https://user@example.org/", "credentials"),
    ("https://example.org:8443/", "port"),
)


@pytest.mark.parametrize(("url", "logged"), _URLS)
def test_req_priv_004_a_refusal_on_the_url_is_logged_under_its_class(url: str, logged: str) -> None:
    judged = POLICY.judge_url(url)
    assert isinstance(judged, Denial), url
    assert str(judged.refusal) == logged


async def test_req_sec_009_a_refused_method_is_logged_under_its_class() -> None:
    # The pool's one entry refuses any method but GET before a connection is made.
    network_backend = RecordingBackend()
    transport = EgressTransport(
        EgressPolicy(),
        ssl_context=ssl.create_default_context(),
        resolver=MapResolver({}),
        network_backend=network_backend,
    )
    url = httpcore.URL(scheme=b"https", host=b"example.org", port=443, target=b"/")
    with pytest.raises(EgressRefused) as method:
        await transport.handle_core(httpcore.Request(b"POST", url))
    await transport.aclose()
    assert str(method.value.refusal) == "method"
    assert network_backend.attempts == []


def _book_address_classes() -> set[str]:
    text = (ROOT / "book" / "egress.md").read_text(encoding="utf-8")
    section = text.split("## What is refused", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    classes: set[str] = set()
    for row in rows:
        classes.update(re.findall(r"`([a-z0-9_]+)`", row.split("|")[1]))
    return classes


def test_req_sec_006_every_address_class_of_the_book_is_a_class_the_policy_gives() -> None:
    given = {logged for _url, logged in _URLS}
    book = _book_address_classes()
    assert len(book) == 18
    assert book <= given
    # The closed vocabulary: every class is reached by one of the inputs above or the
    # transport's two, and none is left that nothing produces.
    assert {str(r) for r in Refusal} == given | {"method"}


def test_req_priv_004_every_class_the_log_writes_is_named_in_the_operators_books() -> None:
    # The address classes are listed in egress.md's table; the others (names, rules, the URL
    # or request itself) in the `refused` row of logs.md. An operator reading a log line
    # finds its class in one of them.
    logs = (ROOT / "book" / "logs.md").read_text(encoding="utf-8")
    egress = (ROOT / "book" / "egress.md").read_text(encoding="utf-8")
    refused_row = next(line for line in logs.splitlines() if line.startswith("| `refused` (with"))
    missing = [
        str(refusal)
        for refusal in Refusal
        if f"`{refusal}`" not in egress and f"`{refusal}`" not in refused_row
    ]
    assert missing == []
