"""etcd 3.5's v3 gRPC API as a table: every service and method etcd serves on its client
port, with its gRPC path and streaming kind, from etcd's protos (rpc.proto, v3lock.proto,
v3election.proto); and the README's compatibility table rendered from which of them a
server serves.

Which methods WE serve is not written here: the test that keeps README's table true
(tests/impl/api/test_impl_api_table.py) asks a running member of ours every method of
this table and counts a method served unless the answer is UNIMPLEMENTED — so a service
registered later shows up by itself, and the README needs only its regenerated rows.
The same test asks real etcd 3.5.1, so the table cannot name a method etcd lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    UNARY = "unary"
    SERVER_STREAM = "server stream"
    BIDI_STREAM = "bidirectional stream"


@dataclass(frozen=True)
class Method:
    package: str
    service: str
    name: str
    kind: Kind = Kind.UNARY

    @property
    def path(self) -> str:
        return f"/{self.package}.{self.service}/{self.name}"

    def describe(self) -> str:
        return f"{self.service}.{self.name} ({self.kind.value})"


def _service(package: str, service: str, *names: str, **kinds: Kind) -> list[Method]:
    return [Method(package, service, name, kinds.get(name, Kind.UNARY)) for name in names]


METHODS: tuple[Method, ...] = tuple(
    _service("etcdserverpb", "KV", "Range", "Put", "DeleteRange", "Txn", "Compact")
    + _service("etcdserverpb", "Watch", "Watch", Watch=Kind.BIDI_STREAM)
    + _service(
        "etcdserverpb",
        "Lease",
        "LeaseGrant",
        "LeaseRevoke",
        "LeaseKeepAlive",
        "LeaseTimeToLive",
        "LeaseLeases",
        LeaseKeepAlive=Kind.BIDI_STREAM,
    )
    + _service(
        "etcdserverpb",
        "Cluster",
        "MemberAdd",
        "MemberRemove",
        "MemberUpdate",
        "MemberList",
        "MemberPromote",
    )
    + _service(
        "etcdserverpb",
        "Maintenance",
        "Alarm",
        "Status",
        "Defragment",
        "Hash",
        "HashKV",
        "Snapshot",
        "MoveLeader",
        "Downgrade",
        Snapshot=Kind.SERVER_STREAM,
    )
    + _service(
        "etcdserverpb",
        "Auth",
        "AuthEnable",
        "AuthDisable",
        "AuthStatus",
        "Authenticate",
        "UserAdd",
        "UserGet",
        "UserList",
        "UserDelete",
        "UserChangePassword",
        "UserGrantRole",
        "UserRevokeRole",
        "RoleAdd",
        "RoleGet",
        "RoleList",
        "RoleDelete",
        "RoleGrantPermission",
        "RoleRevokePermission",
    )
    + _service("v3lockpb", "Lock", "Lock", "Unlock")
    + _service(
        "v3electionpb",
        "Election",
        "Campaign",
        "Proclaim",
        "Leader",
        "Observe",
        "Resign",
        Observe=Kind.SERVER_STREAM,
    )
)

TABLE_START = "<!-- etcd-api-table:start (generated: tests/impl/api/test_impl_api_table.py) -->"
TABLE_END = "<!-- etcd-api-table:end -->"


def render_table(served: set[str]) -> str:
    """README's table: one row per service, the methods served and those not.

    `served` holds the gRPC paths a server answers (anything but UNIMPLEMENTED)."""
    lines = [
        TABLE_START,
        "| service | served | not served |",
        "|---|---|---|",
    ]
    services: dict[str, list[Method]] = {}
    for method in METHODS:
        services.setdefault(f"{method.package}.{method.service}", []).append(method)
    for name, methods in services.items():
        yes = ", ".join(m.name for m in methods if m.path in served) or "—"
        no = ", ".join(m.name for m in methods if m.path not in served) or "—"
        lines.append(f"| `{name}` | {yes} | {no} |")
    lines.append(TABLE_END)
    return "\n".join(lines)
