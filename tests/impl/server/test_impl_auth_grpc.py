"""Requests that auth must refuse, sent over gRPC to our member and to real etcd side by
side: with no token, a forged token, and a user's token outside its permissions, every
KV, Watch, Lease, Maintenance and Auth method tried; both servers give the same answer
(status code and message, or the watch's cancel reason), and nothing changes state.
Then JWT tokens: the same `--auth-token jwt,...` flags on both servers, a token works,
and a token signed with another key does not.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import etcd_procs
import grpc
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from etcdspec.impl.pb import auth_pb2, rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

Metadata = list[tuple[str, str]]


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.lease = rpc_pb2_grpc.LeaseStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        self.auth = rpc_pb2_grpc.AuthStub(channel)


def token_of(stubs: Stubs, name: str, password: str) -> Metadata:
    answer = stubs.auth.Authenticate(
        rpc_pb2.AuthenticateRequest(name=name, password=password), timeout=10
    )
    return [("token", answer.token)]


def _first_watch_response(stubs: Stubs, key: bytes, md: Metadata) -> str:
    create = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=key))
    responses = stubs.watch.Watch(iter([create]), metadata=md, timeout=5)
    try:
        first = next(responses)
    finally:
        responses.cancel()
    return f"created={first.created} canceled={first.canceled} reason={first.cancel_reason!r}"


def _first_snapshot_chunk(stubs: Stubs, md: Metadata) -> str:
    chunks = stubs.maintenance.Snapshot(rpc_pb2.SnapshotRequest(), metadata=md, timeout=10)
    try:
        next(chunks)
    finally:
        chunks.cancel()
    return "OK"


Attempt = Callable[[Stubs, Metadata, int], object]

# Each must be refused for a caller without root, and for alice (READWRITE on prefix a)
# because it reaches outside prefix a.
ATTEMPTS: dict[str, Attempt] = {
    "range z1": lambda s, md, _: s.kv.Range(rpc_pb2.RangeRequest(key=b"z1"), metadata=md),
    "range all": lambda s, md, _: s.kv.Range(
        rpc_pb2.RangeRequest(key=b"\x00", range_end=b"\x00"), metadata=md
    ),
    "range a..c": lambda s, md, _: s.kv.Range(
        rpc_pb2.RangeRequest(key=b"a", range_end=b"c"), metadata=md
    ),
    "put z2": lambda s, md, _: s.kv.Put(rpc_pb2.PutRequest(key=b"z2", value=b"x"), metadata=md),
    "put z2 prev_kv": lambda s, md, _: s.kv.Put(
        rpc_pb2.PutRequest(key=b"z2", value=b"x", prev_kv=True), metadata=md
    ),
    "delete z1": lambda s, md, _: s.kv.DeleteRange(
        rpc_pb2.DeleteRangeRequest(key=b"z1"), metadata=md
    ),
    "delete all": lambda s, md, _: s.kv.DeleteRange(
        rpc_pb2.DeleteRangeRequest(key=b"\x00", range_end=b"\x00"), metadata=md
    ),
    "txn compare z1": lambda s, md, _: s.kv.Txn(
        rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(key=b"z1", target=rpc_pb2.Compare.VERSION, version=1)],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"a3"))],
        ),
        metadata=md,
    ),
    "txn failure put z2": lambda s, md, _: s.kv.Txn(
        rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(key=b"a1", target=rpc_pb2.Compare.VERSION, version=99)],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"a3"))],
            failure=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"z2"))],
        ),
        metadata=md,
    ),
    "txn get z1": lambda s, md, _: s.kv.Txn(
        rpc_pb2.TxnRequest(
            success=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=b"z1"))]
        ),
        metadata=md,
    ),
    "put a2 on z1's lease": lambda s, md, lease: s.kv.Put(
        rpc_pb2.PutRequest(key=b"a2", value=b"x", lease=lease), metadata=md
    ),
    "lease revoke": lambda s, md, lease: s.lease.LeaseRevoke(
        rpc_pb2.LeaseRevokeRequest(ID=lease), metadata=md
    ),
    "watch z1": lambda s, md, _: _first_watch_response(s, b"z1", md),
    "defragment": lambda s, md, _: s.maintenance.Defragment(
        rpc_pb2.DefragmentRequest(), metadata=md
    ),
    "hash": lambda s, md, _: s.maintenance.Hash(rpc_pb2.HashRequest(), metadata=md),
    "hashkv": lambda s, md, _: s.maintenance.HashKV(rpc_pb2.HashKVRequest(), metadata=md),
    "snapshot": lambda s, md, _: _first_snapshot_chunk(s, md),
    "user add": lambda s, md, _: s.auth.UserAdd(
        rpc_pb2.AuthUserAddRequest(name="mallory", password="m"), metadata=md
    ),
    "user list": lambda s, md, _: s.auth.UserList(rpc_pb2.AuthUserListRequest(), metadata=md),
    "user get root": lambda s, md, _: s.auth.UserGet(
        rpc_pb2.AuthUserGetRequest(name="root"), metadata=md
    ),
    "user grant root": lambda s, md, _: s.auth.UserGrantRole(
        rpc_pb2.AuthUserGrantRoleRequest(user="alice", role="root"), metadata=md
    ),
    "user passwd root": lambda s, md, _: s.auth.UserChangePassword(
        rpc_pb2.AuthUserChangePasswordRequest(name="root", password="x"), metadata=md
    ),
    "role grant": lambda s, md, _: s.auth.RoleGrantPermission(
        rpc_pb2.AuthRoleGrantPermissionRequest(
            name="a",
            perm=auth_pb2.Permission(permType=auth_pb2.Permission.READWRITE, key=b"z"),
        ),
        metadata=md,
    ),
    "role delete": lambda s, md, _: s.auth.RoleDelete(
        rpc_pb2.AuthRoleDeleteRequest(role="a"), metadata=md
    ),
    "auth disable": lambda s, md, _: s.auth.AuthDisable(rpc_pb2.AuthDisableRequest(), metadata=md),
    "auth status": lambda s, md, _: s.auth.AuthStatus(rpc_pb2.AuthStatusRequest(), metadata=md),
}

CALLERS = ("no token", "forged token", "alice")


def outcome(attempt: Attempt, stubs: Stubs, md: Metadata, lease: int) -> str:
    try:
        answer = attempt(stubs, md, lease)
    except grpc.RpcError as error:
        return f"{error.code().name}: {error.details()}"
    return answer if isinstance(answer, str) else "OK"


def run_matrix(endpoint: str) -> tuple[dict[str, str], list[object]]:
    """Set up users, keys and a lease as root, try every attempt as every caller; the
    outcomes, and what root sees of the state before and after."""
    with grpc.insecure_channel(endpoint) as channel:
        stubs = Stubs(channel)
        auth = stubs.auth
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="rootpw"), timeout=10)
        auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="alice", password="alicepw"), timeout=10)
        auth.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="a"))
        perm = auth_pb2.Permission(permType=auth_pb2.Permission.READWRITE, key=b"a", range_end=b"b")
        auth.RoleGrantPermission(rpc_pb2.AuthRoleGrantPermissionRequest(name="a", perm=perm))
        auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="alice", role="a"))
        auth.AuthEnable(rpc_pb2.AuthEnableRequest())
        root = token_of(stubs, "root", "rootpw")
        lease = stubs.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=300), metadata=root).ID
        stubs.kv.Put(rpc_pb2.PutRequest(key=b"a1", value=b"1"), metadata=root)
        stubs.kv.Put(rpc_pb2.PutRequest(key=b"z1", value=b"1", lease=lease), metadata=root)
        metadata = {
            "no token": [],
            "forged token": [("token", "forgedtokenabcdef.1")],
            "alice": token_of(stubs, "alice", "alicepw"),
        }

        def state() -> list[object]:
            everything = stubs.kv.Range(
                rpc_pb2.RangeRequest(key=b"\x00", range_end=b"\x00"), metadata=root
            )
            status = auth.AuthStatus(rpc_pb2.AuthStatusRequest(), metadata=root)
            users = auth.UserList(rpc_pb2.AuthUserListRequest(), metadata=root)
            role = auth.RoleGet(rpc_pb2.AuthRoleGetRequest(role="a"), metadata=root)
            return [
                everything.header.revision,
                [(kv.key, kv.value, kv.mod_revision) for kv in everything.kvs],
                (status.enabled, status.authRevision),
                list(users.users),
                [(p.permType, p.key, p.range_end) for p in role.perm],
            ]

        before = state()
        outcomes = {
            f"{who} / {name}": outcome(attempt, stubs, metadata[who], lease)
            for who in CALLERS
            for name, attempt in ATTEMPTS.items()
        }
        # Authentication itself: a wrong password, an unknown user.
        for name, password in (("alice", "wrong"), ("nobody", "x")):
            outcomes[f"authenticate {name}"] = outcome(
                lambda s, md, _, n=name, p=password: token_of(s, n, p), stubs, [], 0
            )
        return outcomes, [before, state()]


@pytest.fixture(scope="module")
def matrices(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[dict[str, str], list[object]]]]:
    results = {}
    for kind in ("etcd", "ours"):
        with etcd_procs.cluster(kind, tmp_path_factory.mktemp(f"grpc-{kind}"), 1) as cluster:
            results[kind] = run_matrix(cluster.plan.members[0].client_url.removeprefix("http://"))
    yield results


@pytest.mark.etcd
@pytest.mark.slow
def test_every_refusal_is_etcds(matrices: dict[str, tuple[dict[str, str], list[object]]]) -> None:
    ours, theirs = matrices["ours"][0], matrices["etcd"][0]
    differing = {k: (ours[k], theirs[k]) for k in theirs if ours.get(k) != theirs[k]}
    assert not differing, "\n".join(
        f"{k}: ours {o!r}, etcd {t!r}" for k, (o, t) in differing.items()
    )


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ours", "etcd"])
def test_nothing_refused_took_effect(
    matrices: dict[str, tuple[dict[str, str], list[object]]], kind: str
) -> None:
    outcomes, (before, after) = matrices[kind]
    allowed = {k: v for k, v in outcomes.items() if v == "OK" or "canceled=False" in v}
    # Only alice's own reads of its prefix may pass; every other attempt is refused.
    assert allowed == {}, allowed
    assert after == before


# ---- JWT -----------------------------------------------------------------------------


def _write_rsa_pair(directory: Path, name: str) -> tuple[Path, Path]:
    private = rsa.generate_private_key(65537, 2048)
    priv = directory / f"{name}.key"
    pub = directory / f"{name}.pub"
    priv.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return priv, pub


@pytest.mark.etcd
@pytest.mark.parametrize("kind", ["ours", "etcd"])
def test_jwt_tokens_as_etcd_issues_them(tmp_path: Path, kind: str) -> None:
    priv, pub = _write_rsa_pair(tmp_path, "server")
    flag = f"--auth-token=jwt,pub-key={pub},priv-key={priv},sign-method=RS256,ttl=5m"
    plan = launcher.plan_cluster(tmp_path / "cluster", 1, heartbeat_ms=50, election_ms=500)
    members = launcher.start_cluster(plan, [*etcd_procs.program_for(kind), flag])
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        with grpc.insecure_channel(plan.endpoints[0].removeprefix("http://")) as channel:
            stubs = Stubs(channel)
            stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="pw"))
            stubs.auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
            stubs.auth.AuthEnable(rpc_pb2.AuthEnableRequest())
            token = token_of(stubs, "root", "pw")
            assert token[0][1].count(".") == 2  # header.claims.signature
            stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), metadata=token)
            # The same claims signed with another key are refused.
            other_priv, _ = _write_rsa_pair(tmp_path, "other")
            forged = jwt.encode(
                {"username": "root", "revision": 99, "exp": 4102444800},
                other_priv.read_bytes(),
                algorithm="RS256",
            )
            with pytest.raises(grpc.RpcError) as refused:
                stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"w"), metadata=[("token", forged)])
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.UNAUTHENTICATED,
                "etcdserver: invalid auth token",
            )
            got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=token)
            assert [kv.value for kv in got.kvs] == [b"v"]
            # A JWT names the auth revision it was issued at: once the store moves on,
            # reads and writes with it are refused until the client authenticates again.
            stubs.auth.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="later"), metadata=token)
            for call in (
                lambda: stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=token),
                lambda: stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"x"), metadata=token),
            ):
                with pytest.raises(grpc.RpcError) as stale:
                    call()
                # etcd 3.5 sends the auth package's error as is, code Unknown.
                assert (stale.value.code(), stale.value.details()) == (
                    grpc.StatusCode.UNKNOWN,
                    "auth: revision in header is old",
                )
            fresh = token_of(stubs, "root", "pw")
            got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=fresh)
            assert [kv.value for kv in got.kvs] == [b"v"]
        # etcdctl authenticates with it too.
        result = etcd_procs.etcdctl(plan.endpoints, "--user=root:pw", "get", "k")
        assert (result.returncode, result.stdout) == (0, "k\nv\n")
    finally:
        launcher.stop_members(members)


@pytest.mark.etcd
@pytest.mark.parametrize("kind", ["ours", "etcd"])
def test_auth_survives_a_restart_and_simple_tokens_do_not(tmp_path: Path, kind: str) -> None:
    """Users, roles and the enabled flag are in the member's database; simple tokens
    are in its memory only, so after a restart the old one is refused and a new one
    works (as etcd), in the "token" metadata or, without it, in "authorization"."""
    with etcd_procs.cluster(kind, tmp_path, 1) as cluster:
        endpoint = cluster.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(endpoint) as channel:
            stubs = Stubs(channel)
            stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="pw"))
            stubs.auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
            stubs.auth.AuthEnable(rpc_pb2.AuthEnableRequest())
            old = token_of(stubs, "root", "pw")
            stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), metadata=old)
        name = cluster.members[0].plan.name
        launcher.stop_member(cluster.member(name))
        cluster.restart(name)
        launcher.wait_ready(cluster.endpoints, timeout_s=60)
        with grpc.insecure_channel(endpoint) as channel:
            stubs = Stubs(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=old, timeout=10)
            assert refused.value.details() == "etcdserver: invalid auth token"
            with pytest.raises(grpc.RpcError) as anonymous:
                stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), timeout=10)
            assert anonymous.value.details() == "etcdserver: user name is empty"
            new = token_of(stubs, "root", "pw")
            got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=new, timeout=10)
            assert [kv.value for kv in got.kvs] == [b"v"]
            # Without "token", the "authorization" metadata (the gateway's) is read.
            gateway = [("authorization", new[0][1])]
            got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=gateway, timeout=10)
            assert [kv.value for kv in got.kvs] == [b"v"]


@pytest.mark.etcd
@pytest.mark.parametrize("kind", ["ours", "etcd"])
def test_leases_with_keys_expire_while_auth_is_enabled(tmp_path: Path, kind: str) -> None:
    """The leader revokes an expired lease with root's rights: its keys go, though the
    revoke carries no user's token."""
    with etcd_procs.cluster(kind, tmp_path, 3) as cluster:
        endpoint = cluster.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(endpoint) as channel:
            stubs = Stubs(channel)
            stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="pw"))
            stubs.auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
            stubs.auth.AuthEnable(rpc_pb2.AuthEnableRequest())
            root = token_of(stubs, "root", "pw")
            lease = stubs.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=2), metadata=root).ID
            stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v", lease=lease), metadata=root)
            deadline = time.monotonic() + 20
            while True:
                got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=root, timeout=5)
                if not got.kvs:
                    break
                assert time.monotonic() < deadline, "the leased key outlived its lease by 18 s"
                time.sleep(0.2)


@pytest.mark.etcd
@pytest.mark.parametrize("kind", ["ours", "etcd"])
@pytest.mark.parametrize("tokens", ["simple", "jwt"])
def test_an_expired_token_is_refused_and_changes_nothing(
    tmp_path: Path, kind: str, tokens: str
) -> None:
    """A simple token left unused past `--auth-token-ttl`, and a JWT past its `ttl`, are
    refused as etcd refuses them ("invalid auth token"); the put tried with one does not
    happen; a fresh token works again."""
    if tokens == "simple":
        flag = "--auth-token-ttl=2"
    else:
        priv, pub = _write_rsa_pair(tmp_path, "server")
        flag = f"--auth-token=jwt,pub-key={pub},priv-key={priv},sign-method=RS256,ttl=2s"
    plan = launcher.plan_cluster(tmp_path / "cluster", 1, heartbeat_ms=50, election_ms=500)
    members = launcher.start_cluster(plan, [*etcd_procs.program_for(kind), flag])
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        with grpc.insecure_channel(plan.endpoints[0].removeprefix("http://")) as channel:
            stubs = Stubs(channel)
            stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="pw"))
            stubs.auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
            stubs.auth.AuthEnable(rpc_pb2.AuthEnableRequest())
            token = token_of(stubs, "root", "pw")
            stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), metadata=token, timeout=10)
            time.sleep(5.0)  # past the TTL on a real server's clock: nothing to drive here
            with pytest.raises(grpc.RpcError) as expired:
                stubs.kv.Put(
                    rpc_pb2.PutRequest(key=b"k", value=b"late"), metadata=token, timeout=10
                )
            assert (expired.value.code(), expired.value.details()) == (
                grpc.StatusCode.UNAUTHENTICATED,
                "etcdserver: invalid auth token",
            )
            fresh = token_of(stubs, "root", "pw")
            got = stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=fresh, timeout=10)
            assert [(kv.value, kv.version) for kv in got.kvs] == [(b"v", 1)]
    finally:
        launcher.stop_members(members)


def _handled(client_url: str) -> dict[str, int]:
    """The non-zero grpc_server_handled_total samples of the member's /metrics, by their
    labels, for the methods this test calls (etcd also exports a zero sample for every
    method and code it serves; ours only those a call ended with)."""
    with urllib.request.urlopen(f"{client_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("grpc_server_handled_total{"):
            labels, _, value = line.rpartition(" ")
            ours = 'grpc_method="Authenticate"' in labels or "etcdserverpb.KV" in labels
            if ours and float(value) > 0:
                samples[labels] = int(float(value))
    return samples


@pytest.mark.etcd
def test_refused_requests_are_counted_as_etcd_counts_them(tmp_path: Path) -> None:
    """Wrong passwords, an unknown user, a forged token and a denied key are each counted
    in grpc_server_handled_total under their status, the same samples on ours and etcd."""
    counted = {}
    for kind in ("ours", "etcd"):
        with etcd_procs.cluster(kind, tmp_path / kind, 1) as cluster:
            url = cluster.plan.members[0].client_url
            with grpc.insecure_channel(url.removeprefix("http://")) as channel:
                stubs = Stubs(channel)
                stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="pw"))
                stubs.auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
                stubs.auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="alice", password="apw"))
                stubs.auth.AuthEnable(rpc_pb2.AuthEnableRequest())
                alice = token_of(stubs, "alice", "apw")
                for name, password in (("root", "wrong"), ("root", "wrong2"), ("nobody", "x")):
                    with pytest.raises(grpc.RpcError):
                        token_of(stubs, name, password)
                forged = [("token", "forgedtokenabcdef.1")]
                for metadata in (forged, alice, alice):
                    with pytest.raises(grpc.RpcError):
                        stubs.kv.Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), metadata=metadata)
                with pytest.raises(grpc.RpcError):
                    stubs.kv.Range(rpc_pb2.RangeRequest(key=b"k"), metadata=alice)
            counted[kind] = _handled(url)
    assert counted["ours"] == counted["etcd"]
    assert counted["ours"] == {
        'grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="Authenticate",'
        'grpc_service="etcdserverpb.Auth",grpc_type="unary"}': 3,
        'grpc_server_handled_total{grpc_code="OK",grpc_method="Authenticate",'
        'grpc_service="etcdserverpb.Auth",grpc_type="unary"}': 1,
        'grpc_server_handled_total{grpc_code="PermissionDenied",grpc_method="Put",'
        'grpc_service="etcdserverpb.KV",grpc_type="unary"}': 2,
        'grpc_server_handled_total{grpc_code="PermissionDenied",grpc_method="Range",'
        'grpc_service="etcdserverpb.KV",grpc_type="unary"}': 1,
        'grpc_server_handled_total{grpc_code="Unauthenticated",grpc_method="Put",'
        'grpc_service="etcdserverpb.KV",grpc_type="unary"}': 1,
    }
