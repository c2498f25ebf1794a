"""The fixture web site behind the book's web_fetch examples, on loopback, over TLS.

`https://example.org/rust-ownership` is the page of `fixtures/rust-ownership.html`;
`/robots.txt` lets every agent read everything. The certificate names example.org and is
signed by an authority made for this run only; the launched rypsok trusts that authority
alone (`--fetch-ca`), reaches the site through an allow rule added in code and a resolver
that maps example.org to 127.0.0.1 (`--fetch-site`), and never touches the network.
"""

from __future__ import annotations

import datetime
import ssl
import tempfile
from pathlib import Path

import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["HOST", "FixtureSite"]

HOST = "example.org"
FIXTURES = Path(__file__).parent / "fixtures"
_HEAD_LIMIT = 65536


def _pages() -> dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]]:
    page = (FIXTURES / "rust-ownership.html").read_bytes()
    return {
        "/rust-ownership": (200, (("Content-Type", "text/html; charset=utf-8"),), page),
        "/robots.txt": (200, (("Content-Type", "text/plain"),), b"User-agent: *\nAllow: /\n"),
    }


def _certificate(
    key: ec.EllipticCurvePrivateKey,
    subject: str,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    *,
    authority: bool,
    also: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if authority:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
    else:
        names = [x509.DNSName(n) for n in (subject, *also)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
    return builder.sign(signer, hashes.SHA256())


def signed_server(
    hosts: tuple[str, ...], folder: Path, authority: str
) -> tuple[bytes, ssl.SSLContext]:
    """An authority made for the run (its certificate as PEM) and a server context whose
    certificate, signed by it, covers `hosts`; the key files go to `folder`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(
        ca_key,
        authority,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, authority)]),
        ca_key,
        authority=True,
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _certificate(key, hosts[0], ca.subject, ca_key, authority=False, also=hosts[1:])
    cert_file, key_file = folder / "site.pem", folder / "site.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(str(cert_file), str(key_file))
    return ca.public_bytes(serialization.Encoding.PEM), server


class FixtureSite:
    """Serves the pages over TLS; `ca_file` is the authority's certificate (PEM).

    `hosts` are the names the certificate covers (example.org by default) and `pages` the
    paths served (the book's page and robots.txt by default).
    """

    def __init__(
        self,
        directory: str,
        *,
        hosts: tuple[str, ...] = (HOST,),
        pages: dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]] | None = None,
    ) -> None:
        folder = Path(directory)
        ca_pem, self._tls = signed_server(hosts, folder, "rypsok conformance authority")
        self.ca_file = folder / "ca.pem"
        self.ca_file.write_bytes(ca_pem)
        self._pages = pages if pages is not None else _pages()

    async def _answer(self, raw: trio.SocketStream) -> None:
        stream = trio.SSLStream(raw, self._tls, server_side=True)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
                data = await stream.receive_some(4096)
                if not data:
                    return
                head += data
            target = head.split(b" ", 2)[1].decode("latin-1")
            status, headers, body = self._pages.get(
                target, (404, (("Content-Type", "text/plain"),), b"not found")
            )
            lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers)]
            lines += [f"Content-Length: {len(body)}", "Connection: close"]
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, IndexError):
            pass
        finally:
            await raw.aclose()

    async def serve(
        self,
        address: str = "127.0.0.1",
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listeners = await trio.open_tcp_listeners(0, host=address)
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._answer, listeners)


def temporary_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="rypsok-conformance-")
