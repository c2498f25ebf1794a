"""Reading a host (rypsok.core.egress.names), called directly, one test per edge.

The URL parser in front of it (httpx's) already lower-cases hosts and refuses an unclosed
bracket, so these edges are unreachable through `judge_url`; the backend hands hosts to
`parse_host` too, and the reader must stand on its own (REQ-SEC-006).
"""

from __future__ import annotations

import ipaddress

import pytest

from rypsok.core.egress import Refusal
from rypsok.core.egress.names import (
    Host,
    _ipv4_number,
    literal_refusal,
    parse_host,
    parse_ipv4_number_form,
)


@pytest.mark.parametrize(
    ("part", "value"),
    [
        ("0x", 0),  # the prefix alone is zero
        ("0X", 0),
        ("0xff", 255),
        ("0XFF", 255),  # an upper-case prefix and digits
        ("0xaB", 171),
        ("0", 0),
        ("00", 0),  # octal zero
        ("017", 15),
        ("9", 9),
        ("08", None),  # not octal
        ("0xg", None),
        ("0xX", None),  # a letter beyond hexadecimal's, upper-case
        ("", None),
        ("1" * 13, None),  # longer than any 32-bit value is written
        ("0" * 20 + "1", 1),  # leading zeros do not count
    ],
)
def test_req_sec_006_each_form_of_an_ipv4_number(part: str, value: int | None) -> None:
    assert _ipv4_number(part) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("1.2.3.4", "1.2.3.4"),
        ("1.2.3.4.", "1.2.3.4"),  # the root dot
        ("1.2.65535", "1.2.255.255"),
        ("1.16777215", "1.255.255.255"),
        ("4294967295", "255.255.255.255"),
    ],
)
def test_req_sec_006_the_number_forms_of_an_ipv4_address(text: str, expected: str) -> None:
    assert parse_ipv4_number_form(text) == ipaddress.IPv4Address(expected)


@pytest.mark.parametrize(
    "text",
    ["1.2.3.4.5", "1.2.3.4.0", "256.1.1.1", "1.2.65536", "1.16777216", "4294967296", "0x1g.1"],
)
def test_req_sec_006_a_host_ending_in_a_number_that_is_no_address_is_refused(text: str) -> None:
    assert parse_ipv4_number_form(text) is Refusal.MALFORMED_HOST


def test_req_sec_006_a_host_not_ending_in_a_number_is_a_name() -> None:
    assert parse_ipv4_number_form("example.org") is None


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("[::1", Refusal.MALFORMED_HOST),  # an unclosed bracket
        ("[fe80::1%25eth0]", Refusal.ZONE_ID),
        ("[]", Refusal.MALFORMED_HOST),
        ("exa mple.org", Refusal.MALFORMED_HOST),  # a space (0x20)
        ("exa\x7fmple.org", Refusal.MALFORMED_HOST),  # DEL
        ("exa\x1fmple.org", Refusal.MALFORMED_HOST),
        ("exa%20mple.org", Refusal.MALFORMED_HOST),  # decoded first
        ("", Refusal.MALFORMED_HOST),
        ("xn--zz.org", Refusal.MALFORMED_HOST),  # an A-label that does not decode
    ],
)
def test_req_sec_006_hosts_that_cannot_be_read(text: str, refusal: Refusal) -> None:
    assert parse_host(text) is refusal


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("ex-ample.org", Host(name="ex-ample.org")),
        ("EXAMPLE.org", Host(name="example.org")),
        ("[::1]", Host(address=ipaddress.ip_address("::1"))),
        ("0X7F000001", Host(address=ipaddress.ip_address("127.0.0.1"))),
    ],
)
def test_req_sec_006_hosts_that_are_read(text: str, host: Host) -> None:
    assert parse_host(text) == host


@pytest.mark.parametrize(
    ("host", "text"),
    [
        (Host(name="example.org"), "example.org"),
        (Host(address=ipaddress.ip_address("::1")), "[::1]"),
        (Host(address=ipaddress.ip_address("127.0.0.1")), "127.0.0.1"),
    ],
)
def test_req_sec_006_a_host_is_written_back_as_in_a_url(host: Host, text: str) -> None:
    assert host.text == text


def test_req_sec_006_a_name_of_253_characters_is_read_and_one_longer_refused() -> None:
    # RFC 1035's bound on a name written in text, its root dot not counted.
    longest = ".".join(("a" * 63, "b" * 63, "c" * 63, "d" * 61))
    assert len(longest) == 253
    assert parse_host(longest) == Host(name=longest)
    assert parse_host(longest + ".") == Host(name=longest)
    assert parse_host(longest + "e") is Refusal.MALFORMED_HOST


def test_req_sec_006_an_empty_text_is_no_number_form() -> None:
    assert parse_ipv4_number_form("") is None
    assert parse_ipv4_number_form(".") is None


@pytest.mark.parametrize(
    ("host", "refusal"),
    [
        ("127.0.0.1", Refusal.LOOPBACK),
        ("127.0.0.1.", Refusal.LOOPBACK),
        ("2130706433", Refusal.LOOPBACK),
        ("0x7f.1", Refusal.LOOPBACK),
        ("10.0.0.1", Refusal.PRIVATE),
        ("169.254.169.254", Refusal.METADATA),
        ("[::1]", Refusal.LOOPBACK),
        ("[::ffff:10.0.0.1]", Refusal.PRIVATE),
        ("[2002:7f00:1::]", Refusal.LOOPBACK),
        ("[fe80::1%eth0]", Refusal.ZONE_ID),
        ("[::1", Refusal.MALFORMED_HOST),
        ("[zz]", Refusal.MALFORMED_HOST),
        ("1.2.3.4.5", Refusal.MALFORMED_HOST),
        ("256.0.0.1", Refusal.MALFORMED_HOST),
        ("0x", Refusal.UNSPECIFIED),  # "0x" alone is zero: 0.0.0.0
        ("a.0x", Refusal.MALFORMED_HOST),  # ends in a number, so no name, and no address
        ("93.184.215.14", None),
        ("[2606:4700::1111]", None),
        ("example.org", None),
        ("example.org.", None),
        ("x.0example", None),
        ("localhost", None),  # a name: judged only when a fetch resolves it
        ("1password.com", None),
    ],
)
def test_req_rank_003_an_address_literal_is_judged_by_the_table_without_a_lookup(
    host: str, refusal: Refusal | None
) -> None:
    assert literal_refusal(host) is refusal
