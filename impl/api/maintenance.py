"""etcd's Maintenance service: Status, Defragment, Alarm, Hash, HashKV, Snapshot and
MoveLeader, over the member's state machine and what it knows of its cluster.

Snapshot streams the database as etcd does: the database file, then its sha256 (32
bytes), in SNAPSHOT_CHUNK_BYTES pieces. All that is applied is committed first and the
copy is made in a worker thread, so the member goes on serving meanwhile (the copy may
hold entries applied since).

Auth: with auth enabled, Defragment, Hash, HashKV and Snapshot need a caller with the
root role (etcd's authMaintenanceServer); Status, Alarm and MoveLeader need none.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import grpc

from etcdspec.impl import errors
from etcdspec.impl.api.handlers import Context, caller, propose, status_of, unary, unary_in_context
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.versions import STORAGE_VERSION
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_tokens import TokenNotApplied
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

# Alarms a member can raise. etcd 3.5.1 applies the activation of any other type by
# panicking ("unimplemented alarm activation", apply.go:744): every member, and again at
# each restart, as the entry is in the log. Ours had stored it, and every later Status
# failed (UNKNOWN, the type has no name). Ours refuses it before proposing — a deliberate
# difference from etcd, found by bench/fuzz_grpc.py.
KNOWN_ALARMS = frozenset({rpc_pb2.NOSPACE, rpc_pb2.CORRUPT})
UNKNOWN_ALARM = errors.EtcdErrorKind(
    grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: only NOSPACE and CORRUPT alarms can be raised"
)

SNAPSHOT_CHUNK_BYTES = 32 * 1024


class MaintenanceServicer(rpc_pb2_grpc.MaintenanceServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.state = ports.state
        self.proposer = ports.proposer
        self.cluster = ports.cluster
        self.reads = ports.reads
        self.cert_auth = ports.client_cert_auth  # a certificate's CN as the caller

    @unary
    async def Status(self, request: rpc_pb2.StatusRequest) -> rpc_pb2.StatusResponse:
        return self.cluster.status()

    def _check_admin(self, context: Context) -> None:
        """Refuse a caller without the root role, with the auth package's raw error as
        etcd's maintenance server does (code Unknown, "auth: permission denied")."""
        auth = self.state.auth
        if auth.enabled:
            try:
                auth.check_admin(caller(auth, context, self.cert_auth))
            except TokenNotApplied:
                raise  # waited for by the caller, then asked again
            except RpcError as error:
                raw = errors.MAINTENANCE_AUTH_ERRORS.get(error.kind)
                if raw is None:
                    raise
                raise RpcError(raw, error.detail) from error

    @unary_in_context
    async def Defragment(
        self, request: rpc_pb2.DefragmentRequest, context: Context
    ) -> rpc_pb2.DefragmentResponse:
        self._check_admin(context)
        self.state.defragment()
        return rpc_pb2.DefragmentResponse()  # etcd 3.5 answers without a header

    @unary
    async def Alarm(self, request: rpc_pb2.AlarmRequest) -> rpc_pb2.AlarmResponse:
        if request.action == rpc_pb2.AlarmRequest.GET:
            return rpc_pb2.AlarmResponse(header=self.cluster.header(), alarms=self.state.alarms())
        if request.action == rpc_pb2.AlarmRequest.ACTIVATE and request.alarm not in KNOWN_ALARMS:
            raise RpcError(UNKNOWN_ALARM, f"alarm type {request.alarm}")
        return await propose(self.proposer, "alarm", request, rpc_pb2.AlarmResponse)

    @unary_in_context
    async def Hash(self, request: rpc_pb2.HashRequest, context: Context) -> rpc_pb2.HashResponse:
        self._check_admin(context)
        return rpc_pb2.HashResponse(header=self.cluster.header(), hash=self.state.hash())

    @unary_in_context
    async def HashKV(
        self, request: rpc_pb2.HashKVRequest, context: Context
    ) -> rpc_pb2.HashKVResponse:
        self._check_admin(context)
        value, compact_revision, current_revision = self.state.hash_kv(request.revision)
        header = self.cluster.header()
        header.revision = current_revision
        return rpc_pb2.HashKVResponse(header=header, hash=value, compact_revision=compact_revision)

    async def Snapshot(
        self, request: rpc_pb2.SnapshotRequest, context: Context
    ) -> AsyncIterator[rpc_pb2.SnapshotResponse]:
        try:
            try:
                self._check_admin(context)
            except TokenNotApplied:
                await self.reads.barrier()
                self._check_admin(context)
            chunks = await self._snapshot_chunks()
        except Exception as error:
            mapped = status_of(error)
            if mapped is None:
                raise
            await context.abort(mapped[0], mapped[1])
            return
        for index, chunk in enumerate(chunks):
            remaining = sum(len(c) for c in chunks[index + 1 :])
            yield rpc_pb2.SnapshotResponse(
                header=self.cluster.header(),
                remaining_bytes=remaining,
                blob=chunk,
                version=STORAGE_VERSION,
            )

    async def _snapshot_chunks(self) -> list[bytes]:
        self.state.flush()
        data = await asyncio.to_thread(self.state.etcd_snapshot)
        data += hashlib.sha256(data).digest()
        return [
            data[offset : offset + SNAPSHOT_CHUNK_BYTES]
            for offset in range(0, len(data), SNAPSHOT_CHUNK_BYTES)
        ] or [b""]

    @unary
    async def MoveLeader(self, request: rpc_pb2.MoveLeaderRequest) -> rpc_pb2.MoveLeaderResponse:
        return await self.cluster.move_leader(request.targetID)
