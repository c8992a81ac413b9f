"""A history of writes for the snapshot tests (leases, a delete, a compaction, a txn,
values large enough for overflow pages and keys enough for branch pages), and the
queries whose answers a restored member must give as the one saved from: ranges at
three revisions, a compacted read, a lease's keys, the leases, HashKV, and the auth
store (users and roles written with auth left disabled, so every query needs no token). `ask` masks what
legitimately differs between members (ids, term, the remaining TTL)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from etcdspec.impl.pb import auth_pb2, rpc_pb2_grpc
from etcdspec.impl.pb import rpc_pb2 as R

Query = Callable[[grpc.Channel], Any]
MASKED = {"cluster_id", "member_id", "raft_term", "clusterId", "memberId", "raftTerm", "TTL"}


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "N" if k in MASKED else _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def ask(query: Query, channel: grpc.Channel) -> Any:
    try:
        return _mask(MessageToDict(query(channel)))
    except grpc.RpcError as error:
        return (error.code().name, error.details())


def _kv(channel: grpc.Channel) -> rpc_pb2_grpc.KVStub:
    return rpc_pb2_grpc.KVStub(channel)


def _lease(channel: grpc.Channel) -> rpc_pb2_grpc.LeaseStub:
    return rpc_pb2_grpc.LeaseStub(channel)


QUERIES: list[tuple[str, Query]] = [
    ("every key", lambda c: _kv(c).Range(R.RangeRequest(key=b"\0", range_end=b"\0"), timeout=5)),
    (
        "at 40",
        lambda c: _kv(c).Range(R.RangeRequest(key=b"k", range_end=b"l", revision=40), timeout=5),
    ),
    (
        "at 31",
        lambda c: _kv(c).Range(R.RangeRequest(key=b"k", range_end=b"l", revision=31), timeout=5),
    ),
    ("compacted 29", lambda c: _kv(c).Range(R.RangeRequest(key=b"k", revision=29), timeout=5)),
    (
        "lease keys",
        lambda c: _lease(c).LeaseTimeToLive(R.LeaseTimeToLiveRequest(ID=77, keys=True), timeout=5),
    ),
    ("leases", lambda c: _lease(c).LeaseLeases(R.LeaseLeasesRequest(), timeout=5)),
    (
        "hashkv",
        lambda c: rpc_pb2_grpc.MaintenanceStub(c).HashKV(R.HashKVRequest(), timeout=5),
    ),
]


def _auth(channel: grpc.Channel) -> rpc_pb2_grpc.AuthStub:
    return rpc_pb2_grpc.AuthStub(channel)


QUERIES += [
    ("users", lambda c: _auth(c).UserList(R.AuthUserListRequest(), timeout=5)),
    ("user alice", lambda c: _auth(c).UserGet(R.AuthUserGetRequest(name="alice"), timeout=5)),
    ("role reader", lambda c: _auth(c).RoleGet(R.AuthRoleGetRequest(role="reader"), timeout=5)),
    ("auth status", lambda c: _auth(c).AuthStatus(R.AuthStatusRequest(), timeout=5)),
]


def write_auth(channel: grpc.Channel) -> None:
    """Users and roles, auth left disabled: root, alice with role reader (READ on k..l)."""
    auth = _auth(channel)
    auth.UserAdd(R.AuthUserAddRequest(name="root", password="rootpw"), timeout=10)
    auth.UserGrantRole(R.AuthUserGrantRoleRequest(user="root", role="root"), timeout=5)
    auth.UserAdd(R.AuthUserAddRequest(name="alice", password="alicepw"), timeout=10)
    auth.RoleAdd(R.AuthRoleAddRequest(name="reader"), timeout=5)
    perm = auth_pb2.Permission(permType=auth_pb2.Permission.READ, key=b"k", range_end=b"l")
    auth.RoleGrantPermission(R.AuthRoleGrantPermissionRequest(name="reader", perm=perm))
    auth.UserGrantRole(R.AuthUserGrantRoleRequest(user="alice", role="reader"), timeout=5)


def write_history(channel: grpc.Channel) -> None:
    kv, lease = _kv(channel), _lease(channel)
    write_auth(channel)
    lease.LeaseGrant(R.LeaseGrantRequest(ID=77, TTL=600), timeout=5)
    for i in range(40):
        key = b"k%02d" % (i % 12)
        kv.Put(R.PutRequest(key=key, value=b"v%d" % i * (i % 5), lease=77 if i % 7 == 0 else 0))
    kv.DeleteRange(R.DeleteRangeRequest(key=b"k03"), timeout=5)  # revision 42
    kv.Compact(R.CompactionRequest(revision=30, physical=True), timeout=5)
    kv.Txn(
        R.TxnRequest(
            success=[
                R.RequestOp(request_put=R.PutRequest(key=b"t1", value=b"a")),
                R.RequestOp(request_delete_range=R.DeleteRangeRequest(key=b"k04")),
            ]
        ),
        timeout=5,
    )
    # Enough data for branch pages and overflow pages in the key bucket.
    for i in range(300):
        kv.Put(R.PutRequest(key=b"z%03d" % i, value=bytes([i % 251]) * (i * 23)), timeout=5)
