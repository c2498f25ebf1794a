"""The secret check (REQ-PRIV-002): high-confidence credential formats in queries and URLs.

A pattern is a fixed prefix or structure with the length of the real format, and, where the
shape alone could be ordinary text, a structural confirmation (a digit in the body, a value
that decodes to user:password, a body that is not just hyphenated words). Nothing is guessed
from how random a string looks.

The check reads through invisible characters: it matches on the text with them removed and
reports positions in the text as given. It reads through percent-encoding too: a text with
`%XX` escapes is also matched once decoded (and again, for a text encoded twice or three
times), since `my%20token%20ghp_…` reaches a site, which decodes it, as a token after a
space, and `Authorization:%20Basic%20…` as the header. A position counts Unicode scalar
values from 0 (the number of characters before the credential), invisible characters and
escapes included. The value of a credential is never returned, logged or put into a
message; only its kind and position are.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

import attrs

from rypsok.core.model import SecretKind
from rypsok.core.untrusted_text import INVISIBLE_RANGES

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MASK", "SecretFinding", "find_secret", "find_secrets", "mask_secrets"]

MASK = "[masked]"


@attrs.frozen(kw_only=True)
class SecretFinding:
    """One credential: its kind and where it is in the text as given.

    `start` and `end` index the text passed in (a Python str indexes scalar values), so
    ``text[start:end]`` is the credential with any invisible character inside it;
    `position` is what the caller is told, the 0-based character position of its start.
    """

    kind: SecretKind
    position: int
    start: int
    end: int


# --- reading through invisible characters ---------------------------------------------------


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges) + "]"


_INVISIBLE = re.compile(_char_class(INVISIBLE_RANGES) + "+")
_ASCII_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


class _View:
    """The text with invisible characters removed, and the way back to original indexes."""

    __slots__ = ("_kept_original", "_kept_view", "text")

    def __init__(self, original: str) -> None:
        if original.isascii() and _ASCII_INVISIBLE.search(original) is None:
            self.text = original
            self._kept_view: list[int] = []
            self._kept_original: list[int] = []
            return
        pieces: list[str] = []
        # Each kept segment: where it starts in the view and in the original.
        self._kept_view = []
        self._kept_original = []
        at_view = 0
        at_original = 0
        for match in _INVISIBLE.finditer(original):
            if match.start() > at_original:
                self._kept_view.append(at_view)
                self._kept_original.append(at_original)
                pieces.append(original[at_original : match.start()])
                at_view += match.start() - at_original
            at_original = match.end()
        if at_original < len(original):
            self._kept_view.append(at_view)
            self._kept_original.append(at_original)
            pieces.append(original[at_original:])
        self.text = "".join(pieces)

    def original_index(self, view_index: int) -> int:
        """The original index of the character at view_index (which must exist)."""
        if not self._kept_view:
            return view_index
        segment = bisect.bisect_right(self._kept_view, view_index) - 1
        return self._kept_original[segment] + view_index - self._kept_view[segment]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        return self.original_index(start), self.original_index(end - 1) + 1


# --- reading through percent-encoding ------------------------------------------------------

# One escape of an ASCII byte, or a run of escapes of the bytes of UTF-8 sequences. An
# ASCII byte ends any sequence, so decoding the runs apart decodes the text as a whole.
_ESCAPE = re.compile(r"%([0-7][0-9A-Fa-f])|(?:%[89A-Fa-f][0-9A-Fa-f])+")
# A text encoded three times (`%252520`) is decoded three times; past that nothing a site
# reads is left encoded by accident.
_DECODINGS = 3


class _Decoded:
    """The text with its %XX escapes decoded as UTF-8 (a byte that does not decode is
    U+FFFD), and for each character the span of the original text it came from: its own
    escape for an ASCII character (every credential starts and ends with one)."""

    __slots__ = ("ends", "starts", "text")

    def __init__(self, original: str) -> None:
        pieces: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        at = 0
        for escape in _ESCAPE.finditer(original):
            self._keep(original, at, escape.start(), pieces)
            ascii_byte = escape.group(1)
            if ascii_byte is not None:
                decoded = chr(int(ascii_byte, 16))
            else:
                data = bytes.fromhex(escape.group().replace("%", ""))
                decoded = data.decode("utf-8", errors="replace")
            pieces.append(decoded)
            self.starts.extend([escape.start()] * len(decoded))
            self.ends.extend([escape.end()] * len(decoded))
            at = escape.end()
        self._keep(original, at, len(original), pieces)
        self.text = "".join(pieces)

    def _keep(self, original: str, start: int, stop: int, pieces: list[str]) -> None:
        pieces.append(original[start:stop])
        self.starts.extend(range(start, stop))
        self.ends.extend(range(start + 1, stop + 1))

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        return self.starts[start], self.ends[end - 1]


def _readings(text: str) -> Iterator[tuple[str, Callable[[int, int], tuple[int, int]]]]:
    """The text as given, then decoded as long as escapes are left (at most _DECODINGS
    times), each with the way back from its indexes to those of the text as given."""

    def as_given(start: int, end: int) -> tuple[int, int]:
        return start, end

    yield text, as_given
    back = as_given
    for _ in range(_DECODINGS):
        if _ESCAPE.search(text) is None:
            return
        decoded = _Decoded(text)

        def through(
            start: int,
            end: int,
            decoded: _Decoded = decoded,
            back: Callable[[int, int], tuple[int, int]] = back,
        ) -> tuple[int, int]:
            return back(*decoded.original_span(start, end))

        text, back = decoded.text, through
        yield text, back


# --- confirmations ------------------------------------------------------------------------

_WORDS_ONLY = re.compile(r"[-_.]*(?:[A-Za-z]+|[0-9]+)(?:[-_.]+(?:[A-Za-z]+|[0-9]+))*[-_.]*")
_DIGIT = re.compile(r"[0-9]")


def _not_words(value: str) -> bool:
    """A body made only of words and numbers joined by - _ . is text, not a key."""
    return _WORDS_ONLY.fullmatch(value) is None


def _has_digit(value: str) -> bool:
    return _DIGIT.search(value) is not None


def _always(_value: str) -> bool:
    return True


def _aws_access_key_id(value: str) -> bool:
    # AKIA is never the start of a word; ASIA is (ASIAPACIFICMARKETS), and so is anything once
    # lower-cased, so those need a digit of the key's alphabet.
    if value.startswith("AKIA") and value.isupper():
        return True
    return _has_digit(value)


def _placeholder(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value) is not None


_PLACEHOLDER = re.compile(
    r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|<[^<>]*>|\{\{[^{}]*\}\}|%[A-Za-z_][A-Za-z0-9_]*%|[*x.]+",
    re.IGNORECASE,
)
_SYMBOL = re.compile(r"[^A-Za-z_]")


_VALUE_END = re.compile(r"[\s&\"'<>;,]")


def _password_value(value: str) -> bool:
    # A digit or a symbol (anything but a letter or an underscore: YOUR_CLIENT_SECRET is a
    # placeholder, hunter2 is not), and not a template placeholder.
    if "%" in value:
        # Judged as the site reads it: `%24DB_PASSWORD%20docs` is `$DB_PASSWORD` and a word
        # (the decoded reading finds a real password on its own).
        value = _VALUE_END.split(unquote(value))[0]
    if not value or value == MASK or _placeholder(value):
        return False
    return _SYMBOL.search(value) is not None


def _basic_credentials(value: str) -> bool:
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return False
    user, colon, _password = text.partition(":")
    return bool(colon) and bool(user) and text.isprintable()


_HOST_PORT = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


def _url_password(value: str, user: str) -> bool:
    if value == MASK:
        return False
    # https://host.example:8080@mirror/ is a host and a port in the user part (an old trick to
    # disguise a destination), not a password; the fetch policy refuses it on its own.
    return not (value.isdigit() and len(value) <= 5 and _HOST_PORT.fullmatch(user) is not None)


# --- the patterns -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Pattern:
    kind: SecretKind
    regex: re.Pattern[str]
    # The group that holds the credential (0: the whole match).
    group: int | str = 0
    confirm: Callable[[str], bool] = _always


_B64URL = r"[A-Za-z0-9_-]"
_END = r"(?![A-Za-z0-9_-])"
_START = r"(?<![A-Za-z0-9_-])"
_I = re.IGNORECASE

_PATTERNS: tuple[_Pattern, ...] = (
    _Pattern(
        kind=SecretKind.AWS_ACCESS_KEY_ID,
        # AKIA long-term, ASIA temporary (STS), ABIA an STS service bearer token, ACCA a
        # context-specific credential: each 4 + 16 characters of base32.
        regex=re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])", _I),
        confirm=_aws_access_key_id,
    ),
    _Pattern(
        kind=SecretKind.AWS_SECRET_ACCESS_KEY,
        regex=re.compile(
            r"aws_?secret_?access_?key[\"']?\s*[=:]\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
            _I,
        ),
        group="v",
        confirm=_has_digit,
    ),
    _Pattern(
        kind=SecretKind.GITHUB_TOKEN,
        regex=re.compile(
            r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}(?![A-Za-z0-9])", _I
        ),
    ),
    _Pattern(
        kind=SecretKind.GITHUB_TOKEN,
        regex=re.compile(r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])", _I),
    ),
    # A classic token that a space broke in two (a wrapped line): the two pieces together
    # have the length of the format.
    _Pattern(
        kind=SecretKind.GITHUB_TOKEN,
        regex=re.compile(
            r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{1,35} [A-Za-z0-9]{1,35}(?![A-Za-z0-9])", _I
        ),
        confirm=lambda v: len(v) == 4 + 36 + 1,
    ),
    _Pattern(
        kind=SecretKind.GITLAB_TOKEN,
        # Every gl…- prefix GitLab issues (personal, deploy, runner, trigger, CI job, OAuth
        # application, SCIM, feed, incoming mail, agent, feature-flag client), at least 20
        # characters, and the routable form (GitLab 17): `.`, an optional `01.`, and 9
        # characters of base36 checksum after the payload.
        regex=re.compile(
            _START
            + r"gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-"
            + _B64URL
            + r"{20,}(?:(?:\.01)?\.[0-9a-z]{9})?"
            + _END,
            _I,
        ),
        confirm=lambda v: _not_words(v.split("-", 1)[1]),
    ),
    # The legacy runner registration token: a fixed prefix and 20 characters.
    _Pattern(
        kind=SecretKind.GITLAB_TOKEN,
        regex=re.compile(_START + r"GR1348941" + _B64URL + r"{20}" + _END, _I),
        confirm=lambda v: _not_words(v[9:]),
    ),
    _Pattern(
        kind=SecretKind.NPM_TOKEN,
        regex=re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", _I),
    ),
    _Pattern(
        kind=SecretKind.HUGGING_FACE_TOKEN,
        # User access tokens (hf_) and organization API tokens (api_org_), 34 characters.
        regex=re.compile(r"(?<![A-Za-z0-9_])(?:hf|api_org)_[A-Za-z0-9]{34}(?![A-Za-z0-9])", _I),
    ),
    _Pattern(
        kind=SecretKind.SLACK_TOKEN,
        # Bot, user and legacy tokens (a team number first), and app-level tokens.
        regex=re.compile(
            r"(?<![A-Za-z0-9])(?:xox[abposre]-[0-9]{6,}-[A-Za-z0-9-]{10,}"
            r"|xapp-[0-9]-[A-Za-z0-9]{8,}-[0-9]{6,}-[A-Za-z0-9]{32,})(?![A-Za-z0-9-])",
            _I,
        ),
    ),
    _Pattern(
        kind=SecretKind.SLACK_TOKEN,
        # Configuration and rotating tokens: the access token `xoxe.xoxp-1-` or
        # `xoxe.xoxb-1-` and the refresh token `xoxe-1-`, each with a base64 body of about
        # 150 characters.
        regex=re.compile(
            r"(?<![A-Za-z0-9])(?:xoxe\.xox[bp]|xoxe)-[0-9]-[A-Za-z0-9]{120,200}(?![A-Za-z0-9-])",
            _I,
        ),
        confirm=_has_digit,
    ),
    _Pattern(
        kind=SecretKind.SLACK_TOKEN,
        # Workspace-app tokens: `xoxa-2-` and a body of numbers and a hexadecimal secret.
        regex=re.compile(r"(?<![A-Za-z0-9])xoxa-2-[A-Za-z0-9-]{20,}(?![A-Za-z0-9-])", _I),
        confirm=lambda v: _not_words(v[7:]),
    ),
    _Pattern(
        kind=SecretKind.STRIPE_KEY,
        # Secret (sk_) and restricted (rk_) keys in every mode Stripe issues.
        regex=re.compile(
            r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{24,247}(?![A-Za-z0-9])",
            _I,
        ),
        confirm=_has_digit,
    ),
    _Pattern(
        kind=SecretKind.STRIPE_KEY,
        # A webhook endpoint's signing secret: whsec_ and 32 base64 characters or more.
        regex=re.compile(r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9+/]{32,}=*(?![A-Za-z0-9+/=])", _I),
        confirm=_has_digit,
    ),
    _Pattern(
        kind=SecretKind.GOOGLE_API_KEY,
        regex=re.compile(_START + r"AIza" + _B64URL + r"{35}" + _END, _I),
        confirm=lambda v: _not_words(v[4:]),
    ),
    _Pattern(
        kind=SecretKind.ANTHROPIC_KEY,
        regex=re.compile(_START + r"sk-ant-[a-z]+[0-9]{2}-" + _B64URL + r"{80,120}" + _END, _I),
    ),
    # OpenAI: the legacy 48-character key, and project, service-account and admin keys.
    _Pattern(
        kind=SecretKind.OPENAI_KEY,
        regex=re.compile(
            _START
            + r"sk-(?:[A-Za-z0-9]{48}(?![A-Za-z0-9_-])|(?:proj|svcacct|admin|None)-"
            + _B64URL
            + r"{40,})"
            + _END,
            _I,
        ),
        confirm=lambda v: _has_digit(v) and _not_words(v[3:]),
    ),
    _Pattern(
        kind=SecretKind.SENDGRID_KEY,
        regex=re.compile(_START + r"SG\." + _B64URL + r"{22}\." + _B64URL + r"{43}" + _END, _I),
    ),
    _Pattern(
        kind=SecretKind.TELEGRAM_BOT_TOKEN,
        # Also in the Bot API's path form, right after `bot`: /bot<id>:<secret>/getMe.
        regex=re.compile(
            r"(?:(?<=[Bb][Oo][Tt])|(?<![A-Za-z0-9]))[0-9]{8,10}:" + _B64URL + r"{35}" + _END
        ),
        confirm=lambda v: _not_words(v.split(":", 1)[1]),
    ),
    # Twilio API key and account SIDs. Case matters: a lower-cased "ac" and 32 hex digits is
    # any hexadecimal hash.
    _Pattern(
        kind=SecretKind.TWILIO_KEY,
        regex=re.compile(r"(?<![A-Za-z0-9])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])"),
        confirm=_has_digit,
    ),
    _Pattern(
        kind=SecretKind.JSON_WEB_TOKEN,
        regex=re.compile(
            _START + r"eyJ" + _B64URL + r"{8,}\.eyJ" + _B64URL + r"{8,}\." + _B64URL + r"*" + _END,
            _I,
        ),
    ),
    _Pattern(
        kind=SecretKind.BEARER_TOKEN,
        regex=re.compile(
            r"(?<![A-Za-z0-9])bearer(?:[ \t]+|%20|\+)"
            r"(?P<v>[A-Za-z0-9._~+/-]{20,}=*)(?![A-Za-z0-9._~+/=-])",
            _I,
        ),
        group="v",
        confirm=lambda v: _has_digit(v) and _not_words(v),
    ),
    _Pattern(
        kind=SecretKind.BASIC_AUTH,
        regex=re.compile(
            r"authorization[\"']?\s*[:=]\s*[\"']?basic(?:[ \t]+|%20|\+)"
            r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
            _I,
        ),
        group="v",
        confirm=_basic_credentials,
    ),
    _Pattern(
        kind=SecretKind.AZURE_ACCOUNT_KEY,
        regex=re.compile(r"accountkey\s*=\s*(?P<v>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])", _I),
        group="v",
    ),
    _Pattern(
        kind=SecretKind.PRIVATE_KEY,
        regex=re.compile(
            # The armour line, optional header lines (Proc-Type: ...), then the body up to the
            # closing line when there is one, else the first run of base64.
            r"-----BEGIN[ A-Z0-9]{0,20} PRIVATE KEY(?: BLOCK)?-----\s*"
            r"(?:[A-Za-z-]+:[^\r\n]*\r?\n\s*)*[A-Za-z0-9+/=]{32,}"
            r"(?:[A-Za-z0-9+/=\s]*?-----END[ A-Z0-9]{0,20} PRIVATE KEY(?: BLOCK)?-----"
            r"|[A-Za-z0-9+/=]*)",
            _I,
        ),
    ),
)

# user:password in a URL; the confirmation needs both parts, so it is written apart. The
# match starts at "://" after a scheme's last character (RFC 3986: a letter, digit, "+", "-"
# or "."), whatever comes before the scheme: "1.https://…" carries its password too. Not
# from the scheme's first letter: tried at every letter of a long run of them, that was
# quadratic (5 s on 32,000 letters); each "://" is tried once, and its parts end at the
# next "/", so the search is linear.
_URL_USERINFO = re.compile(
    r"(?<=[A-Za-z0-9+.-])://(?P<user>[^\s/?#@:\[\]]+):(?P<password>[^\s/?#@]+)@(?=[^\s/?#@])",
    _I,
)
_PASSWORD_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9])(?:password|passwd|client_secret|secret)\s*=\s*(?:\"(?P<q>[^\"\s]+)\"|'(?P<s>[^'\s]+)'|(?P<v>[^\s&\"'<>;,]+))",
    _I,
)


def _raw_findings(view: str) -> Iterator[tuple[SecretKind, int, int]]:
    for pattern in _PATTERNS:
        for match in pattern.regex.finditer(view):
            value = match.group(pattern.group)
            if pattern.confirm(value):
                yield pattern.kind, match.start(pattern.group), match.end(pattern.group)
    for match in _URL_USERINFO.finditer(view):
        if _url_password(match.group("password"), match.group("user")):
            yield SecretKind.URL_PASSWORD, match.start("password"), match.end("password")
    for match in _PASSWORD_ASSIGNMENT.finditer(view):
        name = next(g for g in ("q", "s", "v") if match.group(g) is not None)
        if _password_value(match.group(name)):
            yield SecretKind.PASSWORD_ASSIGNMENT, match.start(name), match.end(name)


def find_secrets(text: str) -> tuple[SecretFinding, ...]:
    """Every credential in the text, ordered by position; overlapping matches count once.

    Of two overlapping matches the one that starts first is kept (the longer on a tie), so
    that masking the findings removes every credential.
    """
    raw: list[tuple[SecretKind, int, int]] = []
    for reading, back in _readings(text):
        view = _View(reading)
        for kind, start, end in _raw_findings(view.text):
            raw.append((kind, *back(*view.original_span(start, end))))
    raw.sort(key=lambda f: (f[1], -f[2]))
    findings: list[SecretFinding] = []
    covered_to = -1
    for kind, start, end in raw:
        if start < covered_to:
            continue
        covered_to = end
        findings.append(SecretFinding(kind=kind, position=start, start=start, end=end))
    return tuple(findings)


def find_secret(text: str) -> SecretFinding | None:
    """The first credential in the text, or None."""
    findings = find_secrets(text)
    return findings[0] if findings else None


_MAX_MASK_PASSES = 8


def mask_secrets(text: str) -> tuple[str, int]:
    """Replace each credential by MASK; return the text and how many were masked."""
    count = 0
    for _ in range(_MAX_MASK_PASSES):
        findings = find_secrets(text)
        if not findings:
            break
        pieces: list[str] = []
        at = 0
        for finding in findings:
            pieces.append(text[at : finding.start])
            pieces.append(MASK)
            at = finding.end
        pieces.append(text[at:])
        text = "".join(pieces)
        count += len(findings)
    return text, count
