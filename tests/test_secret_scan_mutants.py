"""The secret check (REQ-PRIV-002): the behaviours that the mutation runs of
`rypsok/core/secret_scan.py` found untested. Each fails on the mutant
that survived without it (book/maintainers/mutation.md). Every credential is synthetic,
assembled at run time so that no literal here has a token's shape."""

from __future__ import annotations

from rypsok.core.model import SecretKind
from rypsok.core.secret_scan import find_secret


def _joined(*parts: str) -> str:
    return "".join(parts)


def test_req_priv_002_a_workspace_token_is_judged_on_its_whole_body() -> None:
    # The body after "xoxa-2-" is read from its first character: a letter before the digits
    # makes it a token, although the rest alone would read as numbers joined by hyphens.
    token = _joined("xoxa", "-2-", "e039402840", "-", "511111111111")
    finding = find_secret(f"workspace {token} here")
    assert finding is not None
    assert finding.kind is SecretKind.SLACK_TOKEN
    assert (finding.start, finding.end) == (10, 10 + len(token))


def test_req_priv_002_a_url_password_is_found_right_after_a_digit_dot_or_hyphen() -> None:
    # "1.https://user:pw@host" (a numbered list) sends the password as surely as a URL after
    # a space: the URL is read from its scheme whatever precedes it. The check used to need
    # a character other than a letter, digit, "+", "." or "-" before the scheme, and missed
    # these three.
    password = _joined("hunter", "2")
    for before in ["see ", "see 1", "step 1.", "-", "x+", "v2."]:
        text = f"{before}https://user:{password}@example.com/"
        finding = find_secret(text)
        assert finding is not None, before
        assert finding.kind is SecretKind.URL_PASSWORD
        assert text[finding.start : finding.end] == password
    # Whatever the scheme's last character may be (RFC 3986), and none without a scheme.
    for scheme in ["git+ssh", "v2", "a+", "a.", "a-", "HTTPS"]:
        text = f"{scheme}://user:{password}@example.com/"
        finding = find_secret(text)
        assert finding is not None, scheme
        assert text[finding.start : finding.end] == password
    for text in [f"://user:{password}@example.com/", f"see ://user:{password}@example.com/"]:
        assert find_secret(text) is None, text


def test_req_priv_002_a_runner_registration_token_is_judged_on_its_whole_body() -> None:
    # The body is the 20 characters after the prefix, the first included: a digit before
    # letters makes it a key, where its last 19 alone would read as one word.
    body = "1" + "abcdefghijklmnopqrs"
    text = f"token GR1348941{body} here"
    finding = find_secret(text)
    assert finding is not None
    assert finding.kind is SecretKind.GITLAB_TOKEN
    assert text[finding.start : finding.end] == f"GR1348941{body}"
    assert find_secret("token GR1348941" + "a" + "bcdefghijklmnopqrst" + " here") is None
