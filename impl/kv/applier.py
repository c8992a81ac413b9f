"""Applies committed Raft entries to the store: the state machine of a member.

`Applier(backend, lessor, watch_hub, quota).apply(index, term, data)` decodes `data` (an
`InternalRaftRequest`, impl/pb/raft_internal.proto), applies it, and returns an
`ApplyResult` holding the response message or the etcd error the proposer must answer.

Contract:
- One backend transaction per entry (`apply`) or per batch of consecutive entries
  (`apply_batch`; the backend may group several into one commit). The request's changes and the consistent index
  (index, term) commit together; a request that fails with an etcd error (compacted,
  lease not found, duplicate key, NO_SPACE...) leaves no change but still advances the
  consistent index — applying an entry is deterministic, so every member reaches the
  same error.
- A run of consecutive plain puts in a batch is applied with batched SQL
  (mvcc.put_run: one read of the keys, two executemany inserts), with the same result,
  entry by entry, as applying each on its own: revisions, versions, create/mod
  revisions, prev_kv, errors, watch events, lease attachment; the consistent index is
  still written once, in the same transaction. Under a NOSPACE alarm the run is applied
  one entry at a time (each refused as before).
- Idempotent on replay: an entry with index <= the stored consistent index is skipped
  (after a restart, or kill -9, the log is replayed from the last snapshot and entries
  already in the file are not applied twice).
- The lessor (grant, revoke, key attachment) follows each entry as it is applied, so a
  later entry of the same batch sees its leases; the watch hub is notified
  (`notify(revision, events)`) only after the commit, so no watcher ever sees a change
  that could still be rolled back.
- An empty `data` (the leader's no-op entry) only advances the consistent index.
- A member's published attributes (`cluster_member_attr_set`) set its name and client
  URLs in its member record (kv.members), committed with the consistent index.
- A NOSPACE alarm in the backend rejects puts, txns with a put and lease grants
  (quota.py); the proposal-time quota check is the server's (`BackendQuota.available`).
- Not thread-safe: the server calls apply from one thread, in log order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from google.protobuf import empty_pb2
from google.protobuf.message import DecodeError, Message

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_store import AuthStore
from etcdspec.impl.kv.auth_tokens import AuthInfo
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.members import MemberTable
from etcdspec.impl.kv.mvcc import Event, KVStore, put_run
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import raft_internal_pb2, rpc_pb2


class ApplyError(RuntimeError):
    """An entry could not be decoded (the log holds data this program did not write), or
    a put refused after writing (a bug here: puts must refuse before their first write).

    Nothing was applied and the consistent index did not move; the member must stop
    rather than diverge from its peers.
    """


@dataclass(frozen=True)
class ApplyResult:
    """The outcome of applying one log entry."""

    index: int
    term: int
    request_id: int = 0
    proposer_id: int = 0
    response: Message | None = None
    error: RpcError | None = None
    revision: int = 0
    events: tuple[Event, ...] = field(default=(), repr=False)
    skipped: bool = False

    def describe(self) -> str:
        where = f"entry {self.index}@{self.term}"
        if self.skipped:
            return f"{where}: skipped (already applied)"
        if self.error is not None:
            return f"{where} req {self.request_id:x}: error {self.error.describe()}"
        what = type(self.response).__name__ if self.response is not None else "no-op"
        return (
            f"{where} req {self.request_id:x}: {what} rev {self.revision} events {len(self.events)}"
        )


def _decode(index: int, term: int, data: bytes) -> raft_internal_pb2.InternalRaftRequest | None:
    """The request an entry carries; None for an empty (no-op) entry."""
    if not data:
        return None
    try:
        req = raft_internal_pb2.InternalRaftRequest.FromString(data)
    except DecodeError as exc:
        raise ApplyError(f"entry {index}@{term}: undecodable request ({exc})") from exc
    if req.WhichOneof("request") is None:
        raise ApplyError(f"entry {index}@{term}: request carries no operation")
    return req


def encode_request(request: Message, request_id: int = 0, member_id: int = 0) -> bytes:
    """The entry data for a client request (range/put/delete/txn/compaction/lease/alarm)."""
    internal = raft_internal_pb2.InternalRaftRequest(
        header=raft_internal_pb2.RequestHeader(ID=request_id, member_id=member_id)
    )
    field_by_type = {
        rpc_pb2.RangeRequest: "range",
        rpc_pb2.PutRequest: "put",
        rpc_pb2.DeleteRangeRequest: "delete_range",
        rpc_pb2.TxnRequest: "txn",
        rpc_pb2.CompactionRequest: "compaction",
        rpc_pb2.LeaseGrantRequest: "lease_grant",
        rpc_pb2.LeaseRevokeRequest: "lease_revoke",
        rpc_pb2.AlarmRequest: "alarm",
    }
    name = field_by_type.get(type(request))
    if name is None:
        raise TypeError(f"{type(request).__name__} is not carried in the Raft log")
    getattr(internal, name).CopyFrom(request)
    return internal.SerializeToString()


_Apply = tuple[Message, int, list[Event], list[Callable[[], None]]]
_Decoded = tuple[int, int, raft_internal_pb2.InternalRaftRequest | None]


def _is_put(req: raft_internal_pb2.InternalRaftRequest | None) -> bool:
    return req is not None and req.WhichOneof("request") == "put"


def _runs(decoded: Sequence[_Decoded]) -> list[Sequence[_Decoded]]:
    """`decoded` cut into runs: maximal runs of consecutive puts, every other entry
    alone, in log order."""
    runs: list[Sequence[_Decoded]] = []
    start = 0
    while start < len(decoded):
        end = start + 1
        if _is_put(decoded[start][2]):
            while end < len(decoded) and _is_put(decoded[end][2]):
                end += 1
        runs.append(decoded[start:end])
        start = end
    return runs


class Applier:
    """The state machine: backend + lessor + watch hub, advanced by committed entries."""

    def __init__(
        self,
        backend: Backend,
        lessor: Lessor,
        watch_hub: WatchHub,
        quota: BackendQuota,
        clock: Callable[[], float] = lambda: 0.0,
        auth: AuthStore | None = None,
    ) -> None:
        self.backend = backend
        self.auth = auth if auth is not None else AuthStore(backend)
        self.lessor = lessor
        self.watch_hub = watch_hub
        self.quota = quota
        self.clock = clock
        self.store = KVStore(backend)
        self.lessor.reload(backend)

    def applied_index(self) -> int:
        return self.backend.consistent_index()

    def apply(self, index: int, term: int, data: bytes) -> ApplyResult:
        """Apply the committed entry (index, term, data); see the module contract."""
        return self.apply_batch([(index, term, data)])[0]

    def apply_batch(self, entries: Sequence[tuple[int, int, bytes]]) -> list[ApplyResult]:
        """Apply consecutive committed entries (index, term, data) in ONE backend transaction.

        One backend transaction for the whole batch; each entry still succeeds or fails on
        its own (a savepoint each; a put, which refuses before it writes, needs none), and
        the consistent index ends at the last entry. Entries at or below the consistent
        index are skipped. Every entry is decoded before anything is applied, and a put
        that refused after writing rolls the whole batch back, so an ApplyError leaves
        the state untouched. Any other
        exception (a failing disk) leaves the in-memory lessor ahead of the file: the
        member must stop and recover from disk.
        """
        applied = self.backend.consistent_index()
        decoded: list[_Decoded] = []
        results: dict[int, ApplyResult] = {}
        for index, term, data in entries:
            if index <= applied:
                results[index] = ApplyResult(index, term, skipped=True)
                continue
            if (decoded and index != decoded[-1][0] + 1) or (not decoded and index != applied + 1):
                expected = decoded[-1][0] + 1 if decoded else applied + 1
                raise ApplyError(f"entry {index}@{term}: out of order, expected index {expected}")
            decoded.append((index, term, _decode(index, term, data)))
        notifications: list[tuple[int, Sequence[Event]]] = []
        if decoded:
            with self.backend.transaction():
                for run in _runs(decoded):
                    for result in self._apply_run(run):
                        results[result.index] = result
                        if result.events:
                            notifications.append((result.revision, result.events))
                # One write of the consistent index for the batch, in its transaction.
                last_index, last_term, _ = decoded[-1]
                self.backend.set_applied(last_index, last_term)
        for revision, events in notifications:
            self.watch_hub.notify(revision, events)
        return [results[index] for index, _, _ in entries]

    def _apply_run(self, run: Sequence[_Decoded]) -> list[ApplyResult]:
        """Apply a run of entries: two or more plain puts (not refused by a NOSPACE
        alarm) with batched SQL (mvcc.put_run), anything else one by one."""
        first = run[0][2]
        if (
            len(run) < 2
            or first is None
            or not _is_put(first)
            or self.quota.capped(first)
            or self.auth.enabled  # each put's permission is checked on its own
        ):
            return [self._apply_one(index, term, req) for index, term, req in run]
        puts = [req.put for _, _, req in run if req is not None]
        outcomes = put_run(self.backend, puts, self.lessor.exists)
        results = []
        for (index, term, req), outcome in zip(run, outcomes, strict=True):
            assert req is not None
            events = (outcome.event,) if outcome.event is not None else ()
            if outcome.response is not None:
                outcome.response.header.raft_term = term
            self.lessor.on_events(events)
            results.append(
                ApplyResult(
                    index,
                    term,
                    request_id=req.header.ID,
                    proposer_id=req.header.member_id,
                    response=outcome.response,
                    error=outcome.error,
                    revision=outcome.revision,
                    events=events,
                )
            )
        return results

    def _apply_one(
        self, index: int, term: int, req: raft_internal_pb2.InternalRaftRequest | None
    ) -> ApplyResult:
        if req is None:  # the leader's empty entry
            return ApplyResult(index, term, revision=self.backend.current_revision())
        error: RpcError | None = None
        response: Message | None = None
        events: list[Event] = []
        after: list[Callable[[], None]] = []
        if req.WhichOneof("request") == "put":
            # A put refuses (quota, key not found, lease not found) before it writes, so
            # it needs no savepoint; that it wrote nothing when it refused is checked.
            written = self.backend.changes()
            try:
                response, _, events, after = self._dispatch(req, index)
            except RpcError as exc:
                if self.backend.changes() != written:
                    raise ApplyError(
                        f"entry {index}@{term}: a put refused ({exc.kind.describe()}) after "
                        "writing; nothing of the batch is applied"
                    ) from exc
                error, events, after = exc, [], []
        else:
            try:
                with self.backend.savepoint():
                    response, _, events, after = self._dispatch(req, index)
            except RpcError as exc:
                error, events, after = exc, [], []
        revision = self.backend.current_revision()
        if response is not None:
            header = getattr(response, "header", None)
            if header is not None:
                header.revision = revision
                header.raft_term = term
        self.lessor.on_events(events)
        for action in after:
            action()
        return ApplyResult(
            index,
            term,
            request_id=req.header.ID,
            proposer_id=req.header.member_id,
            response=response,
            error=error,
            revision=revision,
            events=tuple(events),
        )

    def _dispatch(self, req: raft_internal_pb2.InternalRaftRequest, index: int) -> _Apply:
        kind = req.WhichOneof("request")
        if self.quota.capped(req):
            raise RpcError(errors.NO_SPACE)
        if kind is not None and kind.startswith("auth"):
            return self._auth(req, kind, index), 0, [], []
        if self.auth.enabled and not req.header.as_member:
            self._check_permission(req, kind)
        if kind == "range":
            return self.store.range(req.range), 0, [], []
        if kind in ("put", "delete_range", "txn"):
            wtx = self.store.write(self.lessor.exists)
            out: Message
            if kind == "put":
                out = wtx.put(req.put)
            elif kind == "delete_range":
                out = wtx.delete_range(req.delete_range)
            else:
                out = wtx.txn(req.txn)
            revision, events = wtx.finish()
            return out, revision, events, []
        if kind == "compaction":
            self.store.compact(req.compaction.revision)
            return rpc_pb2.CompactionResponse(), 0, [], []
        if kind == "lease_grant":
            return self._lease_grant(req.lease_grant, index)
        if kind == "lease_revoke":
            return self._lease_revoke(req.lease_revoke)
        if kind == "cluster_member_attr_set":
            return self._member_attributes(req.cluster_member_attr_set), 0, [], []
        return self._alarm(req.alarm)

    def _check_permission(
        self, req: raft_internal_pb2.InternalRaftRequest, kind: str | None
    ) -> None:
        """Refuse a write its proposer may not make (etcd's authApplierV3), checked with the
        user and auth revision the proposing member found for its token."""
        auth = self.auth
        info = AuthInfo(req.header.username, req.header.auth_revision)
        if kind == "put":
            put = req.put
            auth.check_put(info, put.key)
            # A lease already on a key the user may not write cannot be attached here.
            for key in self._lease_keys(put.lease):
                auth.check_put(info, key)
            if put.prev_kv:
                auth.check_range(info, put.key, b"")
        elif kind == "delete_range":
            delete = req.delete_range
            auth.check_delete(info, delete.key, delete.range_end)
            if delete.prev_kv:
                auth.check_range(info, delete.key, delete.range_end)
        elif kind == "txn":
            auth.check_txn(info, req.txn)
        elif kind == "range":
            auth.check_range(info, req.range.key, req.range.range_end)
        elif kind == "lease_revoke":
            for key in self._lease_keys(req.lease_revoke.ID):
                auth.check_put(info, key)

    def _lease_keys(self, lease_id: int) -> list[bytes]:
        """The keys on a lease; none for no lease or an unknown one (refused later)."""
        return self.lessor.keys_of(lease_id) if self.lessor.exists(lease_id) else []

    def _auth(self, req: raft_internal_pb2.InternalRaftRequest, kind: str, index: int) -> Message:
        """Apply an auth request: the root check etcd makes of admin requests, then the
        store's change or read."""
        auth = self.auth
        info = AuthInfo(req.header.username, req.header.auth_revision)
        if kind == "authenticate":
            return auth.authenticate(req.authenticate.name, req.authenticate.simple_token, index)
        if kind == "auth_user_get":
            # A user may read itself, and a role it holds, without root.
            if auth.enabled and req.auth_user_get.name != info.username:
                auth.check_admin(info)
            return auth.user_get(req.auth_user_get)
        if kind == "auth_role_get":
            if auth.enabled and not auth.has_role(info.username, req.auth_role_get.role):
                auth.check_admin(info)
            return auth.role_get(req.auth_role_get)
        auth.check_admin(info)
        if kind == "auth_enable":
            return auth.auth_enable()
        if kind == "auth_disable":
            return auth.auth_disable()
        if kind == "auth_status":
            return auth.auth_status()
        if kind == "auth_user_add":
            return auth.user_add(req.auth_user_add)
        if kind == "auth_user_delete":
            return auth.user_delete(req.auth_user_delete)
        if kind == "auth_user_change_password":
            return auth.user_change_password(req.auth_user_change_password)
        if kind == "auth_user_grant_role":
            return auth.user_grant_role(req.auth_user_grant_role)
        if kind == "auth_user_revoke_role":
            return auth.user_revoke_role(req.auth_user_revoke_role)
        if kind == "auth_user_list":
            return auth.user_list()
        if kind == "auth_role_list":
            return auth.role_list()
        if kind == "auth_role_add":
            return auth.role_add(req.auth_role_add)
        if kind == "auth_role_delete":
            return auth.role_delete(req.auth_role_delete)
        if kind == "auth_role_grant_permission":
            return auth.role_grant_permission(req.auth_role_grant_permission)
        if kind == "auth_role_revoke_permission":
            return auth.role_revoke_permission(req.auth_role_revoke_permission)
        raise ApplyError(f"entry {index}: unknown auth request {kind}")

    def _lease_grant(self, grant: rpc_pb2.LeaseGrantRequest, index: int) -> _Apply:
        lease_id = grant.ID or self.lessor.allocate_id(index)
        ttl = self.lessor.check_grant(lease_id, grant.TTL)
        self.backend.put_lease(lease_id, ttl)
        resp = rpc_pb2.LeaseGrantResponse(ID=lease_id, TTL=ttl)

        def record() -> None:
            self.lessor.grant(lease_id, ttl, self.clock())

        return resp, 0, [], [record]

    def revoke_unlogged(self, lease_id: int) -> None:
        """Revoke a lease in this member's state only, with no log entry: the bug that
        failpoint stale_leader_lease_revoke plants (the consistent index does not move)."""
        with self.backend.transaction():
            _, revision, events, after = self._lease_revoke(rpc_pb2.LeaseRevokeRequest(ID=lease_id))
        self.lessor.on_events(events)
        for action in after:
            action()
        if events:
            self.watch_hub.notify(revision, list(events))

    def _lease_revoke(self, revoke: rpc_pb2.LeaseRevokeRequest) -> _Apply:
        lease_id = revoke.ID
        keys = self.lessor.keys_of(lease_id)
        wtx = self.store.write(self.lessor.exists)
        wtx.delete_keys(keys)
        revision, events = wtx.finish()
        self.backend.delete_lease(lease_id)
        return (
            rpc_pb2.LeaseRevokeResponse(),
            revision,
            events,
            [lambda: self.lessor.revoke(lease_id)],
        )

    def _member_attributes(self, request: raft_internal_pb2.ClusterMemberAttrSetRequest) -> Message:
        """A member's published name and client URLs, set in its record (a member removed
        or unknown: nothing changes, as etcd skips them)."""
        attributes = request.member_attributes
        MemberTable(self.backend).publish(
            request.member_ID, attributes.name, tuple(attributes.client_urls)
        )
        return empty_pb2.Empty()

    def _alarm(self, alarm: rpc_pb2.AlarmRequest) -> _Apply:
        resp = rpc_pb2.AlarmResponse()
        member = rpc_pb2.AlarmMember(memberID=alarm.memberID, alarm=alarm.alarm)
        if alarm.action == rpc_pb2.AlarmRequest.ACTIVATE:
            if alarm.alarm != rpc_pb2.NONE:
                self.backend.put_alarm(alarm.memberID, alarm.alarm)
                resp.alarms.append(member)
        elif alarm.action == rpc_pb2.AlarmRequest.DEACTIVATE:
            if (alarm.memberID, alarm.alarm) in self.backend.alarms():
                self.backend.delete_alarm(alarm.memberID, alarm.alarm)
                resp.alarms.append(member)
        else:
            for member_id, kind in self.backend.alarms():
                if alarm.alarm in (rpc_pb2.NONE, kind):
                    resp.alarms.append(
                        rpc_pb2.AlarmMember(memberID=member_id, alarm=rpc_pb2.AlarmType.Name(kind))
                    )
        return resp, 0, [], []

    def restore(self, snapshot: bytes) -> None:
        """Replace the state with a snapshot (from a peer or `etcdspec snapshot restore`)."""
        self.backend.restore(snapshot)
        self.auth.reload()
        self.lessor.reload(self.backend)
        if self.lessor.primary:
            self.lessor.promote(self.clock())
        self.watch_hub.on_restore()
        self.watch_hub.sync()
