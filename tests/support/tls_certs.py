"""Test certificates made with `trustme`, in the shape the launcher takes (ClusterCerts).

`trustme_certs(directory, users)` makes a fresh CA, the members' certificate (127.0.0.1,
::1, localhost; server and client use) and one client certificate per user with the
user as its common name, and writes them as PEM files under `directory`.
`foreign_client(directory, user)` is a client certificate for `user` from another CA
(what a server must refuse). Client certificates carry a DNS name as well as the common
name: Go's TLS (etcd's) refuses a certificate whose subjectAltName is empty and critical,
which trustme writes when given no name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trustme

from etcdspec.impl.tools.certs import CertFiles, ClusterCerts


def _issue(ca: trustme.CA, folder: Path, stem: str, *names: str, common_name: str) -> CertFiles:
    leaf = ca.issue_cert(*names, common_name=common_name)
    cert, key = folder / f"{stem}.pem", folder / f"{stem}-key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return CertFiles(str(cert), str(key))


def trustme_certs(directory: Path, users: Sequence[str] = ("root",)) -> ClusterCerts:
    folder = directory / "certs"
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = _issue(
        ca, folder, "server", "127.0.0.1", "::1", "localhost", common_name="etcdspec member"
    )
    clients = tuple(
        (user, _issue(ca, folder, user, f"{user}.client.test", common_name=user)) for user in users
    )
    return ClusterCerts(ca_file=str(folder / "ca.pem"), server=server, clients=clients)


def foreign_client(directory: Path, user: str) -> tuple[str, CertFiles]:
    """(the other CA's file, a client certificate for `user` that CA signed)."""
    folder = directory / "foreign"
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return str(folder / "ca.pem"), _issue(ca, folder, user, f"{user}.client.test", common_name=user)


def foreign_member(directory: Path) -> tuple[str, CertFiles]:
    """(another CA's file, a member certificate for 127.0.0.1 that CA signed)."""
    folder = directory / "foreign-member"
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return str(folder / "ca.pem"), _issue(
        ca, folder, "server", "127.0.0.1", "::1", "localhost", common_name="intruder"
    )
