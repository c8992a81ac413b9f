"""The backend space quota and the NOSPACE alarm's admission rules.

etcd's behaviour, reproduced:
- Before proposing a put, a txn with a put, or a lease grant, the server asks
  `available(request)`: the database size (as of the backend's last commit) plus the
  request's estimated cost must stay below the quota (default 2 GiB, `--quota-backend-bytes`). When it would not, the server
  proposes `AlarmRequest(ACTIVATE, member_id, NOSPACE)` (see `nospace_alarm_request`) and
  answers NO_SPACE ("etcdserver: mvcc: database space exceeded").
- While a NOSPACE alarm is raised (replicated state, in the backend's alarm table), the
  applier rejects those same writes with NO_SPACE on every member (`capped()`), and lets
  deletes, ranges, compaction, lease revocation and alarm changes through, until an
  operator frees space (compact + defragment) and disarms the alarm.
Pure computation over the backend's size figures; no I/O of its own.
"""

from __future__ import annotations

from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.request_checks import txn_has_put
from etcdspec.impl.pb import raft_internal_pb2, rpc_pb2

DEFAULT_QUOTA_BYTES = 2 * 1024 * 1024 * 1024
MAX_QUOTA_BYTES = 8 * 1024 * 1024 * 1024  # etcd warns above this
_ROW_OVERHEAD = 64  # bytes an extra key revision row costs beyond key and value
_LEASE_COST = 64


def request_cost(req: raft_internal_pb2.InternalRaftRequest) -> int:
    """Estimated bytes a request adds to the backend (0 for requests that free space)."""
    kind = req.WhichOneof("request")
    if kind == "put":
        return len(req.put.key) + len(req.put.value) + _ROW_OVERHEAD
    if kind == "txn":
        return _txn_cost(req.txn)
    if kind == "lease_grant":
        return _LEASE_COST
    return 0


def _txn_cost(txn: rpc_pb2.TxnRequest) -> int:
    cost = 0
    for ops in (txn.success, txn.failure):
        branch = 0
        for op in ops:
            which = op.WhichOneof("request")
            if which == "request_put":
                branch += len(op.request_put.key) + len(op.request_put.value) + _ROW_OVERHEAD
            elif which == "request_txn":
                branch += _txn_cost(op.request_txn)
        cost = max(cost, branch)
    return cost


def consumes_space(req: raft_internal_pb2.InternalRaftRequest) -> bool:
    """True for the writes a NOSPACE alarm blocks: put, txn with a put, lease grant."""
    kind = req.WhichOneof("request")
    if kind == "txn":
        return txn_has_put(req.txn)
    return kind in ("put", "lease_grant")


def nospace_alarm_request(member_id: int) -> rpc_pb2.AlarmRequest:
    """The alarm the server proposes when `available()` says no."""
    return rpc_pb2.AlarmRequest(
        action=rpc_pb2.AlarmRequest.ACTIVATE, memberID=member_id, alarm=rpc_pb2.NOSPACE
    )


class BackendQuota:
    """The quota of one backend."""

    def __init__(self, backend: Backend, quota_bytes: int = DEFAULT_QUOTA_BYTES) -> None:
        if quota_bytes < 0:
            raise ValueError(f"quota_bytes must be >= 0 (0 means the default), got {quota_bytes}")
        self.backend = backend
        self.quota_bytes = quota_bytes or DEFAULT_QUOTA_BYTES

    def available(self, req: raft_internal_pb2.InternalRaftRequest) -> bool:
        """Whether applying `req` keeps the database below the quota: its size as of
        the backend's last commit (as etcd's check, whose backend records its size at
        each batch commit), so writes proposed within one group-commit interval pass or
        fail on the same figure."""
        cost = request_cost(req)
        if cost == 0:
            return True
        return self.backend.committed_size() + cost < self.quota_bytes

    def nospace_raised(self) -> bool:
        return any(alarm == rpc_pb2.NOSPACE for _, alarm in self.backend.alarms())

    def capped(self, req: raft_internal_pb2.InternalRaftRequest) -> bool:
        """Whether a raised NOSPACE alarm rejects `req`."""
        return consumes_space(req) and self.nospace_raised()

    def describe(self) -> str:
        return f"quota {self.quota_bytes} bytes, backend {self.backend.size()} bytes"
