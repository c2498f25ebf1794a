"""The trust store of rypsok's outbound TLS: the operating system's, and nothing else.

Its own module, light to import: the command line checks the store at start, and the
engines' client takes the same context, before anything of the fetch client is loaded.
The context for one environment is built once and shared (loading a store costs about
20 ms); it is only read after it is built.
"""

from __future__ import annotations

import functools
import os
import re
import ssl
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ClientBuildError", "system_trust_context"]

_BUILD_FAILED: Final = "the HTTP client could not be built"
_HASHED_NAME: Final = re.compile(r"[0-9a-fA-F]{8}\.r?[0-9]+")
# Where Linux distributions keep the system bundle, for an OpenSSL built with other paths.
_BUNDLES: Final = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine, distroless
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # Fedora, RHEL
    "/etc/pki/tls/certs/ca-bundle.crt",  # older RHEL
    "/etc/ssl/ca-bundle.pem",  # SUSE
    "/etc/ssl/cert.pem",  # Arch, BSD
)


class ClientBuildError(Exception):
    """An outbound client cannot be built; `str()` is the sentence to print at start.

    The sentence says why once (audit F-3) and never holds a path or a secret.
    """

    def __init__(self, why: str) -> None:
        super().__init__(f"{_BUILD_FAILED}: {why}")
        self.why: Final = why


def _has_hashed_certificates(directory: str) -> bool:
    try:
        return any(_HASHED_NAME.fullmatch(name) for name in os.listdir(directory))
    except OSError:
        return False


def _load_file(context: ssl.SSLContext, path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise ClientBuildError(f"{what} names a file that does not exist")
    try:
        context.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError, ValueError):
        raise ClientBuildError(f"{what} names a file without readable certificates") from None


def system_trust_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The shared context for the trust-store settings of `environ` (the process's when
    None); see `_build_context`."""
    env = os.environ if environ is None else environ
    return _context_for(env.get("SSL_CERT_FILE", ""), env.get("SSL_CERT_DIR", ""))


@functools.lru_cache(maxsize=4)
def _context_for(cert_file: str, cert_dir: str) -> ssl.SSLContext:
    return _build_context({"SSL_CERT_FILE": cert_file, "SSL_CERT_DIR": cert_dir})


def _build_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """A client TLS context that trusts the operating system's store and nothing else.

    On Linux and other Unix systems the roots come from `SSL_CERT_FILE` and the
    colon-separated `SSL_CERT_DIR` when either is set (and then only from there), else
    from the system locations; a missing store raises ClientBuildError. On Windows and
    macOS the platform's default roots as Python's ssl module loads them are used.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname check, certificate required
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    cert_file = env.get("SSL_CERT_FILE", "")
    cert_dirs = [d for d in env.get("SSL_CERT_DIR", "").split(":") if d]
    if cert_file or cert_dirs:
        if cert_file:
            _load_file(context, cert_file, "SSL_CERT_FILE")
        for directory in cert_dirs:
            if not os.path.isdir(directory):
                raise ClientBuildError("SSL_CERT_DIR names a directory that does not exist")
            context.load_verify_locations(capath=directory)
        return context
    if sys.platform in ("win32", "darwin"):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return context
    defaults = ssl.get_default_verify_paths()
    for bundle in (defaults.openssl_cafile, *_BUNDLES):
        if bundle and os.path.isfile(bundle):
            _load_file(context, bundle, "the system certificate bundle")
            return context
    for directory in (defaults.openssl_capath, "/etc/ssl/certs"):
        if directory and _has_hashed_certificates(directory):
            context.load_verify_locations(capath=directory)
            return context
    raise ClientBuildError(
        "no system certificate store was found; install the CA bundle "
        "(ca-certificates) or set SSL_CERT_FILE"
    )
