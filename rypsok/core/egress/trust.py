"""The trust store of rypsok's outbound TLS: the operating system's, and nothing else.

Its own module, light to import: the command line checks the store at start, and the first
client (the engines') takes that checked context as its own, before anything of the fetch
client is loaded; every later client builds one of its own (loading a store costs about
20 ms), so no two clients share a context. The console script starts building it in a
thread (`prefetch`) before it imports the rest: `ssl` releases the GIL while it reads the
store, so the load overlaps the imports instead of adding to the start.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import ssl
import sys
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ClientBuildError", "client_context", "prefetch", "trust_store_context"]

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


# The thread of `prefetch`, until the first `trust_store_context` has waited for it.
_pending: threading.Thread | None = None


def prefetch() -> None:
    """Start building the process's context in a thread; `trust_store_context` waits for it.

    Only a head start: the thread keeps nothing but the shared context on success, and drops
    a failure, which `trust_store_context` then meets again and raises in the caller's
    thread, with the same sentence, at the same point of the start as without a prefetch.
    """
    global _pending
    if _pending is not None:
        return
    env = os.environ
    cert_file, cert_dir = env.get("SSL_CERT_FILE", ""), env.get("SSL_CERT_DIR", "")

    def build() -> None:
        # A failure is dropped here: the caller's own attempt meets it and raises it.
        with contextlib.suppress(Exception):
            _context_for(cert_file, cert_dir)

    _pending = threading.Thread(target=build, name="rypsok-trust-store", daemon=True)
    _pending.start()


def trust_store_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The context the start checks for the trust-store settings of `environ` (the process's
    when None), built once; see `_build_context`. The first client takes it as its own."""
    global _pending
    pending = _pending
    if pending is not None:
        pending.join()
        _pending = None
    env = os.environ if environ is None else environ
    return _context_for(env.get("SSL_CERT_FILE", ""), env.get("SSL_CERT_DIR", ""))


# The trust settings whose prefetched context a client has taken as its own.
_taken: set[tuple[str, str]] = set()
# What every outbound client speaks: HTTP/1.1 only (its pool is built with http2 off).
_ALPN: Final = ("http/1.1",)


def client_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """A TLS context that no other client holds, for the trust settings of `environ`, with
    its ALPN protocols set.

    httpcore sets a context's ALPN protocols before each handshake, so two clients sharing
    one could each negotiate what the other asked for: each client gets its own. The first
    client to ask takes the context `prefetch` built during the start (the one the start
    checked); every later one gets a context of its own, built now.
    """
    env = os.environ if environ is None else environ
    key = (env.get("SSL_CERT_FILE", ""), env.get("SSL_CERT_DIR", ""))
    checked = trust_store_context(environ)
    if key not in _taken:
        _taken.add(key)
        context = checked
    else:
        context = _build_context({"SSL_CERT_FILE": key[0], "SSL_CERT_DIR": key[1]})
    context.set_alpn_protocols(list(_ALPN))
    return context


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
