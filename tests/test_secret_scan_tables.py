"""The secret check, table by table (REQ-PRIV-002): one test per prefix, per separator, per
length end and per invisible range end, so that dropping any entry of a pattern fails a test.

Written against the survivors of tools/mutation. Every credential is synthetic, built at run
time in the shape of the real format.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from rypsok.core.model import SecretKind
from rypsok.core.secret_scan import MASK, find_secret, find_secrets, mask_secrets

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
RNG_SEED = 7


def _body(n: int, alphabet: str = ALNUM, seed: int = RNG_SEED) -> str:
    """n characters with a digit, a lower-case and an upper-case letter where possible."""
    rng = random.Random(f"{seed}:{n}:{alphabet}")
    chars = [rng.choice(alphabet) for _ in range(n)]
    for i, pool in enumerate((string.digits, string.ascii_lowercase, string.ascii_uppercase)):
        usable = sorted(set(pool) & set(alphabet))
        if usable and n > 3:
            chars[(i * 5 + 1) % n] = rng.choice(usable)
    return "".join(chars)


def _b64url_body(n: int) -> str:
    # A body of the base64url alphabet with both of its symbols in it.
    body = _body(n, ALNUM)
    return body[:3] + "-" + body[4:8] + "_" + body[9:]


def _kinds(text: str) -> list[tuple[SecretKind, int, int]]:
    return [(f.kind, f.start, f.end) for f in find_secrets(text)]


def _found_whole(text: str, kind: SecretKind) -> None:
    assert _kinds("q " + text + " z") == [(kind, 2, 2 + len(text))]


# --- prefixes ------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["pat", "dt", "rt", "ptt", "cbt", "oas", "soat", "ft", "imt"])
def test_req_priv_002_every_gitlab_prefix_is_found(prefix: str) -> None:
    _found_whole("gl" + prefix + "-" + _b64url_body(20), SecretKind.GITLAB_TOKEN)


def test_req_priv_002_a_gitlab_token_has_at_least_20_characters() -> None:
    assert find_secret("gl" + "pat-" + _body(19)) is None


@pytest.mark.parametrize("letter", "abposre")
def test_req_priv_002_every_slack_xox_letter_is_found(letter: str) -> None:
    token = "xo" + "x" + letter + "-" + _body(6, string.digits) + "-" + _body(10)
    _found_whole(token, SecretKind.SLACK_TOKEN)


def test_req_priv_002_slack_token_length_ends() -> None:
    assert find_secret("xo" + "xb-" + _body(5, string.digits) + "-" + _body(10)) is None
    assert find_secret("xo" + "xb-" + _body(6, string.digits) + "-" + _body(9)) is None
    # The last part may hold hyphens.
    _found_whole("xo" + "xb-" + _body(6, string.digits) + "-ab-" + _body(8), SecretKind.SLACK_TOKEN)
    app = "xa" + "pp-1-" + _body(8) + "-" + _body(6, string.digits) + "-" + _body(32)
    _found_whole(app, SecretKind.SLACK_TOKEN)
    short_app = "xa" + "pp-1-" + _body(7) + "-" + _body(6, string.digits) + "-" + _body(32)
    assert find_secret(short_app) is None
    assert (
        find_secret("xa" + "pp-1-" + _body(8) + "-" + _body(5, string.digits) + "-" + _body(32))
        is None
    )
    assert (
        find_secret("xa" + "pp-1-" + _body(8) + "-" + _body(6, string.digits) + "-" + _body(31))
        is None
    )


@pytest.mark.parametrize("prefix", ["sk_live_", "sk_test_", "rk_live_", "rk_test_"])
def test_req_priv_002_every_stripe_prefix_is_found(prefix: str) -> None:
    _found_whole(prefix + _body(24), SecretKind.STRIPE_KEY)


def test_req_priv_002_stripe_key_length_ends() -> None:
    _found_whole("sk" + "_live_" + _body(247), SecretKind.STRIPE_KEY)
    assert find_secret("sk" + "_live_" + _body(23)) is None
    assert find_secret("sk" + "_live_" + _body(248)) is None


@pytest.mark.parametrize("letter", "pousr")
def test_req_priv_002_github_token_length_is_exact(letter: str) -> None:
    assert find_secret("gh" + letter + "_" + _body(35)) is None
    assert find_secret("gh" + letter + "_" + _body(37)) is None
    assert find_secret("x" + "gh" + letter + "_" + _body(36)) is None
    assert find_secret("_" + "gh" + letter + "_" + _body(36)) is None


def test_req_priv_002_github_fine_grained_token_lengths() -> None:
    good = "github" + "_pat_" + _body(22) + "_" + _body(59)
    _found_whole(good, SecretKind.GITHUB_TOKEN)
    assert find_secret("github" + "_pat_" + _body(21) + "_" + _body(59)) is None
    assert find_secret("github" + "_pat_" + _body(22) + "_" + _body(58)) is None
    assert find_secret("github" + "_pat_" + _body(22) + "_" + _body(60)) is None
    assert find_secret("_" + good) is None


@pytest.mark.parametrize(("prefix", "n"), [("npm_", 36), ("hf_", 34)])
def test_req_priv_002_npm_and_hugging_face_lengths_are_exact(prefix: str, n: int) -> None:
    kind = SecretKind.NPM_TOKEN if prefix == "npm_" else SecretKind.HUGGING_FACE_TOKEN
    _found_whole(prefix + _body(n), kind)
    assert find_secret(prefix + _body(n - 1)) is None
    assert find_secret(prefix + _body(n + 1)) is None
    assert find_secret("_" + prefix + _body(n)) is None
    assert find_secret("x" + prefix + _body(n)) is None


@pytest.mark.parametrize("prefix", ["AKIA", "ASIA"])
def test_req_priv_002_aws_access_key_id_prefixes_and_length(prefix: str) -> None:
    body = _body(16, string.ascii_uppercase + "234567")
    _found_whole(prefix + body, SecretKind.AWS_ACCESS_KEY_ID)
    assert find_secret(prefix + body[:15]) is None
    assert find_secret(prefix + body + "A") is None
    assert find_secret("X" + prefix + body) is None
    assert find_secret("9" + prefix + body) is None


def test_req_priv_002_an_akia_id_without_a_digit_is_found() -> None:
    # AKIA never starts a word: an upper-case AKIA id is a key even with letters only.
    _found_whole("AK" + "IA" + "QWERTYUIOPASDFGH", SecretKind.AWS_ACCESS_KEY_ID)
    # ASIA does start words, so the same shape without a digit is text.
    assert find_secret("AS" + "IA" + "QWERTYUIOPASDFGH") is None
    # Lower-cased, AKIA loses its certainty too and needs a digit.
    assert find_secret(("AK" + "IA" + "QWERTYUIOPASDFGH").lower()) is None
    _found_whole(("AK" + "IA" + "QWERTYUIOPASDF23").lower(), SecretKind.AWS_ACCESS_KEY_ID)


@pytest.mark.parametrize("prefix", ["SK", "AC"])
def test_req_priv_002_twilio_prefixes_and_length(prefix: str) -> None:
    body = _body(32, "0123456789abcdef")
    _found_whole(prefix + body, SecretKind.TWILIO_KEY)
    assert find_secret(prefix + body[:31]) is None
    assert find_secret(prefix + body + "a") is None
    assert find_secret("x" + prefix + body) is None
    # Letters only: a hash, not a key.
    assert find_secret(prefix + "abcdef" * 5 + "ab") is None


@pytest.mark.parametrize("middle", ["proj-", "svcacct-", "admin-"])
def test_req_priv_002_every_openai_key_family_is_found(middle: str) -> None:
    _found_whole("sk-" + middle + _b64url_body(40), SecretKind.OPENAI_KEY)
    assert find_secret("sk-" + middle + _b64url_body(39)) is None


def test_req_priv_002_openai_legacy_key_length_is_exact() -> None:
    _found_whole("sk-" + _body(48), SecretKind.OPENAI_KEY)
    assert find_secret("sk-" + _body(47)) is None
    assert find_secret("sk-" + _body(49)) is None
    assert find_secret("sk-" + _body(48) + "-") is None


def test_req_priv_002_anthropic_key_length_ends() -> None:
    for n in (80, 120):
        _found_whole("sk-ant-api03-" + _b64url_body(n), SecretKind.ANTHROPIC_KEY)
    for n in (79, 121):
        assert find_secret("sk-ant-api03-" + _b64url_body(n)) is None
    # The version is two digits.
    assert find_secret("sk-ant-api3-" + _b64url_body(90)) is None


def test_req_priv_002_google_and_sendgrid_lengths_are_exact() -> None:
    _found_whole("AI" + "za" + _b64url_body(35), SecretKind.GOOGLE_API_KEY)
    assert find_secret("AI" + "za" + _b64url_body(34)) is None
    assert find_secret("AI" + "za" + _b64url_body(36)) is None
    sendgrid = "S" + "G." + _b64url_body(22) + "." + _b64url_body(43)
    _found_whole(sendgrid, SecretKind.SENDGRID_KEY)
    assert find_secret("S" + "G." + _b64url_body(21) + "." + _b64url_body(43)) is None
    assert find_secret("S" + "G." + _b64url_body(22) + "." + _b64url_body(42)) is None
    assert find_secret("S" + "G." + _b64url_body(22) + "." + _b64url_body(44)) is None


@pytest.mark.parametrize("digits", [8, 9, 10])
def test_req_priv_002_telegram_bot_ids_of_8_to_10_digits_are_found(digits: int) -> None:
    _found_whole(
        _body(digits, string.digits) + ":" + _b64url_body(35), SecretKind.TELEGRAM_BOT_TOKEN
    )


@pytest.mark.parametrize("digits", [7, 11])
def test_req_priv_002_telegram_bot_ids_outside_8_to_10_digits_are_not(digits: int) -> None:
    assert find_secret(_body(digits, string.digits) + ":" + _b64url_body(35)) is None


def test_req_priv_002_telegram_secret_length_is_exact() -> None:
    assert find_secret(_body(9, string.digits) + ":" + _b64url_body(34)) is None
    assert find_secret(_body(9, string.digits) + ":" + _b64url_body(36)) is None


def test_req_priv_002_json_web_token_with_both_symbols_is_found() -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    payload = base64.urlsafe_b64encode(b'{"sub":"1234567890"}').rstrip(b"=").decode()
    _found_whole(header + "." + payload + "." + _b64url_body(43), SecretKind.JSON_WEB_TOKEN)
    # An empty signature is still a token (an unsigned one).
    _found_whole(header + "." + payload + ".", SecretKind.JSON_WEB_TOKEN)
    assert find_secret("eyJ" + "abcdefg" + ".eyJ" + "abcdefgh" + ".") is None


# --- named values ----------------------------------------------------------------------------


@pytest.mark.parametrize("separator", [" ", "\t", "  ", " \t ", "%20", "+"])
def test_req_priv_002_every_bearer_separator_is_found(separator: str) -> None:
    value = _body(20, ALNUM + "._~+/-")
    findings = _kinds("Bearer" + separator + value)
    assert findings == [
        (SecretKind.BEARER_TOKEN, 6 + len(separator), 6 + len(separator) + len(value))
    ]


def test_req_priv_002_bearer_value_alphabet_and_length() -> None:
    # Every symbol of the token68 alphabet may be inside, and = padding at the end.
    value = "ab1." + "cd2_" + "ef3~" + "gh4+" + "ij5/" + "kl6-" + "mnop=="
    assert _kinds("bearer " + value) == [(SecretKind.BEARER_TOKEN, 7, 7 + len(value))]
    assert find_secret("bearer " + _body(19)) is None
    assert find_secret("xbearer " + _body(30)) is None
    assert find_secret("9bearer " + _body(30)) is None


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "head",
    [
        "Authorization: Basic ",
        "authorization=basic ",
        "Authorization = Basic ",
        '"Authorization": "Basic ',
        "'authorization':'basic ",
        "Authorization: Basic\t",
        "Authorization: Basic%20",
        "Authorization: Basic+",
    ],
)
def test_req_priv_002_every_basic_header_form_is_found(head: str) -> None:
    value = _basic("alice", "pw" + _body(9))
    assert _kinds(head + value) == [(SecretKind.BASIC_AUTH, len(head), len(head) + len(value))]


def test_req_priv_002_basic_values_with_slash_plus_and_padding_are_found() -> None:
    # Bytes chosen so that the base64 form holds "/" and "+"; one and two "=" of padding.
    for password in ("\xff\xfe?>", "??>>~", "ab?~"):
        value = _basic("bob", password)
        assert _kinds("Authorization: Basic " + value) == [
            (SecretKind.BASIC_AUTH, 21, 21 + len(value))
        ], value
    assert any(c in _basic("bob", "\xff\xfe?>") for c in "/+")
    # Seven characters is too short to be a credential.
    assert find_secret("Authorization: Basic " + base64.b64encode(b"a:bcd").decode()[:7]) is None


def test_req_priv_002_basic_value_must_decode_to_printable_user_and_password() -> None:
    for raw in (b":nouser", b"user-no-colon", b"us\x01er:pw", b"\xff\xfeuser:pw"):
        value = base64.b64encode(raw).decode()
        assert find_secret("Authorization: Basic " + value) is None, raw
    assert find_secret("Authorization: Basic " + "QUJD!!==") is None


@pytest.mark.parametrize("separator", ["=", ":", " = ", ' : "'])
def test_req_priv_002_aws_secret_access_key_separators(separator: str) -> None:
    value = _body(40, ALNUM + "/+")
    text = "aws_secret_access_key" + separator + value
    assert _kinds(text) == [(SecretKind.AWS_SECRET_ACCESS_KEY, len(text) - 40, len(text))]
    assert find_secret("aws_secret_access_key=" + _body(39, ALNUM + "/+")) is None
    assert find_secret("aws_secret_access_key=" + _body(41, ALNUM + "/+")) is None
    # Letters only: a placeholder of the right length.
    assert find_secret("awssecretaccesskey=" + "A" * 40) is None


def test_req_priv_002_azure_account_key_length_is_exact() -> None:
    value = base64.b64encode(random.Random(1).randbytes(64)).decode()
    assert len(value) == 88
    assert _kinds("AccountKey = " + value) == [(SecretKind.AZURE_ACCOUNT_KEY, 13, 101)]
    assert find_secret("AccountKey=" + value[:85] + "==") is None
    assert find_secret("AccountKey=" + "A" + value) is None


@pytest.mark.parametrize("name", ["password", "passwd", "client_secret", "secret", "PASSWORD"])
@pytest.mark.parametrize(("left", "right"), [("", ""), ('"', '"'), ("'", "'")])
def test_req_priv_002_every_password_name_and_quote_is_found(
    name: str, left: str, right: str
) -> None:
    text = f"{name} = {left}hunter2{right}; next"
    start = text.index("hunter2")
    assert _kinds(text) == [(SecretKind.PASSWORD_ASSIGNMENT, start, start + 7)]


def test_req_priv_002_a_password_value_stops_at_its_delimiters() -> None:
    for stop in "&\"'<>;, ":
        text = "password=pa55" + stop + "rest"
        assert _kinds(text) == [(SecretKind.PASSWORD_ASSIGNMENT, 9, 13)], stop
    # Glued to a word before, "password" is part of that word.
    assert find_secret("mypassword=hunter2") is None
    assert find_secret("1password=hunter2") is None


@pytest.mark.parametrize(
    "placeholder",
    [
        "${DB_PASSWORD}",
        "$DB_PASSWORD",
        "<password>",
        "{{ password }}",
        "%PASSWORD%",
        "****",
        "xxxx",
        "....",
    ],
)
def test_req_priv_002_every_placeholder_form_passes(placeholder: str) -> None:
    quoted = placeholder if " " not in placeholder else '"' + placeholder.replace(" ", "") + '"'
    assert find_secret("password=" + quoted) is None
    assert find_secret("password=" + MASK) is None


# --- URL user information ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "s3://user:pa55word@bucket/key",
        "postgres://admin:pa55word@db.internal:5432/app",
        "git+ssh://user:pa55word@host/repo",
        "HTTPS://user:pa55word@example.org/",
        "a.b-c+d://user:pa55word@host/",
    ],
)
def test_req_priv_002_a_password_in_any_scheme_is_found(url: str) -> None:
    start = url.index("pa55word")
    assert _kinds("see " + url) == [(SecretKind.URL_PASSWORD, 4 + start, 4 + start + 8)]


def test_req_priv_002_url_user_information_edges() -> None:
    # A port-like password after a host-like user is a disguised destination...
    assert find_secret("https://host.example:8080@mirror.example/") is None
    assert find_secret("https://host.example:65535@mirror.example/") is None
    # ...but six digits is no port, and a user that is no host name is a user.
    assert find_secret("https://host.example:123456@mirror.example/") is not None
    assert find_secret("https://alice:8080@mirror.example/") is not None
    # Nothing after "@" is not a URL with a host.
    assert find_secret("https://alice:pa55word@ ") is None
    # The scheme starts at a word boundary.
    assert find_secret("xhttps://alice:pa55word@host/") is not None
    assert find_secret("https://alice:" + MASK + "@host/") is None


# --- invisible and control characters -------------------------------------------------------

CONTROL_ENDS = [
    "\x00", "\x01", "\x07", "\x08", "\x0e", "\x0f", "\x10", "\x1b", "\x1c", "\x1f", "\x7f",
    "\x80", "\x84", "\x86", "\x9f",
]  # fmt: skip
INVISIBLE_ENDS = [
    "\u00ad", "\u034f", "\u0600", "\u0605", "\u061c", "\u06dd", "\u070f", "\u0890", "\u0891",
    "\u08e2", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u180b", "\u180f", "\u200b", "\u200f",
    "\u202a", "\u202e", "\u2060", "\u206f", "\u3164", "\ufdd0", "\ufdef", "\ufe00", "\ufe0f",
    "\ufeff", "\uffa0", "\ufff0", "\ufffb", "\U000110bd", "\U000110cd", "\U00013430",
    "\U0001343f", "\U0001bca0", "\U0001bca3", "\U0001d173", "\U0001d17a", "\U000e0000",
    "\U000e0fff", "\ufffe", "\uffff", "\U0001fffe", "\U0010ffff",
]  # fmt: skip


@pytest.mark.parametrize("char", CONTROL_ENDS + INVISIBLE_ENDS, ids=lambda c: f"U+{ord(c):04X}")
def test_req_priv_002_a_credential_split_by_any_invisible_or_control_character_is_found(
    char: str,
) -> None:
    token = "np" + "m_" + _body(36)
    text = "q " + token[:10] + char + token[10:] + " z"
    assert _kinds(text) == [(SecretKind.NPM_TOKEN, 2, 2 + len(token) + 1)]
    # Several of them, and one at each end of the token.
    text = char + token[:5] + char + char + token[5:] + char
    assert _kinds(text) == [(SecretKind.NPM_TOKEN, 1, 1 + len(token) + 2)]
    # Masking cuts the credential out with what hides inside it.
    assert mask_secrets("q " + token[:10] + char + token[10:]) == ("q " + MASK, 1)


@pytest.mark.parametrize("char", ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0"])
def test_req_priv_002_whitespace_splits_a_credential(char: str) -> None:
    token = "np" + "m_" + _body(36)
    assert find_secret(token[:10] + char + token[10:]) is None


# --- several credentials --------------------------------------------------------------------


def test_req_priv_002_every_credential_after_an_overlap_is_still_found() -> None:
    jwt_body = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    jwt = jwt_body + "." + jwt_body + "." + _b64url_body(20)
    npm = "np" + "m_" + _body(36)
    hf = "h" + "f_" + _body(34)
    # The bearer value and the JWT overlap (one finding, the JWT: the first pattern on a
    # tie); the two credentials after the overlap are found too.
    text = "Authorization: Bearer " + jwt + " then " + npm + " and " + hf
    assert _kinds(text) == [
        (SecretKind.JSON_WEB_TOKEN, 22, 22 + len(jwt)),
        (SecretKind.NPM_TOKEN, text.index(npm), text.index(npm) + len(npm)),
        (SecretKind.HUGGING_FACE_TOKEN, text.index(hf), text.index(hf) + len(hf)),
    ]
    masked, count = mask_secrets(text)
    assert masked == "Authorization: Bearer " + MASK + " then " + MASK + " and " + MASK
    assert count == 3


def test_req_priv_002_of_two_overlapping_matches_the_longer_is_kept_on_a_tie() -> None:
    # A GitHub classic token followed by a space and more letters matches the wrapped form
    # only when the lengths add up; here both forms start at 0 and the whole-token one is
    # the only one: a tie goes to the longer.
    token = "gh" + "p_" + _body(36)
    assert _kinds(token) == [(SecretKind.GITHUB_TOKEN, 0, 40)]


# --- the structural confirmations -----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "token-rotation-policy-and-guide",
        "TOKEN-ROTATION-POLICY-AND-GUIDE",
        "token_rotation_policy_and_guide",
        "2024-01-01-release-notes-here",
        "-leading-and-trailing-words-",
        "_leading_and_trailing_words_",
    ],
)
def test_req_priv_002_a_body_of_words_joined_by_separators_is_text(body: str) -> None:
    assert find_secret("gl" + "pat-" + body) is None
    # A digit inside a word makes it a key.
    if "o" in body.lower():
        assert find_secret("gl" + "pat-" + body.replace("o", "0", 1).replace("O", "0", 1))


@pytest.mark.parametrize(
    "value",
    [
        "of.the.year.2024.award.list",
        "of-the-year-2024-award-list",
        "of_the_year_2024_award_list",
        ".of.the.year.2024.award.list.",
        "-of-the-year-2024-award-list-",
        "_of_the_year_2024_award_list_",
    ],
)
def test_req_priv_002_a_bearer_value_of_words_and_numbers_is_text(value: str) -> None:
    assert find_secret("Bearer " + value) is None
    assert find_secret("Bearer " + value.replace("year", "ye4r")) is not None


@pytest.mark.parametrize(
    "placeholder", ["$_DB", "$DB2", "${DB_2}", "%_X1%", "%PASS_2%", "XXXX", "*.*", "<a b>"]
)
def test_req_priv_002_every_placeholder_alphabet_passes(placeholder: str) -> None:
    assert find_secret("password=" + placeholder) is None


@pytest.mark.parametrize(
    "user",
    ["HOST.example", "host1.example", "my-host.example", "a.b.c", "h-1.EX", "host.ex4mple",
     "host.my-example", "host.EXAMPLE"],
)  # fmt: skip
def test_req_priv_002_a_port_after_any_host_name_in_the_user_part_is_no_password(
    user: str,
) -> None:
    assert find_secret(f"https://{user}:8080@mirror.example/") is None
    assert find_secret(f"https://{user}:8080x@mirror.example/") is not None


@pytest.mark.parametrize("quote", ['"', "'"])
def test_req_priv_002_a_quoted_aws_secret_access_key_name_is_found(quote: str) -> None:
    value = _body(40, ALNUM + "/+")
    text = f"{quote}aws_secret_access_key{quote}: {quote}{value}{quote}"
    start = text.index(value)
    assert _kinds(text) == [(SecretKind.AWS_SECRET_ACCESS_KEY, start, start + 40)]


def test_req_priv_002_a_value_glued_to_more_characters_is_not_a_bearer_or_basic_value() -> None:
    assert find_secret("bearer " + _body(24) + "==x") is None
    value = base64.b64encode(b"bob:pa55word1").decode().rstrip("=")
    assert find_secret("Authorization: Basic " + value + "=x") is None
    assert find_secret("AccountKey=" + base64.b64encode(bytes(64)).decode() + "=") is None


@pytest.mark.parametrize("letter", "pousr")
@pytest.mark.parametrize("cut", [1, 18, 35])
def test_req_priv_002_a_wrapped_github_token_is_found_for_every_letter_and_cut(
    letter: str, cut: int
) -> None:
    body = _body(36)
    wrapped = "gh" + letter + "_" + body[:cut] + " " + body[cut:]
    assert _kinds("see " + wrapped + " end") == [(SecretKind.GITHUB_TOKEN, 4, 4 + len(wrapped))]


def test_req_priv_002_the_mask_is_the_documented_marker() -> None:
    # book/privacy.md: each credential is replaced by "[masked]".
    assert mask_secrets("password=hunter2 ok") == ("password=[masked] ok", 1)


def _glued_cases() -> list[tuple[str, str]]:
    jwt_part = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    return [
        ("slack", "xo" + "xb-" + _body(6, string.digits) + "-" + _body(10)),
        ("gitlab", "gl" + "pat-" + _b64url_body(20)),
        ("google", "AI" + "za" + _b64url_body(35)),
        ("anthropic", "sk-ant-api03-" + _b64url_body(90)),
        ("openai", "sk-proj-" + _b64url_body(40)),
        ("sendgrid", "S" + "G." + _b64url_body(22) + "." + _b64url_body(43)),
        ("telegram", _body(10, string.digits) + ":" + _b64url_body(35)),
        ("jwt", jwt_part + "." + jwt_part + "." + _b64url_body(20)),
        ("stripe", "sk" + "_live_" + _body(30)),
        ("twilio", "S" + "K" + _body(32, "0123456789abcdef")),
    ]


@pytest.mark.parametrize(("family", "token"), _glued_cases(), ids=lambda v: str(v)[:10])
def test_req_priv_002_a_token_glued_to_a_word_before_it_is_not_found(
    family: str, token: str
) -> None:
    assert find_secrets("q " + token) != ()
    assert find_secrets("q a" + token) == (), family
    assert find_secrets("q 7" + token) == (), family


@pytest.mark.parametrize(
    ("family", "token"),
    # A Stripe body of 24 to 247 characters absorbs one more: its end is tested by length.
    [case for case in _glued_cases() if case[0] != "stripe"],
    ids=lambda v: str(v)[:10],
)
def test_req_priv_002_a_token_glued_to_a_symbol_of_its_alphabet_after_it_is_not_found(
    family: str, token: str
) -> None:
    # "-" continues a base64url body (and a Slack body); a fixed-length body followed by
    # another character of its alphabet is a longer string, not this credential.
    glue = {"slack": "-", "twilio": "g"}.get(family, "-")
    found = find_secrets(token + glue + "x")
    assert [f for f in found if f.start == 0 and f.end == len(token)] == [], family


@pytest.mark.parametrize(
    "text",
    ['password="<your-password>"', "password='{{secret}}'", "password=x.x.", "secret='x*x*'"],
)
def test_req_priv_002_every_quoted_placeholder_form_passes(text: str) -> None:
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "value", ['"<a<b>"', '"<a>b>"', "'{{a{b}}'", "'{{a}b}}'", '"${A-1}"', '"%A-1%"']
)
def test_req_priv_002_a_value_that_only_looks_like_a_placeholder_is_a_password(value: str) -> None:
    text = "password=" + value
    assert _kinds(text) == [(SecretKind.PASSWORD_ASSIGNMENT, 10, len(text) - 1)]


def test_req_priv_002_a_credential_at_the_very_start_is_found_through_an_invisible() -> None:
    token = "np" + "m_" + _body(36)
    text = token[:7] + "\u200b" + token[7:] + " z"
    assert _kinds(text) == [(SecretKind.NPM_TOKEN, 0, len(token) + 1)]


def test_req_priv_002_a_wrapped_github_token_glued_to_a_word_is_not_found() -> None:
    body = _body(36)
    wrapped = "gh" + "p_" + body[:1] + " " + body[1:]
    assert find_secret("x" + wrapped) is None
    # A second piece of 35 characters followed by one more is a longer word, not the token.
    assert find_secret(wrapped + "x") is None


def test_req_priv_002_a_slack_app_token_glued_to_a_hyphen_is_not_found() -> None:
    app = "xa" + "pp-1-" + _body(8) + "-" + _body(6, string.digits) + "-" + _body(32)
    assert find_secret(app + "-x") is None


def test_req_priv_002_word_confirmation_reads_the_body_after_the_prefix() -> None:
    # Google: the body after "AIza" is words and numbers, "a2024" would not be.
    body = "2024-alpha-bravo-charlie-delta-echo"[:35]
    assert find_secret("AI" + "za" + body) is None
    # ... and a body whose first character is a digit glued to letters is a key.
    assert find_secret("AI" + "za" + "9" + body[1:].replace("-", "x")) is not None
    _found_whole(
        "AI" + "za" + "9alpha-bravo-charlie-delta-echo-fox"[:35], SecretKind.GOOGLE_API_KEY
    )
    # OpenAI legacy: one digit then letters is a key, read from the first body character.
    _found_whole("sk-" + "1" + "abcdefghij" * 4 + "abcdefg", SecretKind.OPENAI_KEY)


def test_req_priv_002_json_web_token_part_length_ends() -> None:
    assert _kinds("eyJ" + "abcdefgh" + ".eyJ" + "abcdefgh" + ".") == [
        (SecretKind.JSON_WEB_TOKEN, 0, 24)
    ]
    assert find_secret("eyJ" + "abcdefgh" + ".eyJ" + "abcdefg" + ".") is None
    assert find_secret("eyJ" + "abcdefg" + ".eyJ" + "abcdefgh" + ".") is None


def test_req_priv_002_basic_value_length_and_padding_ends() -> None:
    # "ab:cde" is eight base64 characters: the shortest value read.
    assert _kinds("Authorization: Basic YWI6Y2Rl") == [(SecretKind.BASIC_AUTH, 21, 29)]
    # A padded value glued to more characters is not a value.
    assert _kinds("Authorization: Basic YWI6Y2RlZmc=") == [(SecretKind.BASIC_AUTH, 21, 33)]
    assert find_secret("Authorization: Basic YWI6Y2RlZmc=x") is None


def _pem(kind: str, body: str, headers: str = "", newline: str = "\n") -> str:
    begin = f"-----BEGIN {kind}PRIVATE KEY-----"
    end = f"-----END {kind}PRIVATE KEY-----"
    return begin + newline + headers + body + newline + end


@pytest.mark.parametrize(
    "kind", ["", "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", "ED25519 ", "A" * 19 + " "]
)
def test_req_priv_002_a_private_key_is_found_from_armour_to_armour(kind: str) -> None:
    pem = _pem(kind, base64.b64encode(bytes(range(48))).decode())
    assert _kinds("key: " + pem + " end") == [(SecretKind.PRIVATE_KEY, 5, 5 + len(pem))]


def test_req_priv_002_a_private_key_type_has_at_most_20_characters() -> None:
    body = base64.b64encode(bytes(range(48))).decode()
    assert find_secret(_pem("B" * 20 + " ", body)) is None
    assert find_secret("-----BEGIN" + " " + "C" * 19 + " PRIVATE KEY-----\n" + body) is not None


def test_req_priv_002_a_private_key_with_headers_and_padding_is_found_whole() -> None:
    headers = "Proc-Type: 4,ENCRYPTED\r\nDEK-Info: AES-128-CBC,00FF\r\n\r\n"
    body = "A" * 30 + "==\r\n" + "B" * 40 + "=\r\n" + "C" * 10 + "=="
    pem = _pem("RSA ", body, headers, "\r\n")
    assert _kinds(pem) == [(SecretKind.PRIVATE_KEY, 0, len(pem))]
    pem_lf = _pem("", body.replace("\r\n", "\n"), headers.replace("\r\n", "\n"))
    assert _kinds(pem_lf) == [(SecretKind.PRIVATE_KEY, 0, len(pem_lf))]


def test_req_priv_002_a_private_key_body_has_at_least_32_characters() -> None:
    head = "-----BEGIN PRIVATE KEY----- "
    assert _kinds(head + "D" * 32) == [(SecretKind.PRIVATE_KEY, 0, len(head) + 32)]
    assert find_secret(head + "D" * 31) is None


@pytest.mark.parametrize(
    ("url", "span"),
    [
        # The user part stops at whitespace, "/", "?", "#", "@", ":" and brackets.
        ("https://host/path:pa55@x", None),
        ("https://host?q:pa55@x", None),
        ("https://host#f:pa55@x", None),
        ("https://a@b:pa55@c", None),
        ("https://a:b:pa55@c", (10, 16)),
        ("https://[::1]:pa55@x", None),
        ("https://a]:pa55@x", None),
        ("https://a b:pa55@x", None),
        # The password stops at whitespace, "/", "?", "#" and "@".
        ("https://u:pa/ss@x", None),
        ("https://u:pa?ss@x", None),
        ("https://u:pa#ss@x", None),
        ("https://u:p@ss@x", (10, 11)),
        ("https://u:pa ss@x", None),
        # A host follows the "@".
        ("https://u:pa55@/x", None),
        ("https://u:pa55@?x", None),
        ("https://u:pa55@#x", None),
        ("https://u:pa55@@x", None),
        ("https://u:pa55@ x", None),
    ],
)
def test_req_priv_002_url_user_information_delimiters(
    url: str, span: tuple[int, int] | None
) -> None:
    expected = [] if span is None else [(SecretKind.URL_PASSWORD, *span)]
    assert _kinds(url) == expected


@pytest.mark.parametrize(
    "text",
    ['password="ab"cd"', "password='ab'cd'", 'password="pa ss1"', "password='pa ss1'"],
)
def test_req_priv_002_a_quoted_password_ends_at_its_quote_and_holds_no_space(text: str) -> None:
    assert find_secret(text) is None


def test_req_priv_002_of_two_matches_at_one_position_the_longer_is_kept() -> None:
    part = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    jwt = part + "." + part + "." + _b64url_body(20)
    # The bearer value goes on past the token ("~x1"); the JSON Web Token stops before it.
    text = "Bearer " + jwt + "~x1"
    assert _kinds(text) == [(SecretKind.BEARER_TOKEN, 7, len(text))]


def test_req_priv_002_two_credentials_side_by_side_are_both_found() -> None:
    pem = "-----BEGIN PRIVATE KEY----- " + "D" * 32
    text = "Authorization: Basic YWI6Y2Rl" + pem
    assert _kinds(text) == [
        (SecretKind.BASIC_AUTH, 21, 29),
        (SecretKind.PRIVATE_KEY, 29, len(text)),
    ]
    assert mask_secrets(text) == ("Authorization: Basic " + MASK + MASK, 2)


def test_req_priv_002_a_private_key_without_end_armour_ends_after_its_first_base64_run() -> None:
    # A header line holds no line break: the body that follows it is the first run.
    head = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n" + "B" * 32
    text = head + "\n" + "C" * 32 + " words"
    assert _kinds(text) == [(SecretKind.PRIVATE_KEY, 0, len(head))]
