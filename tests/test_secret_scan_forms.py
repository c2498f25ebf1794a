"""Every form each credential provider issues today, one synthetic value per form.

The families are those of the book's privacy page; the forms and their lengths are the
providers' current ones. Each value is built at its real length from random characters of
the form's alphabet (none is a real credential), and checked in the three ways a caller
meets the check: found with its kind at its position, found lower-cased (but for the two
kinds whose confirmation is case-bound), and masked whole. A fixed-length form one
character short is not that form. The ordinary-text corpus of test_secret_scan.py keeps
covering the false-positive side, with the ordinary text near the new prefixes below.
"""

from __future__ import annotations

import random
import string
from typing import Final

import pytest

from rypsok.core.model import SecretKind
from rypsok.core.secret_scan import MASK, find_secret, find_secrets, mask_secrets

ALNUM: Final = string.ascii_letters + string.digits
B64URL: Final = ALNUM + "-_"
B64: Final = ALNUM + "+/"
HEX: Final = "0123456789abcdef"
BASE32: Final = string.ascii_uppercase + "234567"
BASE36: Final = string.ascii_lowercase + string.digits
DIGITS: Final = string.digits


def body(seed: str, alphabet: str, n: int) -> str:
    """n characters of the alphabet with a digit and a letter of each case it has."""
    rng = random.Random(seed)
    chars = [rng.choice(alphabet) for _ in range(n)]
    pools = [
        p
        for p in (DIGITS, string.ascii_lowercase, string.ascii_uppercase)
        if set(p) & set(alphabet)
    ]
    for i, pool in enumerate(pools):
        chars[(i * 5 + 1) % n] = rng.choice(sorted(set(pool) & set(alphabet)))
    return "".join(chars)


def j(*parts: str) -> str:
    # Prefixes are written in pieces so that no source line looks like a credential.
    return "".join(parts)


# (form, kind, value, whether the form has a fixed length: one character less is not it)
FORMS: Final = [
    # AWS access key ids: 4 + 16 base32.
    ("aws-akia", SecretKind.AWS_ACCESS_KEY_ID, j("AK", "IA", body("1", BASE32, 16)), True),
    ("aws-asia", SecretKind.AWS_ACCESS_KEY_ID, j("AS", "IA", body("2", BASE32, 16)), True),
    ("aws-abia", SecretKind.AWS_ACCESS_KEY_ID, j("AB", "IA", body("3", BASE32, 16)), True),
    ("aws-acca", SecretKind.AWS_ACCESS_KEY_ID, j("AC", "CA", body("4", BASE32, 16)), True),
    # GitHub: five classic prefixes with 36, the fine-grained 22 + 59.
    *(
        (f"github-gh{c}", SecretKind.GITHUB_TOKEN, j("gh", c, "_", body(c, ALNUM, 36)), True)
        for c in "pousr"
    ),
    (
        "github-fine-grained",
        SecretKind.GITHUB_TOKEN,
        j("github", "_pat_", body("5", ALNUM, 22), "_", body("6", ALNUM, 59)),
        True,
    ),
    # GitLab: every prefix, the routable forms, the legacy runner registration token.
    *(
        (f"gitlab-gl{p}", SecretKind.GITLAB_TOKEN, j("gl", p, "-", body(p, B64URL, 20)), False)
        for p in ("pat", "dt", "rt", "ptt", "cbt", "oas", "soat", "ft", "imt", "agent", "ffct")
    ),
    (
        "gitlab-routable",
        SecretKind.GITLAB_TOKEN,
        j("gl", "pat-", body("7", B64URL, 40), ".01.", body("8", BASE36, 9)),
        False,
    ),
    (
        "gitlab-routable-one-dot",
        SecretKind.GITLAB_TOKEN,
        j("gl", "pat-", body("9", B64URL, 27), ".", body("10", BASE36, 9)),
        False,
    ),
    (
        "gitlab-runner-registration",
        SecretKind.GITLAB_TOKEN,
        j("GR13", "48941", body("11", B64URL, 20)),
        True,
    ),
    ("npm", SecretKind.NPM_TOKEN, j("np", "m_", body("12", ALNUM, 36)), True),
    # Hugging Face: user access tokens and organization API tokens.
    ("hugging-face-user", SecretKind.HUGGING_FACE_TOKEN, j("h", "f_", body("13", ALNUM, 34)), True),
    (
        "hugging-face-org",
        SecretKind.HUGGING_FACE_TOKEN,
        j("api", "_org_", body("14", ALNUM, 34)),
        True,
    ),
    # Slack: bot, user, legacy, app-level, workspace, configuration access and refresh.
    (
        "slack-bot",
        SecretKind.SLACK_TOKEN,
        j(
            "xo",
            "xb-",
            body("15", DIGITS, 13),
            "-",
            body("16", DIGITS, 13),
            "-",
            body("17", ALNUM, 24),
        ),
        False,
    ),
    (
        "slack-user",
        SecretKind.SLACK_TOKEN,
        j(
            "xo",
            "xp-",
            body("18", DIGITS, 11),
            "-",
            body("19", DIGITS, 12),
            "-",
            body("20", DIGITS, 13),
            "-",
            body("21", HEX, 32),
        ),
        False,
    ),
    (
        "slack-legacy",
        SecretKind.SLACK_TOKEN,
        j(
            "xo",
            "xs-",
            body("22", DIGITS, 11),
            "-",
            body("23", DIGITS, 11),
            "-",
            body("24", HEX, 64),
        ),
        False,
    ),
    (
        "slack-app",
        SecretKind.SLACK_TOKEN,
        j(
            "xa",
            "pp-1-A",
            body("25", string.ascii_uppercase + DIGITS, 10),
            "-",
            body("26", DIGITS, 13),
            "-",
            body("27", HEX, 64),
        ),
        False,
    ),
    (
        "slack-workspace",
        SecretKind.SLACK_TOKEN,
        j(
            "xo",
            "xa-2-",
            body("28", DIGITS, 12),
            "-",
            body("29", DIGITS, 12),
            "-",
            body("30", HEX, 32),
        ),
        False,
    ),
    (
        "slack-configuration-access",
        SecretKind.SLACK_TOKEN,
        j("xo", "xe.xoxp-1-", body("31", ALNUM, 152)),
        False,
    ),
    (
        "slack-rotating-bot",
        SecretKind.SLACK_TOKEN,
        j("xo", "xe.xoxb-1-", body("32", ALNUM, 164)),
        False,
    ),
    (
        "slack-configuration-refresh",
        SecretKind.SLACK_TOKEN,
        j("xo", "xe-1-", body("33", ALNUM, 146)),
        False,
    ),
    # Stripe: secret and restricted keys in each mode, at today's length (99 after the
    # prefix) and the shortest accepted; the webhook signing secret.
    *(
        (
            f"stripe-{kind}-{mode}",
            SecretKind.STRIPE_KEY,
            j(kind, "_", mode, "_", body(kind + mode, ALNUM, 99)),
            False,
        )
        for kind in ("sk", "rk")
        for mode in ("live", "test", "prod")
    ),
    ("stripe-short", SecretKind.STRIPE_KEY, j("sk", "_live_", body("34", ALNUM, 24)), False),
    ("stripe-webhook", SecretKind.STRIPE_KEY, j("wh", "sec_", body("35", B64, 32)), False),
    ("google-api", SecretKind.GOOGLE_API_KEY, j("AI", "za", body("36", B64URL, 35)), True),
    # OpenAI: legacy, project, service account, admin, and the user key without a project.
    ("openai-legacy", SecretKind.OPENAI_KEY, j("sk", "-", body("37", ALNUM, 48)), True),
    *(
        (f"openai-{p}", SecretKind.OPENAI_KEY, j("sk", "-", p, "-", body(p, B64URL, 156)), False)
        for p in ("proj", "svcacct", "admin", "None")
    ),
    # Anthropic: API keys (api03), admin keys (admin01), OAuth tokens (oat01, ort01).
    *(
        (
            f"anthropic-{name}",
            SecretKind.ANTHROPIC_KEY,
            j("sk", "-ant-", name, "-", body(name, B64URL, 93), "AA"),
            False,
        )
        for name in ("api03", "admin01", "oat01", "ort01")
    ),
    (
        "sendgrid",
        SecretKind.SENDGRID_KEY,
        j("S", "G.", body("38", B64URL, 22), ".", body("39", B64URL, 43)),
        True,
    ),
    (
        "telegram",
        SecretKind.TELEGRAM_BOT_TOKEN,
        j(body("40", DIGITS, 10), ":AA", body("41", B64URL, 33)),
        True,
    ),
    ("twilio-api-key", SecretKind.TWILIO_KEY, j("S", "K", body("42", HEX, 32)), True),
    ("twilio-account", SecretKind.TWILIO_KEY, j("A", "C", body("43", HEX, 32)), True),
    # PEM private keys of every armour in use: PKCS#8, RSA, EC, OpenSSH, encrypted, PGP.
    *(
        (
            f"private-key-{label.strip().lower().replace(' ', '-') or 'pkcs8'}",
            SecretKind.PRIVATE_KEY,
            j(
                "-----BEGIN ",
                label,
                "PRIVATE KEY",
                tail,
                "-----\n",
                header,
                body(label + "k", B64, 64),
                "\n",
                body(label + "l", B64, 40),
                "==\n-----END ",
                label,
                "PRIVATE KEY",
                tail,
                "-----",
            ),
            False,
        )
        for label, tail, header in (
            ("", "", ""),
            ("RSA ", "", ""),
            ("EC ", "", ""),
            ("OPENSSH ", "", ""),
            ("ENCRYPTED ", "", ""),
            ("PGP ", " BLOCK", "Version: 2\n\n"),
        )
    ),
    (
        "azure-account-key",
        SecretKind.AZURE_ACCOUNT_KEY,
        j("AccountKey=", body("44", B64, 86), "=="),
        False,
    ),
]

# Kinds recognized by a name in front: the finding starts at the value.
VALUE_AT: Final = {SecretKind.AZURE_ACCOUNT_KEY: len("AccountKey=")}
CASE_BOUND: Final = {SecretKind.TWILIO_KEY}


@pytest.mark.parametrize(("form", "kind", "value", "fixed"), FORMS, ids=[f[0] for f in FORMS])
def test_req_priv_002_each_current_form_is_found_at_its_position(
    form: str, kind: SecretKind, value: str, fixed: bool
) -> None:
    text = f"see {value} here"
    finding = find_secret(text)
    assert finding is not None, form
    assert finding.kind is kind
    assert finding.position == 4 + VALUE_AT.get(kind, 0)
    assert text[finding.start : finding.end] == value[VALUE_AT.get(kind, 0) :]


@pytest.mark.parametrize(("form", "kind", "value", "fixed"), FORMS, ids=[f[0] for f in FORMS])
def test_req_priv_002_each_current_form_is_found_lower_cased_and_masked_whole(
    form: str, kind: SecretKind, value: str, fixed: bool
) -> None:
    if kind not in CASE_BOUND:
        lowered = find_secret(value.lower())
        assert lowered is not None, form
        assert lowered.kind is kind
    masked, count = mask_secrets(f"a {value} b")
    assert count == 1
    assert masked == f"a {value[: VALUE_AT.get(kind, 0)]}{MASK} b"


@pytest.mark.parametrize(
    ("form", "kind", "value"),
    [(f, k, v) for f, k, v, fixed in FORMS if fixed],
    ids=[f[0] for f in FORMS if f[3]],
)
def test_req_priv_002_a_fixed_length_form_one_character_short_is_not_that_form(
    form: str, kind: SecretKind, value: str
) -> None:
    assert all(f.kind is not kind for f in find_secrets(value[:-1])), form


ORDINARY_NEAR: Final = [
    "xoxo-2-you and xoxo-hugs-and-kisses-forever",
    "the xoxe-1-click guide",
    "xoxa-2-the-workspace-token-format-explained",
    "api_org_ token of hugging face organizations",
    "stripe whsec_ webhook secret rotation",
    "sk_prod_ keys and restricted rk_prod_ keys",
    "sk-None- prefix meaning openai",
    "glagent-token-for-the-kubernetes-agent",
    "GR1348941 runner registration token prefix",
    "ABIA and ACCA prefixes of aws credentials",
]


@pytest.mark.parametrize("text", ORDINARY_NEAR)
def test_req_priv_002_ordinary_text_near_the_new_forms_passes(text: str) -> None:
    assert find_secrets(text) == ()


# --- the range ends and the edges of the newer forms -----------------------------------------


def _found(text: str) -> SecretKind | None:
    finding = find_secret(text)
    return None if finding is None else finding.kind


@pytest.mark.parametrize(("n", "found"), [(119, False), (120, True), (200, True), (201, False)])
@pytest.mark.parametrize("prefix", [j("xoxe", ".xoxp-1-"), j("xoxe", ".xoxb-1-"), j("xoxe", "-1-")])
def test_req_priv_002_slack_configuration_token_body_range_ends(
    prefix: str, n: int, found: bool
) -> None:
    value = prefix + body(f"slack{n}", ALNUM, n)
    assert (_found(f"token {value} end") is SecretKind.SLACK_TOKEN) is found


@pytest.mark.parametrize("digit", ["0", "1", "9"])
def test_req_priv_002_slack_configuration_token_one_digit_version(digit: str) -> None:
    value = j("xoxe", "-", digit, "-") + body("v", ALNUM, 150)
    assert _found(value) is SecretKind.SLACK_TOKEN
    assert _found(j("xoxe", "-12-") + body("v", ALNUM, 150)) is None


@pytest.mark.parametrize("before", ["a", "Z", "7"])
def test_req_priv_002_slack_tokens_start_at_a_word_boundary(before: str) -> None:
    config = j("xoxe", "-1-") + body("b", ALNUM, 150)
    workspace = j("xoxa", "-2-") + body("w", ALNUM, 30)
    assert _found(before + config) is None
    assert _found(before + workspace) is None
    assert _found("-" + config) is SecretKind.SLACK_TOKEN
    full = j("xoxe", "-1-") + body("f", ALNUM, 200)
    assert _found(full + "a") is None  # a longer run is not this token
    assert _found(config + "-x") is None
    assert _found(workspace + ".") is SecretKind.SLACK_TOKEN
    assert _found(config + ".") is SecretKind.SLACK_TOKEN


@pytest.mark.parametrize(("n", "found"), [(19, False), (20, True), (60, True)])
def test_req_priv_002_slack_workspace_token_body_range_end(n: int, found: bool) -> None:
    value = j("xoxa", "-2-") + body(f"ws{n}", ALNUM, n)
    assert (_found(value) is SecretKind.SLACK_TOKEN) is found


@pytest.mark.parametrize(("n", "found"), [(31, False), (32, True), (64, True)])
def test_req_priv_002_stripe_webhook_secret_range_end(n: int, found: bool) -> None:
    value = j("wh", "sec_") + body(f"wh{n}", ALNUM, n)
    assert (_found(f"secret {value} end") is SecretKind.STRIPE_KEY) is found


def test_req_priv_002_stripe_webhook_secret_edges() -> None:
    base = j("wh", "sec_") + body("edge", ALNUM, 40)
    assert _found(base + "+/ab") is SecretKind.STRIPE_KEY  # base64 body characters
    assert _found(base + "==") is SecretKind.STRIPE_KEY  # padding
    finding = find_secret("x " + base + "+/ab== y")
    assert finding is not None
    assert finding.position == 2
    assert _found("a" + base) is None  # glued to a word
    assert _found(base + "==a") is None


@pytest.mark.parametrize(
    ("suffix", "found"),
    [("", True), (".abcdefghi", True), (".01.abcdefghi", True), (".abcdefgh", False)],
)
def test_req_priv_002_gitlab_routable_suffix_has_nine_characters(suffix: str, found: bool) -> None:
    value = j("gl", "pat-") + body("gl", ALNUM, 27) + suffix
    finding = find_secret(value + " end")
    assert finding is not None
    assert finding.kind is SecretKind.GITLAB_TOKEN
    # The routable suffix belongs to the token only with its full nine characters.
    masked, _ = mask_secrets(value + " end")
    assert (masked == MASK + " end") is found


# --- the private key's body without an end armour, and the end armour's bound ---------------


@pytest.mark.parametrize("tail", ["1234", "+/+/", "ab==", "A9/+="])
def test_req_priv_002_a_key_without_its_end_armour_is_masked_to_the_end_of_its_body(
    tail: str,
) -> None:
    key = j("-----BEGIN", " PRIVATE KEY-----\n") + body("k", ALNUM, 40) + tail
    masked, count = mask_secrets(f"{key} and then prose")
    assert count == 1
    assert masked == f"{MASK} and then prose"


def test_req_priv_002_an_end_armour_with_a_type_longer_than_twenty_is_not_the_end() -> None:
    begin = j("-----BEGIN", " RSA PRIVATE KEY-----\n")
    key_body = body("r", ALNUM, 64)
    long_type = " " + "X" * 20  # 21 characters between END and PRIVATE KEY
    end = j("\n-----END", long_type, " PRIVATE KEY-----")
    masked, _ = mask_secrets(begin + key_body + end)
    # The body is masked; an end line the armour's bound does not admit is left as text.
    assert masked.startswith(MASK)
    assert long_type + " PRIVATE KEY-----" in masked
    exact = j("\n-----END", " " + "X" * 19, " PRIVATE KEY-----")
    assert mask_secrets(begin + key_body + exact)[0] == MASK
