"""Certificates for a local secured cluster, made at start with `cryptography`.

`make_cluster_certs(directory, users)` writes, into `directory/tls/`:
- `ca.pem`: a fresh certificate authority (its key is used to sign the others, then
  dropped: nothing more can be signed by it once the cluster is made);
- `server.pem`, `server-key.pem`: the members' certificate for their client and peer
  ports, for 127.0.0.1, ::1 and localhost, usable as server and as client (a member
  dials its peers, and a follower the leader's client port, with it);
- `<user>.pem`, `<user>-key.pem` for each user: a client certificate whose common name
  is the user (with `--client-cert-auth`, etcd's rule: that is who its calls come from).

Keys are ECDSA P-256, written owner-readable only (0600); every certificate is valid for
CERT_DAYS days from a minute ago. Why not `trustme` (the tests' maker): it says it is
for tests only, and a cluster started by `etcdspec cluster up --tls` may live long and
is used by hand; `cryptography` is the maintained library trustme itself builds on.
Nothing here is ever committed: the files live in the cluster's folder.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_DAYS = 365
ORGANIZATION = "etcdspec local cluster"


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its key, as files."""

    cert: str
    key: str

    def describe(self) -> str:
        return f"--cert {self.cert} --key {self.key}"


@dataclass(frozen=True)
class ClusterCerts:
    """Where a secured cluster's certificates are (see the module docstring)."""

    ca_file: str
    server: CertFiles
    clients: tuple[tuple[str, CertFiles], ...]

    def client(self, user: str) -> CertFiles:
        for name, files in self.clients:
            if name == user:
                return files
        raise KeyError(f"no client certificate for user {user!r}")

    def describe(self) -> str:
        users = ", ".join(name for name, _ in self.clients)
        return f"CA {self.ca_file}, server {self.server.cert}, clients {users}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ca_file": self.ca_file,
            "server": {"cert": self.server.cert, "key": self.server.key},
            "clients": {name: {"cert": f.cert, "key": f.key} for name, f in self.clients},
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> ClusterCerts:
        return ClusterCerts(
            ca_file=str(data["ca_file"]),
            server=CertFiles(str(data["server"]["cert"]), str(data["server"]["key"])),
            clients=tuple(
                (str(name), CertFiles(str(f["cert"]), str(f["key"])))
                for name, f in data["clients"].items()
            ),
        )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: str, issuer: x509.Name, public_key: Any) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
    )


def _leaf(
    subject: str,
    sans: list[x509.GeneralName],
    ca_key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca_name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
    )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_cluster_certs(directory: str | Path, users: Sequence[str] = ("root",)) -> ClusterCerts:
    """A CA, the members' certificate and one client certificate per user, written into
    `directory/tls/` (see the module docstring); where they are."""
    folder = Path(directory).resolve() / "tls"
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("etcdspec local CA")
    ca_cert = (
        _builder("etcdspec local CA", ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_cert(folder / "ca.pem", ca_cert)
    server_sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.DNSName("localhost"),
    ]
    server_cert, server_key = _leaf("etcdspec member", server_sans, ca_key, ca_name)
    _write_cert(folder / "server.pem", server_cert)
    _write_key(folder / "server-key.pem", server_key)
    clients = []
    for user in users:
        if not user or not all(c.isalnum() or c in "-_." for c in user) or user[0] == ".":
            raise ValueError(f"user name {user!r}: use letters, digits, '-', '_' and '.'")
        cert, key = _leaf(user, [x509.DNSName(f"{user}.client.etcdspec")], ca_key, ca_name)
        _write_cert(folder / f"{user}.pem", cert)
        _write_key(folder / f"{user}-key.pem", key)
        clients.append(
            (user, CertFiles(str(folder / f"{user}.pem"), str(folder / f"{user}-key.pem")))
        )
    return ClusterCerts(
        ca_file=str(folder / "ca.pem"),
        server=CertFiles(str(folder / "server.pem"), str(folder / "server-key.pem")),
        clients=tuple(clients),
    )
