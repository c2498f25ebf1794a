"""A throw-away certificate authority and the server contexts it signs: the one maker of
certificates for the tests, the fixture site and the harness's TLS fronts.

Nothing is trusted but what a client context of the same authority trusts; the keys live in
memory and in temporary files for the moment `load_cert_chain` reads them.
"""

from __future__ import annotations

import datetime
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Authority"]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class Authority:
    """A certificate authority made for one test or one run."""

    def __init__(self, name: str = "rypsok test authority") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        """The authority's certificate, PEM: what a client (or `SSL_CERT_FILE`) trusts."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this authority alone."""
        return ssl.create_default_context(cadata=self.pem.decode("ascii"))

    def server_context(self, *names: str) -> ssl.SSLContext:
        """A server context whose certificate, signed by this authority, covers `names`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(names[0]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.NamedTemporaryFile() as cert_file, tempfile.NamedTemporaryFile() as key_file:
            cert_file.write(cert.public_bytes(serialization.Encoding.PEM))
            cert_file.flush()
            key_file.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            key_file.flush()
            context.load_cert_chain(cert_file.name, key_file.name)
        return context
