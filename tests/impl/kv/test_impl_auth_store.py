"""The auth store through the log: etcd's rules for users, roles and the root user, the
auth revision, permission checks at apply time (nothing changes when one is refused),
records surviving a restart and a snapshot restore; merged permissions; tokens."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from etcdspec.impl import errors
from etcdspec.impl.errors import EtcdErrorKind
from etcdspec.impl.kv.applier import Applier, ApplyResult
from etcdspec.impl.kv.auth_perms import READ, WRITE, UserPerms, interval_of
from etcdspec.impl.kv.auth_store import hash_password
from etcdspec.impl.kv.auth_tokens import (
    AuthInfo,
    JwtTokens,
    SimpleTokens,
    TokenConfigError,
    TokenNotApplied,
    token_provider,
)
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import auth_pb2
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2 as pb

Perm = auth_pb2.Permission


class Log:
    """An applier fed requests as committed entries, one index after another."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index = 0
        self.applier = self._open()

    def _open(self) -> Applier:
        backend = Backend(self.path, durable=False)
        return Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend, 0))

    def reopen(self) -> None:
        self.applier.backend.close()
        self.applier = self._open()

    def apply(self, field: str, request: Message, user: str = "", revision: int = 0) -> ApplyResult:
        internal = internal_pb2.InternalRaftRequest()
        internal.header.username = user
        internal.header.auth_revision = revision
        getattr(internal, field).CopyFrom(request)
        self.index += 1
        return self.applier.apply(self.index, 1, internal.SerializeToString())

    def ok(self, field: str, request: Message, user: str = "", revision: int = 0) -> Message:
        result = self.apply(field, request, user, revision)
        assert result.error is None, result.describe()
        assert result.response is not None
        return result.response

    def refused(self, field: str, request: Message, user: str = "", revision: int = 0) -> str:
        result = self.apply(field, request, user, revision)
        assert result.error is not None, f"{field} was not refused"
        return result.error.message

    @property
    def auth(self):  # type: ignore[no-untyped-def]
        return self.applier.auth

    def add_user(self, name: str, password: str = "pw") -> None:
        hashed = hash_password(password, cost=4)
        self.ok("auth_user_add", pb.AuthUserAddRequest(name=name, hashedPassword=hashed))

    def enable_with_root(self) -> None:
        self.add_user("root", "rootpw")
        self.ok("auth_user_grant_role", pb.AuthUserGrantRoleRequest(user="root", role="root"))
        self.ok("auth_enable", pb.AuthEnableRequest())

    def root(self) -> tuple[str, int]:
        return "root", self.auth.revision


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "m.db")


def test_enable_needs_a_root_user_with_the_root_role(log: Log) -> None:
    assert log.refused("auth_enable", pb.AuthEnableRequest()) == errors.ROOT_USER_NOT_EXIST.message
    log.add_user("root")
    assert log.refused("auth_enable", pb.AuthEnableRequest()) == errors.ROOT_ROLE_NOT_EXIST.message
    log.ok("auth_user_grant_role", pb.AuthUserGrantRoleRequest(user="root", role="root"))
    revision = log.auth.revision
    log.ok("auth_enable", pb.AuthEnableRequest())
    assert log.auth.enabled and log.auth.revision == revision  # enabling does not bump it


def test_each_change_bumps_the_auth_revision_from_one(log: Log) -> None:
    assert log.auth.revision == 1
    log.add_user("u")
    log.ok("auth_role_add", pb.AuthRoleAddRequest(name="r"))
    log.ok("auth_user_grant_role", pb.AuthUserGrantRoleRequest(user="u", role="r"))
    log.ok("auth_user_grant_role", pb.AuthUserGrantRoleRequest(user="u", role="r"))  # ignored
    perm = Perm(permType=Perm.READ, key=b"a")
    log.ok("auth_role_grant_permission", pb.AuthRoleGrantPermissionRequest(name="r", perm=perm))
    assert log.auth.revision == 5


@pytest.mark.parametrize(
    ("field", "request_", "kind"),
    [
        ("auth_user_add", pb.AuthUserAddRequest(name="u"), errors.USER_ALREADY_EXIST),
        ("auth_user_add", pb.AuthUserAddRequest(name=""), errors.USER_EMPTY),
        ("auth_user_get", pb.AuthUserGetRequest(name="nobody"), errors.USER_NOT_FOUND),
        ("auth_user_delete", pb.AuthUserDeleteRequest(name="nobody"), errors.USER_NOT_FOUND),
        ("auth_role_add", pb.AuthRoleAddRequest(name="r"), errors.ROLE_ALREADY_EXIST),
        ("auth_role_add", pb.AuthRoleAddRequest(name=""), errors.ROLE_EMPTY),
        ("auth_role_get", pb.AuthRoleGetRequest(role="nope"), errors.ROLE_NOT_FOUND),
        (
            "auth_user_grant_role",
            pb.AuthUserGrantRoleRequest(user="u", role="nope"),
            errors.ROLE_NOT_FOUND,
        ),
        (
            "auth_user_revoke_role",
            pb.AuthUserRevokeRoleRequest(name="u", role="r"),
            errors.ROLE_NOT_GRANTED,
        ),
        (
            "auth_role_revoke_permission",
            pb.AuthRoleRevokePermissionRequest(role="r", key=b"a"),
            errors.PERMISSION_NOT_GRANTED,
        ),
        (
            "auth_role_grant_permission",
            pb.AuthRoleGrantPermissionRequest(name="r"),
            errors.PERMISSION_NOT_GIVEN,
        ),
    ],
)
def test_refused_changes_change_nothing(
    log: Log, field: str, request_: Message, kind: EtcdErrorKind
) -> None:
    log.add_user("u")
    log.ok("auth_role_add", pb.AuthRoleAddRequest(name="r"))
    backend = log.applier.backend
    revision, records = (
        log.auth.revision,
        (backend.auth_records("user"), backend.auth_records("role")),
    )
    assert log.refused(field, request_) == kind.message
    assert log.auth.revision == revision
    assert (backend.auth_records("user"), backend.auth_records("role")) == records


def test_root_stays_root_while_auth_is_enabled(log: Log) -> None:
    log.enable_with_root()
    user, rev = log.root()
    for field, request_ in [
        ("auth_user_delete", pb.AuthUserDeleteRequest(name="root")),
        ("auth_user_revoke_role", pb.AuthUserRevokeRoleRequest(name="root", role="root")),
        ("auth_role_delete", pb.AuthRoleDeleteRequest(role="root")),
    ]:
        assert log.refused(field, request_, user, rev) == errors.INVALID_AUTH_MGMT.message


def test_admin_requests_need_root_once_enabled(log: Log) -> None:
    log.enable_with_root()
    user, rev = log.root()
    log.ok(
        "auth_user_add",
        pb.AuthUserAddRequest(name="u", hashedPassword=hash_password("p", 4)),
        user,
        rev,
    )
    rev = log.auth.revision
    request = pb.AuthRoleAddRequest(name="r")
    assert log.refused("auth_role_add", request) == errors.USER_EMPTY.message
    assert log.refused("auth_role_add", request, "u", rev) == errors.PERMISSION_DENIED.message
    assert log.refused("auth_role_add", request, "ghost", rev) == errors.USER_NOT_FOUND.message
    # A user reads itself without root.
    got = log.ok("auth_user_get", pb.AuthUserGetRequest(name="u"), "u", rev)
    assert isinstance(got, pb.AuthUserGetResponse) and list(got.roles) == []
    log.ok("auth_role_add", request, user, rev)


def grant(log: Log, role: str, perm_type: int, key: bytes, range_end: bytes = b"") -> None:
    user, rev = log.root()
    perm = Perm(permType=perm_type, key=key, range_end=range_end)  # type: ignore[arg-type]
    log.ok(
        "auth_role_grant_permission",
        pb.AuthRoleGrantPermissionRequest(name=role, perm=perm),
        user,
        rev,
    )


@pytest.fixture
def writer(log: Log) -> Log:
    """Auth enabled; user `w` with role `rw`: READWRITE over prefix "a", READ over "b"."""
    log.enable_with_root()
    user, rev = log.root()
    log.ok(
        "auth_user_add",
        pb.AuthUserAddRequest(name="w", hashedPassword=hash_password("p", 4)),
        user,
        rev,
    )
    log.ok("auth_role_add", pb.AuthRoleAddRequest(name="rw"), *log.root())
    grant(log, "rw", Perm.READWRITE, b"a", b"b")
    grant(log, "rw", Perm.READ, b"b")
    log.ok("auth_user_grant_role", pb.AuthUserGrantRoleRequest(user="w", role="rw"), *log.root())
    return log


def test_writes_are_checked_at_apply_and_a_refused_one_changes_nothing(writer: Log) -> None:
    rev = writer.auth.revision
    writer.ok("put", pb.PutRequest(key=b"a1", value=b"v"), "w", rev)
    revision = writer.applier.backend.current_revision()
    for field, request_, user, auth_rev, kind in [
        ("put", pb.PutRequest(key=b"b", value=b"v"), "w", rev, errors.PERMISSION_DENIED),
        ("put", pb.PutRequest(key=b"a2", value=b"v"), "", 0, errors.USER_EMPTY),
        ("put", pb.PutRequest(key=b"a2", value=b"v"), "w", rev - 1, errors.AUTH_OLD_REVISION),
        (
            "delete_range",
            pb.DeleteRangeRequest(key=b"a", range_end=b"c"),
            "w",
            rev,
            errors.PERMISSION_DENIED,
        ),
        (
            "txn",
            pb.TxnRequest(
                compare=[pb.Compare(key=b"c", target=pb.Compare.VERSION)],
                success=[pb.RequestOp(request_put=pb.PutRequest(key=b"a3"))],
            ),
            "w",
            rev,
            errors.PERMISSION_DENIED,
        ),
        (
            "txn",
            pb.TxnRequest(failure=[pb.RequestOp(request_put=pb.PutRequest(key=b"b"))]),
            "w",
            rev,
            errors.PERMISSION_DENIED,
        ),
    ]:
        assert writer.refused(field, request_, user, auth_rev) == kind.message, request_
    assert writer.applier.backend.current_revision() == revision
    writer.ok("delete_range", pb.DeleteRangeRequest(key=b"a", range_end=b"b"), "w", rev)


def test_lease_revoke_needs_write_on_every_attached_key(writer: Log) -> None:
    root, rev = writer.root()
    writer.ok("lease_grant", pb.LeaseGrantRequest(ID=7, TTL=60), root, rev)
    writer.ok("put", pb.PutRequest(key=b"a1", lease=7), root, rev)
    writer.ok("put", pb.PutRequest(key=b"z", lease=7), root, rev)
    request = pb.LeaseRevokeRequest(ID=7)
    assert writer.refused("lease_revoke", request, "w", rev) == errors.PERMISSION_DENIED.message
    # Nor may w attach its own key to that lease.
    attach = pb.PutRequest(key=b"a2", lease=7)
    assert writer.refused("put", attach, "w", rev) == errors.PERMISSION_DENIED.message
    writer.ok("lease_revoke", request, root, rev)


def test_the_members_own_lease_expiry_is_applied_as_root(writer: Log) -> None:
    """The leader's revoke of an expired lease carries no user: it is applied with
    root's rights (etcd's WithRoot), or leases with keys would never expire."""
    writer.ok("lease_grant", pb.LeaseGrantRequest(ID=8, TTL=60), *writer.root())
    writer.ok("put", pb.PutRequest(key=b"z", lease=8), *writer.root())
    revoke = pb.LeaseRevokeRequest(ID=8)
    assert writer.refused("lease_revoke", revoke) == errors.USER_EMPTY.message
    internal = internal_pb2.InternalRaftRequest(lease_revoke=revoke)
    internal.header.as_member = True
    writer.index += 1
    result = writer.applier.apply(writer.index, 1, internal.SerializeToString())
    assert result.error is None
    assert not writer.applier.lessor.exists(8)


def test_records_survive_a_restart(writer: Log) -> None:
    before = (
        writer.auth.revision,
        writer.auth.user_list(),
        writer.auth.role_get(pb.AuthRoleGetRequest(role="rw")),
    )
    writer.reopen()
    assert writer.auth.enabled
    after = (
        writer.auth.revision,
        writer.auth.user_list(),
        writer.auth.role_get(pb.AuthRoleGetRequest(role="rw")),
    )
    assert after == before
    writer.auth.check_password("w", "p")


def test_a_snapshot_restore_brings_the_records(writer: Log, tmp_path: Path) -> None:
    snapshot = writer.applier.backend.snapshot_bytes()
    other = Log(tmp_path / "other.db")
    assert not other.auth.enabled
    other.applier.restore(snapshot)
    assert other.auth.enabled and other.auth.user_list().users == ["root", "w"]


def test_role_delete_takes_it_from_its_users(writer: Log) -> None:
    writer.ok("auth_role_delete", pb.AuthRoleDeleteRequest(role="rw"), *writer.root())
    assert writer.auth.user_get(pb.AuthUserGetRequest(name="w")).roles == []
    rev = writer.auth.revision
    assert (
        writer.refused("put", pb.PutRequest(key=b"a1"), "w", rev)
        == errors.PERMISSION_DENIED.message
    )


def test_check_password(writer: Log) -> None:
    assert writer.auth.check_password("w", "p") == writer.auth.revision
    for name, password in [("w", "wrong"), ("nobody", "p")]:
        with pytest.raises(errors.RpcError) as raised:
            writer.auth.check_password(name, password)
        assert raised.value.kind is errors.AUTH_FAILED


# ---- merged permissions -----------------------------------------------------------------


def role(*perms: tuple[int, bytes, bytes]) -> auth_pb2.Role:
    return auth_pb2.Role(
        name=b"r",
        keyPermission=[Perm(permType=t, key=k, range_end=e) for t, k, e in perms],  # type: ignore[misc]
    )


@pytest.mark.parametrize(
    ("perms", "perm_type", "key", "range_end", "permitted"),
    [
        ([(Perm.READ, b"a", b"")], READ, b"a", b"", True),
        ([(Perm.READ, b"a", b"")], READ, b"ab", b"", False),
        ([(Perm.READ, b"a", b"")], WRITE, b"a", b"", False),
        ([(Perm.READWRITE, b"a", b"")], WRITE, b"a", b"", True),
        ([(Perm.READ, b"a", b"b")], READ, b"a", b"b", True),  # prefix a
        ([(Perm.READ, b"a", b"b")], READ, b"a", b"c", False),
        ([(Perm.READ, b"a", b"b"), (Perm.READ, b"b", b"c")], READ, b"a", b"c", True),  # union
        ([(Perm.READ, b"a", b"b"), (Perm.READ, b"ba", b"c")], READ, b"a", b"c", False),  # gap
        ([(Perm.READ, b"m", b"\x00")], READ, b"n", b"\x00", True),  # from key
        ([(Perm.READ, b"m", b"\x00")], READ, b"l", b"\x00", False),
        ([(Perm.READ, b"m", b"z")], READ, b"n", b"\x00", False),
        ([(Perm.READ, b"", b"\x00")], READ, b"", b"\x00", True),  # every key
        ([(Perm.WRITE, b"a", b"b")], READ, b"a", b"", False),
        # a reversed request range: etcd 3.5.1 permits it when a permission holds its key
        # (tests/conform/test_conform_auth_hypothesis.py asks etcd itself)
        ([(Perm.READ, b"a", b"c")], READ, b"b", b"a", True),
        ([(Perm.READ, b"a", b"c")], READ, b"d", b"a", False),
    ],
)
def test_user_perms_cover_as_etcds_interval_tree(
    perms: list[tuple[int, bytes, bytes]],
    perm_type: int,
    key: bytes,
    range_end: bytes,
    permitted: bool,
) -> None:
    assert UserPerms.of_roles([role(*perms)]).permits(perm_type, key, range_end) is permitted


# ---- tokens -------------------------------------------------------------------------------


def test_simple_tokens_expire_unless_used_and_are_dropped_with_their_user() -> None:
    now = [0.0]
    tokens = SimpleTokens(ttl_s=10, clock=lambda: now[0])
    token = tokens.assign("u", 3, "prefix", 42)
    assert token == "prefix.42"
    now[0] = 9
    assert tokens.info(token, 5) == AuthInfo("u", 5)  # the store's revision; TTL renewed
    now[0] = 18
    assert tokens.info(token, 5) == AuthInfo("u", 5)
    now[0] = 28.5
    assert tokens.info(token, 5) is None
    other = tokens.assign("v", 3, "p", 1)
    tokens.invalidate_user("v")
    assert tokens.info(other, 5) is None


def _key_pair(kind: str) -> tuple[bytes, bytes]:
    private = (
        rsa.generate_private_key(65537, 2048)
        if kind == "rsa"
        else ec.generate_private_key(ec.SECP256R1())
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem, public


@pytest.mark.parametrize(("kind", "method"), [("rsa", "RS256"), ("ec", "ES256")])
def test_jwt_tokens_carry_user_and_revision_and_refuse_forgeries(
    tmp_path: Path, kind: str, method: str
) -> None:
    private, public = _key_pair(kind)
    (tmp_path / "priv.pem").write_bytes(private)
    (tmp_path / "pub.pem").write_bytes(public)
    spec = f"jwt,pub-key={tmp_path / 'pub.pem'},priv-key={tmp_path / 'priv.pem'},sign-method={method},ttl=5m"
    tokens = token_provider(spec)
    assert isinstance(tokens, JwtTokens) and tokens.ttl_s == 300
    token = tokens.assign("u", 4, "ignored", 9)
    assert tokens.info(token, 99) == AuthInfo("u", 4)  # the revision it was issued at
    forger_private, _ = _key_pair(kind)
    forged = JwtTokens(forger_private, public, method).assign("root", 4, "", 0)
    assert tokens.info(forged, 4) is None
    assert tokens.info("not.a.token", 4) is None
    expired = JwtTokens(private, public, method, ttl_s=-1).assign("u", 4, "", 0)
    assert tokens.info(expired, 4) is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("opaque", "use 'simple'"),
        ("jwt,sign-method=HS256,pub-key=a,priv-key=b", "sign-method"),
        ("jwt,sign-method=RS256", "pub-key=PATH"),
        ("jwt,sign-method=RS256,pub-key=/nonexistent,priv-key=/nonexistent", "cannot read"),
        ("jwt,colour=blue", "unknown option"),
    ],
)
def test_bad_auth_token_flags_say_what_to_pass(spec: str, says: str) -> None:
    with pytest.raises(TokenConfigError, match=says):
        token_provider(spec)


def test_a_simple_token_from_an_index_not_applied_yet_is_waited_for(writer: Log) -> None:
    """A member asked with a token issued at a later log index (another member applied
    it first) says so, so that the caller waits for that index; a token from an index
    it has applied but does not hold is invalid."""
    applied = writer.applier.backend.consistent_index()
    with pytest.raises(TokenNotApplied) as pending:
        writer.auth.auth_info(f"abcdefghijklmnop.{applied + 2}")
    assert pending.value.index == applied + 2
    assert pending.value.kind is errors.INVALID_AUTH_TOKEN  # if never caught
    for token in (f"abcdefghijklmnop.{applied}", "no-index", "x.y"):
        with pytest.raises(errors.RpcError) as invalid:
            writer.auth.auth_info(token)
        assert type(invalid.value) is errors.RpcError
        assert invalid.value.kind is errors.INVALID_AUTH_TOKEN
    issued = writer.ok(
        "authenticate",
        internal_pb2.InternalAuthenticateRequest(name="w", simple_token="abcdefghijklmnop"),
    )
    assert isinstance(issued, pb.AuthenticateResponse)
    assert issued.token == f"abcdefghijklmnop.{writer.index}"
    assert writer.auth.auth_info(issued.token) == AuthInfo("w", writer.auth.revision)


# The cover rule against a plainer reading of it: the granted intervals' ends cut the key
# space into segments on which being covered does not change, so a request is permitted
# exactly when its first key and every cut inside it lie in a granted interval.
_WORDS = [bytes(p) for n in (1, 2) for p in itertools.product(b"ab", repeat=n)]
_KEYS = st.sampled_from([b"", *_WORDS])
_ENDS = st.sampled_from([b"", b"\x00", *_WORDS])


def _holds(interval: tuple[bytes, bytes | None], key: bytes) -> bool:
    begin, end = interval
    return begin <= key and (end is None or key < end)


@settings(max_examples=400, deadline=None)
@given(
    perms=st.lists(
        st.tuples(st.sampled_from([READ, WRITE, Perm.READWRITE]), _KEYS, _ENDS), max_size=4
    ),
    perm_type=st.sampled_from([READ, WRITE]),
    key=_KEYS,
    range_end=_ENDS,
)
def test_user_perms_agree_with_a_segment_reading(
    perms: list[tuple[int, bytes, bytes]], perm_type: int, key: bytes, range_end: bytes
) -> None:
    granted = [interval_of(k, e) for t, k, e in perms if t in (Perm.READWRITE, perm_type)]
    wanted = interval_of(key, range_end)
    begin, end = wanted
    if end is not None and end <= begin:  # empty or reversed: a grant holds its first key
        expected = any(_holds(g, begin) for g in granted)
    else:
        cuts = {begin} | {b for b, _ in granted} | {e for _, e in granted if e is not None}
        inside = [c for c in cuts if _holds(wanted, c)]
        expected = all(any(_holds(g, c) for g in granted) for c in inside)
    assert UserPerms.of_roles([role(*perms)]).permits(perm_type, key, range_end) is expected
