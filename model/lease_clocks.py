"""The leader's lease clocks: each lease's time to live, counted in ticks on the leader.

Contract
- A node's `leases` is a sorted tuple of (lease_id, ticks remaining). Only a leader
  keeps clocks (etcd's lessor runs on the leader); a node that is not leader keeps
  what it had, untouched, except under the `lease_revoke_by_stale_leader` bug.
- A clock is set to the lease's full TTL, `clock_ticks(ttl, scale)` ticks (TTL seconds
  count `lease_tick_scale` ticks each, at least one tick), when its node becomes
  leader (`start_lease_clocks`, etcd's Promote), when the leader applies the grant
  (model/applier.py) and at a keep-alive (`refresh_lease`).
- `tick` is a node's tick as the cluster gives it: Raft's clock (raft_node.tick), then
  every lease clock counts down one tick; a leader whose clock reaches zero proposes a
  `LeaseRevokeRequest` through the log (the revoke takes effect when applied).
- Pure functions of their arguments: no I/O, no clock.
"""

from __future__ import annotations

from etcdspec.model import raft_node as rn
from etcdspec.model import store as kv
from etcdspec.model.errors import StoreError
from etcdspec.model.raft_messages import Message
from etcdspec.model.raft_node import Node, RaftParams, Role
from etcdspec.model.requests import LeaseRevokeRequest


def clock_ticks(ttl: int, scale: int) -> int:
    """The ticks a clock set to the full `ttl` seconds holds."""
    return max(1, ttl * scale)


def tick(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """A tick: Raft's clock, then the lease clocks (leader, or any holder under the
    lease_revoke_by_stale_leader bug)."""
    node, messages = rn.tick(params, node)
    if not node.leases:
        return node, messages
    expired: list[int] = []
    clocks: list[tuple[int, int]] = []
    for lease_id, remaining in node.leases:
        if remaining > 0:
            remaining -= 1
            if remaining == 0:
                expired.append(lease_id)
        clocks.append((lease_id, remaining))
    node = node._replace(leases=tuple(clocks))
    for lease_id in expired:
        request = LeaseRevokeRequest(lease_id)
        if node.role == Role.LEADER:
            node, more = rn.propose(params, node, request.describe(), request)
            messages = messages + more
        elif params.bugs.on("lease_revoke_by_stale_leader"):
            # Bug: a deposed leader revokes the lease in its own store, not through the log.
            try:
                store, _ = kv.apply(node.store, request, params.bugs)
            except StoreError:
                store = node.store
            node = node._replace(store=store)
    return node, messages


def _full_clock(node: Node, lease_id: int, scale: int) -> int:
    return clock_ticks(kv.lease_ttl(node.store, lease_id) or 0, scale)


def start_lease_clocks(node: Node, scale: int) -> Node:
    """A new leader restarts every lease's clock at its full TTL (etcd's Promote)."""
    lease_ids = sorted(node.store.lease_ids())
    return node._replace(
        leases=tuple((lease_id, _full_clock(node, lease_id, scale)) for lease_id in lease_ids)
    )


def refresh_lease(node: Node, lease_id: int, scale: int) -> Node:
    """A keep-alive: the lease's clock back at its full TTL."""
    clocks = tuple(
        (lid, _full_clock(node, lid, scale) if lid == lease_id else remaining)
        for lid, remaining in node.leases
    )
    return node._replace(leases=clocks)
