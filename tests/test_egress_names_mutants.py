"""Reading a host: the behaviours that the full mutation run of
`rypsok/core/egress/names.py` found untested. Each fails on the
mutant that survived without it (book/maintainers/mutation.md)."""

from __future__ import annotations

import ipaddress

import pytest

from rypsok.core.egress import Refusal
from rypsok.core.egress.names import Host, parse_host, parse_ipv4_number_form


@pytest.mark.parametrize("host", ["_dmarc.example.com", "a_.example.com", "_.example.com"])
def test_req_sec_006_a_label_may_start_and_end_with_an_underscore(host: str) -> None:
    # Service labels (_dmarc, _sip) are names a URL can hold; the reader accepts an
    # underscore anywhere in a label, as browsers do.
    assert parse_host(host) == Host(name=host)


@pytest.mark.parametrize(
    "host",
    [
        "0x123456789abc",  # twelve hexadecimal digits: a number, too large for 32 bits
        "0x0123456789abc",  # the same after a leading zero
        "1.0x123456789ab",  # eleven hexadecimal digits in the last part
        "0x1234567890ab.",  # with the root dot
    ],
)
def test_req_sec_006_a_host_ending_in_a_long_hexadecimal_number_is_malformed(host: str) -> None:
    # WHATWG: a last label that is a number makes the host an IPv4 address; one that does
    # not fit is refused, never read as a name.
    assert parse_host(host) is Refusal.MALFORMED_HOST


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433.", "127.0.0.1"),
        ("0x7f000001.", "127.0.0.1"),
        ("10.", "0.0.0.10"),
    ],
)
def test_req_sec_006_a_number_with_a_root_dot_is_the_address(host: str, address: str) -> None:
    # The root dot is dropped before the last label is looked at, whatever the count of
    # labels: "2130706433." is 127.0.0.1, not a name.
    assert parse_host(host) == Host(address=ipaddress.IPv4Address(address))
    assert parse_ipv4_number_form(host) == ipaddress.IPv4Address(address)


@pytest.mark.parametrize("text", ["1X", "01X", "1.2.3.4X", "9X.1"])
def test_req_sec_006_the_number_form_reads_no_other_letter_as_a_digit(text: str) -> None:
    # Called on any text (it is public), the reader takes only the digits of each base:
    # a last part with a letter that is no digit is no number, so the text is a name (None);
    # a letter in another part of a number is malformed.
    expected = None if text != "9X.1" else Refusal.MALFORMED_HOST
    assert parse_ipv4_number_form(text) == expected


@pytest.mark.parametrize("host", ["www.xn--zz", "a.xn--garbage-.example", "xn--zz.example"])
def test_req_sec_006_an_a_label_that_does_not_decode_is_malformed_in_any_place(host: str) -> None:
    # Every label is looked at, not only the first: "xn--" followed by what no Punycode
    # decodes to is not a name.
    assert parse_host(host) is Refusal.MALFORMED_HOST
