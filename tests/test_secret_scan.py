"""The secret check: credential formats, ordinary text, positions, masking (REQ-PRIV-002).

Every credential here is synthetic: built at run time from a seeded generator in the shape
of the real format, so no key, real or fake, is written in the source.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.model import SecretKind
from rypsok.core.secret_scan import MASK, SecretFinding, find_secret, find_secrets, mask_secrets

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
BASE32 = string.ascii_uppercase + "234567"


def _body(rng: random.Random, alphabet: str, n: int, digits: str = string.digits) -> str:
    """n characters of the alphabet, with at least one digit and one letter of each case
    where the alphabet has them (as a random key of that length has, near certainly)."""
    chars = [rng.choice(alphabet) for _ in range(n)]
    must = [
        d
        for d in (digits, string.ascii_lowercase, string.ascii_uppercase)
        if set(d) & set(alphabet)
    ]
    for i, pool in enumerate(must):
        chars[(i * 7 + 3) % n] = rng.choice(sorted(set(pool) & set(alphabet)))
    return "".join(chars)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# Each builder returns the credential text and the span of the part the check reports
# (the value, for the kinds that are recognized by a name in front of it).
Builder = Callable[[random.Random], tuple[str, int, int]]


def _named(name: str, value: str, after: str = "") -> tuple[str, int, int]:
    return name + value + after, len(name), len(name) + len(value)


def _whole(credential: str) -> tuple[str, int, int]:
    return credential, 0, len(credential)


def _github_classic(letter: str) -> Builder:
    return lambda r: _whole("gh" + letter + "_" + _body(r, ALNUM, 36))


DIGITS = string.digits


BUILDERS: list[tuple[SecretKind, Builder]] = [
    (SecretKind.AWS_ACCESS_KEY_ID, lambda r: _whole("AK" + "IA" + _body(r, BASE32, 16, "234567"))),
    (SecretKind.AWS_ACCESS_KEY_ID, lambda r: _whole("AS" + "IA" + _body(r, BASE32, 16, "234567"))),
    (
        SecretKind.AWS_SECRET_ACCESS_KEY,
        lambda r: _named("aws_secret_access_key=", _body(r, B64, 40)),
    ),
    (
        SecretKind.AWS_SECRET_ACCESS_KEY,
        lambda r: _named("AWS_SECRET_ACCESS_KEY = ", _body(r, B64, 40)),
    ),
    *((SecretKind.GITHUB_TOKEN, _github_classic(c)) for c in "pousr"),
    (
        SecretKind.GITHUB_TOKEN,
        lambda r: _whole("github" + "_pat_" + _body(r, ALNUM, 22) + "_" + _body(r, ALNUM, 59)),
    ),
    (SecretKind.GITLAB_TOKEN, lambda r: _whole("gl" + "pat-" + _body(r, B64URL, 20))),
    (SecretKind.NPM_TOKEN, lambda r: _whole("np" + "m_" + _body(r, ALNUM, 36))),
    (SecretKind.HUGGING_FACE_TOKEN, lambda r: _whole("h" + "f_" + _body(r, ALNUM, 34))),
    (
        SecretKind.SLACK_TOKEN,
        lambda r: _whole(
            "xo"
            + "xb-"
            + _body(r, DIGITS, 11)
            + "-"
            + _body(r, DIGITS, 12)
            + "-"
            + _body(r, ALNUM, 24)
        ),
    ),
    (
        SecretKind.SLACK_TOKEN,
        lambda r: _whole(
            "xo"
            + "xp-"
            + _body(r, DIGITS, 11)
            + "-"
            + _body(r, DIGITS, 12)
            + "-"
            + _body(r, DIGITS, 13)
            + "-"
            + _body(r, HEX, 32)
        ),
    ),
    (
        SecretKind.SLACK_TOKEN,
        lambda r: _whole(
            "xa"
            + "pp-1-A"
            + _body(r, string.ascii_uppercase + DIGITS, 10)
            + "-"
            + _body(r, DIGITS, 13)
            + "-"
            + _body(r, HEX, 64)
        ),
    ),
    (SecretKind.STRIPE_KEY, lambda r: _whole("sk" + "_live_" + _body(r, ALNUM, 24))),
    (SecretKind.STRIPE_KEY, lambda r: _whole("rk" + "_test_" + _body(r, ALNUM, 99))),
    (SecretKind.GOOGLE_API_KEY, lambda r: _whole("AI" + "za" + _body(r, B64URL, 35))),
    (SecretKind.OPENAI_KEY, lambda r: _whole("sk" + "-" + _body(r, ALNUM, 48))),
    (SecretKind.OPENAI_KEY, lambda r: _whole("sk" + "-proj-" + _body(r, B64URL, 156))),
    (
        SecretKind.ANTHROPIC_KEY,
        lambda r: _whole("sk" + "-ant-api03-" + _body(r, B64URL, 93) + "AA"),
    ),
    (
        SecretKind.SENDGRID_KEY,
        lambda r: _whole("S" + "G." + _body(r, B64URL, 22) + "." + _body(r, B64URL, 43)),
    ),
    (
        SecretKind.TELEGRAM_BOT_TOKEN,
        lambda r: _whole(_body(r, DIGITS, 10) + ":AA" + _body(r, B64URL, 33)),
    ),
    (SecretKind.TWILIO_KEY, lambda r: _whole("S" + "K" + _body(r, HEX, 32))),
    (SecretKind.TWILIO_KEY, lambda r: _whole("A" + "C" + _body(r, HEX, 32))),
    (
        SecretKind.JSON_WEB_TOKEN,
        lambda r: _whole(
            _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
            + "."
            + _b64url(json.dumps({"sub": str(r.randrange(10**9)), "iat": 1}).encode())
            + "."
            + _body(r, B64URL, 43)
        ),
    ),
    (
        SecretKind.BEARER_TOKEN,
        lambda r: _named("Authorization: Bearer ", _body(r, B64URL + ".~", 40)),
    ),
    (SecretKind.BEARER_TOKEN, lambda r: _named("bearer%20", _body(r, ALNUM, 32))),
    (
        SecretKind.BASIC_AUTH,
        lambda r: _named(
            "Authorization: Basic ",
            base64.b64encode(f"user{r.randrange(99)}:{_body(r, ALNUM, 12)}".encode()).decode(),
        ),
    ),
    (
        SecretKind.AZURE_ACCOUNT_KEY,
        lambda r: _named(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
            base64.b64encode(r.randbytes(64)).decode(),
        ),
    ),
    (
        SecretKind.PRIVATE_KEY,
        lambda r: _whole(
            "-----BEGIN "
            + "PRIVATE KEY-----\n"
            + base64.b64encode(r.randbytes(48)).decode()
            + "\n"
            + base64.b64encode(r.randbytes(30)).decode()
            + "\n-----END PRIVATE KEY-----"
        ),
    ),
    (
        SecretKind.PRIVATE_KEY,
        lambda r: _whole(
            "-----BEGIN " + "RSA PRIVATE KEY----- " + base64.b64encode(r.randbytes(60)).decode()
        ),
    ),
    (
        SecretKind.URL_PASSWORD,
        lambda r: _named("https://alice:", "s3cr" + _body(r, ALNUM, 6), "@example.org/x?y=1"),
    ),
    (
        SecretKind.URL_PASSWORD,
        lambda r: _named("ftp://bob:", "pw!" + _body(r, ALNUM, 5), "@[2001:db8::1]/"),
    ),
    (SecretKind.PASSWORD_ASSIGNMENT, lambda r: _named("password=", "hunter" + _body(r, DIGITS, 2))),
    (SecretKind.PASSWORD_ASSIGNMENT, lambda r: _named("passwd=", "p@ss" + _body(r, ALNUM, 4))),
    (
        SecretKind.PASSWORD_ASSIGNMENT,
        lambda r: _named("secret = '", "x-y!" + _body(r, ALNUM, 4), "'"),
    ),
    (SecretKind.PASSWORD_ASSIGNMENT, lambda r: _named("client_secret=", "ab" + _body(r, ALNUM, 8))),
]

# A lower-cased credential is found for every kind but these two: a lower-cased Twilio id is
# any hexadecimal hash that starts with "ac", and a lower-cased Basic value no longer decodes
# to user:password, which is what confirms it.
NOT_FOUND_LOWER_CASED = {SecretKind.TWILIO_KEY, SecretKind.BASIC_AUTH}

ORDINARY = [
    # The book's own list of ordinary text near the shapes.
    "sk-learn random forest tutorial",
    "sk-learn-style hyphenated-words-that-go-on-and-on-for-a-long-while-indeed",
    "bearer and a phrase",
    "the bearer of bad news",
    "ASIAPACIFICCORRIDORS",
    "ASIA INTERCONTINENTALIZATION",
    "host.example:8080@mirror",
    "password=configuration",
    # Realistic queries, code-ish ones included.
    "rust programming language",
    "std::vec::Vec<T> - Rust",
    "how to rotate an AWS access key AKIA prefix meaning",
    "what does the ghp_ prefix of a GitHub token mean",
    "glpat- token expiry gitlab",
    "npm_ token automation publish",
    "hf_ token huggingface-cli login",
    "xoxb- slack bot token scopes",
    "stripe sk_live_ vs sk_test_ keys",
    "AIza google api key restrictions",
    "openai sk-proj- key rotation best practices",
    "sk-ant- anthropic console keys",
    "SG. sendgrid api key format",
    "telegram bot token format 123456:ABC",
    "twilio account SID AC vs API key SK",
    "jwt eyJ header decoding explained",
    "Bearer token vs API key",
    "Bearer%20token header encoding",
    'Authorization: Basic realm="example"',
    "Authorization: Basic authentication explained",
    "AccountKey= azure storage connection string",
    "-----BEGIN PRIVATE KEY----- what is PEM",
    "password=",
    "password=$DB_PASSWORD in docker compose",
    "client_secret=YOUR_CLIENT_SECRET oauth",
    "secret=<your-secret> placeholder",
    "set password=**** in the config",
    "passwd= field in /etc/shadow",
    "https://user@host.example/ credentials",
    "https://example.org/search?q=rust&page=2",
    "https://en.wikipedia.org/wiki/Rust_(programming_language)",
    "git clone git@github.com:rust-lang/rust.git",
    "postgres://localhost:5432/mydb",
    "mailto:alice@example.org",
    "http://[::1]:8080/health",
    "meeting at 10:30, ratio 16:9",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "base64 SGVsbG8gV29ybGQ= decode",
    "python requests auth=('user', 'pass') example",
    "export AWS_REGION=eu-west-1",
    "curl -H 'Accept: application/json' https://api.example.org",
    "skeleton-key-of-the-kingdom-and-other-stories-volume-two",
    "AKIA",
    "eyJ",
    "1234567890:short",
    "café crème brûlée recipe",
    "東京 天気 明日",
    "what is the secret=sauce of success",
    "ghp_ followed by thirty six characters",
    # Shapes of the right length that are words: the "not just words" confirmation.
    "sk-proj-management-best-practices-for-large-teams-in-2024",
    "Bearer of-the-year-2024-award-winners-list",
    "glpat-token-rotation-policy-and-guide",
    "AIza-is-the-prefix-of-google-api-keys-x",
    "20240101:the-quick-brown-fox-jumps-over-dogs",
    # A host and a port in the user part is a disguised destination, not a password.
    "https://host.example:8080@mirror.example/",
    # A 40-letter placeholder where an AWS secret access key goes.
    "aws_secret_access_key=ReplaceWithYourOwnSecretAccessKeyValueOk",
    # A Basic value that decodes, but not to user:password ("Hello World").
    "Authorization: Basic SGVsbG8gV29ybGQ=",
]

_SEED = 20261103


def _credentials() -> list[tuple[SecretKind, str, int, int]]:
    rng = random.Random(_SEED)
    return [(kind, *build(rng)) for kind, build in BUILDERS for _ in range(3)]


def test_req_priv_002_every_kind_of_the_book_has_a_credential_in_the_corpus() -> None:
    assert {kind for kind, _ in BUILDERS} == set(SecretKind)


@pytest.mark.parametrize("text", ORDINARY)
def test_req_priv_002_the_corpus_of_ordinary_text_passes(text: str) -> None:
    assert find_secrets(text) == ()
    assert find_secret(text) is None
    assert mask_secrets(text) == (text, 0)


CASES = ("kind", "credential", "start", "end")


@pytest.mark.parametrize(CASES, _credentials())
def test_req_priv_002_the_corpus_of_credentials_is_refused(
    kind: SecretKind, credential: str, start: int, end: int
) -> None:
    query = "please look up " + credential + " for me"
    findings = find_secrets(query)
    assert [(f.kind, f.position, f.start, f.end) for f in findings] == [
        (kind, 15 + start, 15 + start, 15 + end)
    ]
    # The finding carries no part of the value.
    assert credential[start:end] not in repr(findings[0])


@pytest.mark.parametrize(CASES, _credentials()[::3])
def test_req_priv_002_a_lower_cased_credential_is_found(
    kind: SecretKind, credential: str, start: int, end: int
) -> None:
    finding = find_secret("q " + credential.lower())
    if kind in NOT_FOUND_LOWER_CASED:
        assert finding is None
    else:
        assert finding is not None
        assert (finding.kind, finding.position, finding.end) == (kind, 2 + start, 2 + end)


@pytest.mark.parametrize(CASES, _credentials()[::3])
@pytest.mark.parametrize("invisible", ["\u200b", "\u00ad", "\ufeff", "\u2060", "\U000e0041"])
def test_req_priv_002_a_credential_with_an_invisible_character_inside_is_found(
    kind: SecretKind, credential: str, start: int, end: int, invisible: str
) -> None:
    # The invisible character goes into the middle of the value; the reported position and
    # span are those of the text as given.
    cut = (start + end) // 2
    text = "q " + credential[:cut] + invisible + credential[cut:]
    finding = find_secret(text)
    assert finding is not None
    assert (finding.kind, finding.position, finding.end) == (kind, 2 + start, 3 + end)


def test_req_priv_002_an_invisible_character_before_the_credential_moves_its_position() -> None:
    token = "gh" + "p_" + _body(random.Random(1), ALNUM, 36)
    finding = find_secret("\u200b\u200b " + token)
    assert finding == SecretFinding(
        kind=SecretKind.GITHUB_TOKEN, position=3, start=3, end=3 + len(token)
    )


def test_req_priv_002_a_github_token_wrapped_by_a_space_is_found() -> None:
    token = "gh" + "p_" + _body(random.Random(2), ALNUM, 36)
    for cut in (6, 20, 39):
        wrapped = token[:cut] + " " + token[cut:]
        finding = find_secret("token " + wrapped + " end")
        assert finding is not None
        assert (finding.kind, finding.start, finding.end) == (
            SecretKind.GITHUB_TOKEN, 6, 6 + len(wrapped)
        )  # fmt: skip
    # Around spaces, the token is found as well.
    assert find_secret(" " + token + " ") == SecretFinding(
        kind=SecretKind.GITHUB_TOKEN, position=1, start=1, end=1 + len(token)
    )
    # Two pieces whose lengths do not add up to the format are words, not a token.
    assert find_secret(token[:20] + " " + token[20:30]) is None


def test_req_priv_002_the_position_counts_scalar_values_from_zero() -> None:
    key = "AK" + "IA" + _body(random.Random(3), BASE32, 16, "234567")
    # Four astral characters before: four positions, not eight UTF-16 units.
    finding = find_secret("\U0001f600\U0001f600\U0001f600\U0001f600" + key)
    assert finding is not None
    assert finding.position == 4
    assert find_secret(key) == SecretFinding(
        kind=SecretKind.AWS_ACCESS_KEY_ID, position=0, start=0, end=20
    )


def test_req_priv_002_findings_are_ordered_and_find_secret_returns_the_first() -> None:
    rng = random.Random(4)
    npm = "np" + "m_" + _body(rng, ALNUM, 36)
    aws = "AK" + "IA" + _body(rng, BASE32, 16, "234567")
    text = f"first {npm} then password=abc123! and {aws}"
    findings = find_secrets(text)
    assert [f.kind for f in findings] == [
        SecretKind.NPM_TOKEN,
        SecretKind.PASSWORD_ASSIGNMENT,
        SecretKind.AWS_ACCESS_KEY_ID,
    ]
    assert [f.position for f in findings] == [6, text.index("abc123!"), text.index(aws)]
    assert find_secret(text) == findings[0]


def test_req_priv_002_overlapping_shapes_are_one_finding() -> None:
    jwt = _credentials()[[k for k, _ in BUILDERS].index(SecretKind.JSON_WEB_TOKEN) * 3][1]
    findings = find_secrets("Authorization: Bearer " + jwt)
    assert len(findings) == 1
    assert findings[0].position == len("Authorization: Bearer ")


def test_req_priv_002_mask_replaces_each_credential_and_counts() -> None:
    rng = random.Random(5)
    npm = "np" + "m_" + _body(rng, ALNUM, 36)
    text = f"a {npm} b https://alice:pa55word@example.org/ c"
    masked, count = mask_secrets(text)
    assert masked == f"a {MASK} b https://alice:{MASK}@example.org/ c"
    assert count == 2
    assert find_secrets(masked) == ()


# --- properties ---------------------------------------------------------------------------

# The words of the ordinary corpus, except those that a neighbour can turn into a real
# credential: "password=" then "sk-learn" is a password given in the text, and "Bearer" then
# a hexadecimal hash is a bearer token.
_WORDS = st.lists(
    st.sampled_from(
        [
            w
            for line in ORDINARY
            for w in line.split()
            if "=" not in w and ":" not in w and w.lower() not in ("bearer", "basic")
        ]
        + ["", ",", "é", "東京"]
    ),
    max_size=8,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(_WORDS, _WORDS, st.integers(min_value=0, max_value=len(BUILDERS) - 1), st.randoms())
def test_req_priv_002_a_credential_in_ordinary_text_is_found_at_its_position(
    before: str, after: str, which: int, rnd: random.Random
) -> None:
    kind, build = BUILDERS[which]
    credential, start, _end = build(random.Random(rnd.random()))
    text = before + " " + credential + " " + after
    finding = find_secret(text)
    assert finding is not None
    assert finding.kind == kind
    assert finding.position == len(before) + 1 + start


@settings(max_examples=300, deadline=None)
@given(_WORDS)
def test_req_priv_002_ordinary_words_in_any_order_pass(text: str) -> None:
    assert find_secrets(text) == ()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            _WORDS,
            st.integers(min_value=0, max_value=len(BUILDERS) - 1).map(
                lambda i: BUILDERS[i][1](random.Random(i))[0]
            ),
            st.text(max_size=12),
        ),
        max_size=6,
    ).map(" ".join)
)
def test_req_priv_002_masking_removes_every_finding(text: str) -> None:
    masked, count = mask_secrets(text)
    assert find_secrets(masked) == ()
    assert (count == 0) == (find_secrets(text) == ())
