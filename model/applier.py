"""The applier: a node's committed entries applied to its store, its confirmed reads
served, and what that outputs.

Contract
- `apply_committed(params, node, scale)` applies entries applied_index+1..commit_index
  of the node's log, in log order, to its store (model/store.py's `apply`) and marks
  them applied (raft_node.mark_applied). An entry without a request (a leader's no-op)
  and a configuration change (raft_node: in force since it was appended) are skipped. A StoreError is the entry's result, as etcd answers an invalid request;
  the store is then unchanged by it.
- A leader keeps its lease clocks in step with what it applies: a granted lease's clock
  starts at its full TTL (model/lease_clocks.py); a revoked lease's clock goes, on any
  node.
- ReadIndex rounds whose read index is now applied are answered from the applied store
  (a read never changes it); the others keep waiting.
- Each applied entry gives an `Applied`, each answered read a `ReadResult`, in that
  order (a keep-alive step's `KeepAliveAck`, model/lease_clocks.py, comes first): the
  step's outputs (`Cluster.outputs`), not part of any state's identity.
- A pure function of its arguments: no I/O.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from etcdspec.model import raft_node as rn
from etcdspec.model import store as kv
from etcdspec.model.actions import describe_request
from etcdspec.model.errors import StoreError
from etcdspec.model.lease_clocks import KeepAliveAck, clock_ticks
from etcdspec.model.raft_messages import ConfChange, node_name
from etcdspec.model.raft_node import Node, RaftParams, ReadRound, Role
from etcdspec.model.requests import LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest


class Applied(NamedTuple):
    """A committed entry applied on one node, with the store's response (or StoreError)."""

    node: int
    log_index: int
    request: Any
    response: Any

    def describe(self) -> str:
        return (
            f"{node_name(self.node)} applied {self.log_index} {describe_request(self.request)} -> "
            f"{describe_request(self.response)}"
        )


class ReadResult(NamedTuple):
    """A linearizable read served by a leader through ReadIndex."""

    node: int
    read_id: int
    read_index: int
    request: Any
    response: Any

    def describe(self) -> str:
        return (
            f"{node_name(self.node)} read {self.read_id} at {self.read_index} "
            f"{describe_request(self.request)} -> {describe_request(self.response)}"
        )


Output = Applied | ReadResult | KeepAliveAck


def apply_committed(params: RaftParams, node: Node, scale: int) -> tuple[Node, list[Output]]:
    """Apply entries applied_index+1..commit_index to the node's store, keep the leader's
    lease clocks in step with grants and revokes, and serve confirmed reads."""
    bugs = params.bugs
    store = node.store
    outputs: list[Output] = []
    leases = dict(node.leases)
    leader = node.role == Role.LEADER
    for index in range(node.applied_index + 1, node.commit_index + 1):
        entry = node.log.entry(index)
        if entry.request is None or isinstance(entry.request, ConfChange):
            continue  # a no-op, or a configuration change (in force since appended)
        response: Any
        try:
            store, response = kv.apply(store, entry.request, bugs)
        except StoreError as error:
            response = error
        outputs.append(Applied(node.id, index, entry.request, response))
        if leader and isinstance(entry.request, LeaseGrantRequest):
            if isinstance(response, LeaseGrantResponse):
                leases[response.id] = clock_ticks(response.ttl, scale)
        elif isinstance(entry.request, LeaseRevokeRequest):
            leases.pop(entry.request.id, None)
    node = rn.mark_applied(node, node.commit_index, store)
    if leader or leases:
        node = node._replace(leases=tuple(sorted(leases.items())))
    if node.ready_reads:
        waiting: list[ReadRound] = []
        for round_ in node.ready_reads:
            if round_.read_index > node.applied_index:
                waiting.append(round_)
                continue
            try:
                _, response = kv.apply(store, round_.request, bugs)
            except StoreError as error:
                response = error
            outputs.append(
                ReadResult(node.id, round_.id, round_.read_index, round_.request, response)
            )
        node = node._replace(ready_reads=tuple(waiting))
    return node, outputs
