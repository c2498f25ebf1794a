"""The trust store of outbound TLS (rypsok.core.egress.trust), without the variables.

The development and CI machines set SSL_CERT_FILE and SSL_CERT_DIR in their environment, so
the tests that read `os.environ` only ever take that branch; these tests build the context
from an explicit environment and walk the system locations one by one (deployment page,
"Which certificates the fetches trust").
"""

from __future__ import annotations

import os
import ssl
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from rypsok.core.egress import trust
from rypsok.core.egress.trust import ClientBuildError

if TYPE_CHECKING:
    from pathlib import Path

# Where the system bundle is looked for after OpenSSL's own default, in this order.
SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
)


class _Loads:
    """Records what the context is asked to load instead of loading it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[str] = []
        self.directories: list[str] = []
        self.defaults = 0
        monkeypatch.setattr(trust, "_load_file", self._file)
        monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", self._verify_locations)
        monkeypatch.setattr(ssl.SSLContext, "load_default_certs", self._default)

    def _file(self, context: ssl.SSLContext, path: str, what: str) -> None:
        self.files.append(path)

    def _verify_locations(self, *_: object, capath: str | None = None, **__: object) -> None:
        assert capath is not None
        self.directories.append(capath)

    def _default(self, *_: object) -> None:
        self.defaults += 1


def _defaults(cafile: str | None, capath: str | None) -> SimpleNamespace:
    # What the code reads of ssl.get_default_verify_paths(); OpenSSL gives None for a
    # location it does not have.
    return SimpleNamespace(openssl_cafile=cafile, openssl_capath=capath)


@pytest.fixture
def linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")


def test_req_ops_001_without_variables_the_systems_bundle_is_trusted() -> None:
    defaults = ssl.get_default_verify_paths()
    candidates = [p for p in (defaults.openssl_cafile, *SYSTEM_BUNDLES) if os.path.isfile(p)]
    if not candidates:
        with pytest.raises(ClientBuildError):
            trust._build_context({})
        return
    context = trust._build_context({})
    expected = ssl.create_default_context(cafile=candidates[0])
    assert len(context.get_ca_certs()) == len(expected.get_ca_certs()) > 0
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.mark.usefixtures("linux")
@pytest.mark.parametrize("bundle", SYSTEM_BUNDLES)
def test_req_ops_001_each_system_bundle_location_is_read(
    bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = _Loads(monkeypatch)
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: _defaults(None, None))
    monkeypatch.setattr(os.path, "isfile", lambda path: path == bundle)
    trust._build_context({})
    assert (loads.files, loads.directories) == ([bundle], [])


@pytest.mark.usefixtures("linux")
def test_req_ops_001_openssls_own_bundle_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = _Loads(monkeypatch)
    monkeypatch.setattr(
        ssl, "get_default_verify_paths", lambda: _defaults("/opt/ssl/cert.pem", None)
    )
    monkeypatch.setattr(os.path, "isfile", lambda path: True)
    trust._build_context({})
    assert loads.files == ["/opt/ssl/cert.pem"]


@pytest.mark.usefixtures("linux")
@pytest.mark.parametrize(
    ("capath", "hashed", "expected"),
    [
        ("/opt/ssl/certs", {"/opt/ssl/certs", "/etc/ssl/certs"}, "/opt/ssl/certs"),
        ("/opt/ssl/certs", {"/etc/ssl/certs"}, "/etc/ssl/certs"),
        (None, {"/etc/ssl/certs"}, "/etc/ssl/certs"),
    ],
)
def test_req_ops_001_without_a_bundle_a_hashed_directory_is_trusted(
    capath: str | None, hashed: set[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = _Loads(monkeypatch)
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: _defaults(None, capath))
    monkeypatch.setattr(os.path, "isfile", lambda path: False)
    monkeypatch.setattr(trust, "_has_hashed_certificates", lambda directory: directory in hashed)
    assert isinstance(trust._build_context({}), ssl.SSLContext)
    assert (loads.files, loads.directories) == ([], [expected])


@pytest.mark.usefixtures("linux")
def test_req_ops_001_no_store_at_all_is_named_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    _Loads(monkeypatch)
    monkeypatch.setattr(
        ssl, "get_default_verify_paths", lambda: _defaults("/x/cert.pem", "/x/certs")
    )
    monkeypatch.setattr(os.path, "isfile", lambda path: False)
    monkeypatch.setattr(trust, "_has_hashed_certificates", lambda directory: False)
    with pytest.raises(ClientBuildError) as caught:
        trust._build_context({})
    assert caught.value.why.startswith("no system certificate store was found")
    assert "ca-certificates" in str(caught.value)


@pytest.mark.parametrize(("platform", "loaded"), [("win32", 1), ("darwin", 1), ("linux", 0)])
def test_req_ops_001_windows_and_macos_use_the_platforms_roots(
    platform: str, loaded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = _Loads(monkeypatch)
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(os.path, "isfile", lambda path: True)
    context = trust._build_context({})
    assert isinstance(context, ssl.SSLContext)
    assert loads.defaults == loaded
    assert (loads.files == []) == (loaded == 1)


def test_req_ops_001_every_directory_of_ssl_cert_dir_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = _Loads(monkeypatch)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    context = trust._build_context({"SSL_CERT_DIR": f"{first}::{second}"})
    assert isinstance(context, ssl.SSLContext)
    assert loads.directories == [str(first), str(second)]
    assert loads.files == []


def test_req_ops_001_the_reason_is_kept_apart_from_the_sentence() -> None:
    with pytest.raises(ClientBuildError) as caught:
        trust._build_context({"SSL_CERT_FILE": "/nonexistent/ca.pem"})
    assert caught.value.why == "SSL_CERT_FILE names a file that does not exist"


@pytest.mark.parametrize(
    ("name", "hashed"),
    [
        ("0123abcd.0", True),
        ("00000000.0", True),  # digits only
        ("abcdefab.1", True),  # the lower-case hex letters only
        ("ABCDEFAB.12", True),  # the upper-case hex letters only
        ("9f9f9f9f.r0", True),  # a revocation list's name
        ("0123abc.0", False),  # seven hex digits
        ("0123abcde.0", False),  # nine
        ("0123abcg.0", False),  # not hex
        ("0123abcd", False),
        ("0123abcd.x", False),
        ("ca-certificates.crt", False),
    ],
)
def test_req_ops_001_a_hashed_directory_is_told_by_its_names(
    name: str, hashed: bool, tmp_path: Path
) -> None:
    (tmp_path / name).write_text("")
    assert trust._has_hashed_certificates(str(tmp_path)) is hashed


def test_req_ops_001_a_directory_that_cannot_be_listed_holds_no_certificates() -> None:
    assert trust._has_hashed_certificates("/nonexistent/certs") is False


@pytest.mark.parametrize(
    "error", [PermissionError(13, "denied"), ValueError("bad"), ssl.SSLError()]
)
def test_req_ops_001_a_bundle_that_cannot_be_read_is_named_at_start(
    error: Exception, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")

    def refuse(*_: object, **__: object) -> None:
        raise error

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    with pytest.raises(ClientBuildError) as caught:
        trust._build_context({"SSL_CERT_FILE": str(bundle)})
    assert caught.value.why == "SSL_CERT_FILE names a file without readable certificates"
    assert str(tmp_path) not in str(caught.value)


@pytest.mark.usefixtures("linux")
def test_req_ops_001_a_system_bundle_that_cannot_be_read_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise ssl.SSLError

    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: _defaults(None, None))
    monkeypatch.setattr(os.path, "isfile", lambda path: path == SYSTEM_BUNDLES[0])
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    with pytest.raises(ClientBuildError) as caught:
        trust._build_context({})
    assert (
        caught.value.why
        == "the system certificate bundle names a file without readable certificates"
    )


@pytest.mark.parametrize("settings", ["a bundle", "a directory", "a directory, no file named"])
def test_req_ops_001_a_client_after_the_first_gets_its_own_context_of_the_same_store(
    settings: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each outbound client has a context of its own: the second one is built
    # anew, from the same trust settings as the first (the system's store would differ).
    from cryptography.hazmat.primitives import serialization
    from fetch_helpers import Authority

    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(Authority().cert.public_bytes(serialization.Encoding.PEM))
    environ = {
        "a bundle": {"SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": ""},
        "a directory": {"SSL_CERT_FILE": "", "SSL_CERT_DIR": str(tmp_path)},
        "a directory, no file named": {"SSL_CERT_DIR": str(tmp_path)},
    }[settings]
    monkeypatch.setattr(trust, "_pending", None)
    monkeypatch.setattr(trust, "_taken", set())
    trust._context_for.cache_clear()
    first = trust.client_context(environ)
    second = trust.client_context(environ)
    assert first is trust.trust_store_context(environ)
    assert second is not first
    expected = 1 if settings == "a bundle" else 0
    assert len(first.get_ca_certs()) == expected
    assert [c["subject"] for c in second.get_ca_certs()] == [
        c["subject"] for c in first.get_ca_certs()
    ]


async def test_req_sec_017_the_engines_and_the_fetch_client_each_hold_a_context_of_their_own() -> (
    None
):
    # What the clients of one service hold, not what the function returns: httpcore sets the
    # ALPN protocols of a client's context before each handshake, so none may be shared.
    from rypsok import Rypsok
    from rypsok.config.load import load_config_text

    config = load_config_text("config_version = 1\n", {})
    async with Rypsok(config) as service:
        service._fetch_pipeline()
        fetch_client = service._fetch_client
        assert fetch_client is not None
        fetch_context = fetch_client.transport.ssl_context
        engine_context = service._http._ssl_context
    assert isinstance(fetch_context, ssl.SSLContext)
    assert isinstance(engine_context, ssl.SSLContext)
    assert fetch_context is not engine_context
