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
  every lease clock counts down one tick (with free timeouts, where Raft's timeouts are
  actions, a leader holding a running clock is offered `tick` too, and it counts down
  the lease clocks alone: `lease_tick`, so that the exhaustive explorer sees expiry); a leader whose clock reaches zero proposes a
  `LeaseRevokeRequest` through the log (the revoke takes effect when applied).
- A keep-alive is answered only by a leader whose clock for the lease still runs
  (`can_keep_alive`): once the clock ran out the expiry is proposed, and etcd's
  lessor.Renew then waits for the revoke instead of answering (lessor.go: an expired
  lease "might be pending for revoking"). The answer is client-visible: a `KeepAliveAck`
  carrying the TTL the client may count on.
- A leader's expiry proposal is an entry whose text is `expiry_key(lease)`, so that the
  log tells an expiry from a client's LeaseRevoke (both are a LeaseRevokeRequest).
- The lease guarantee (`check_lease_guarantee`, etcd's promise that a lease whose
  keep-alive was acknowledged with TTL t is not expired before t has passed on the
  leader's clock): a leader whose log holds an expiry of lease L not yet applied has
  L's clock at zero. Since an ack sets the clock to the full TTL, a tick takes one off,
  and the expiry is proposed only when it reaches zero, this is the same as: between
  a leader's last ack of L and its proposal of L's expiry, at least the TTL passed on
  that leader's clock, and no ack of L follows the proposal while it is pending. A new
  leader restarts the clocks of the leases it holds (etcd's Promote) except those whose
  expiry is already in its log. A leader change in between is the tolerance etcd
  documents: the new leader counts a full TTL from its promotion, which in real time
  may start up to an election timeout before the old leader's last ack (check-quorum
  bounds that); the model's clocks run at no fixed rate against each other, so that
  part is checked on histories (checker/lease_checks.py), not here.
- Pure functions of their arguments: no I/O, no clock.
"""

from __future__ import annotations

from typing import NamedTuple

from etcdspec.model import raft_node as rn
from etcdspec.model import store as kv
from etcdspec.model.errors import StoreError
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import Message, node_name
from etcdspec.model.raft_node import Node, RaftParams, Role
from etcdspec.model.requests import LeaseRevokeRequest

LEASE_GUARANTEE = "LeaseKeepAliveHonoured"
"""The invariant's name, as a violation reports it."""


class KeepAliveAck(NamedTuple):
    """A keep-alive answered by a leader: the client may count on `ttl` seconds."""

    node: int
    term: int
    lease_id: int
    ttl: int

    def describe(self) -> str:
        return (
            f"{node_name(self.node)} (leader, term {self.term}) acknowledged keep-alive of "
            f"lease {self.lease_id} with ttl {self.ttl}"
        )


def expiry_key(lease_id: int) -> str:
    """The log entry text of a leader's expiry proposal for `lease_id`."""
    return f"lease_expire({lease_id})"


def clock_ticks(ttl: int, scale: int) -> int:
    """The ticks a clock set to the full `ttl` seconds holds."""
    return max(1, ttl * scale)


def tick(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """A tick: Raft's clock, then the lease clocks (leader, or any holder under the
    lease_revoke_by_stale_leader bug)."""
    node, messages = rn.tick(params, node)
    return count_down(params, node, messages)


def lease_tick(params: RaftParams, node: Node) -> tuple[Node, list[Message]]:
    """A tick of the lease clocks alone: with free timeouts (Raft's timeouts are actions
    of their own) the only way time passes for a leader's leases."""
    return count_down(params, node, [])


def leases_running(node: Node) -> bool:
    """Whether the node is a leader with a lease clock that has not run out."""
    return node.role == Role.LEADER and any(remaining > 0 for _, remaining in node.leases)


def count_down(
    params: RaftParams, node: Node, messages: list[Message]
) -> tuple[Node, list[Message]]:
    """Every lease clock of the node one tick down; a leader proposes the expiry of each
    lease whose clock reaches zero."""
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
            node, more = rn.propose(params, node, expiry_key(lease_id), request)
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


def pending_expiries(node: Node) -> dict[int, int]:
    """{lease: log index} of the expiry proposals in the node's log not yet applied."""
    pending: dict[int, int] = {}
    first = max(node.applied_index, node.log.snapshot.last_index) + 1
    for index in range(first, node.log.last_index + 1):
        entry = node.log.entry(index)
        request = entry.request
        if isinstance(request, LeaseRevokeRequest) and entry.key == expiry_key(request.id):
            pending.setdefault(request.id, index)
    return pending


def start_lease_clocks(node: Node, scale: int) -> Node:
    """A new leader restarts every lease's clock at its full TTL (etcd's Promote), except
    a lease whose expiry is already in its log: that one stays at zero (it is being
    revoked; a keep-alive of it must not be acknowledged)."""
    lease_ids = sorted(node.store.lease_ids())
    pending = pending_expiries(node) if node.log.last_index > node.applied_index else {}
    return node._replace(
        leases=tuple(
            (lease_id, 0 if lease_id in pending else _full_clock(node, lease_id, scale))
            for lease_id in lease_ids
        )
    )


def can_keep_alive(params: RaftParams, node: Node, lease_id: int) -> bool:
    """Whether `node` answers a keep-alive of `lease_id`: a leader whose clock for it still
    runs (under the keepalive_after_expiry bug: any clock it holds, run out or not)."""
    if node.role != Role.LEADER:
        return False
    stale_ok = params.bugs.on("keepalive_after_expiry")
    return any(lid == lease_id and (remaining > 0 or stale_ok) for lid, remaining in node.leases)


def refresh_lease(node: Node, lease_id: int, scale: int) -> Node:
    """A keep-alive: the lease's clock back at its full TTL."""
    clocks = tuple(
        (lid, _full_clock(node, lid, scale) if lid == lease_id else remaining)
        for lid, remaining in node.leases
    )
    return node._replace(leases=clocks)


def keep_alive(node: Node, lease_id: int, scale: int) -> tuple[Node, KeepAliveAck]:
    """A keep-alive answered: the clock refreshed and the client's acknowledgement."""
    ttl = kv.lease_ttl(node.store, lease_id) or 0
    return refresh_lease(node, lease_id, scale), KeepAliveAck(node.id, node.term, lease_id, ttl)


def check_lease_guarantee(node: Node) -> None:
    """Raise InvariantViolation if `node` is a leader that holds a running clock (so it
    acknowledged, or may acknowledge, a keep-alive) for a lease whose expiry it has
    already proposed (see the module docstring)."""
    if node.role != Role.LEADER or not node.leases:
        return
    if node.log.last_index <= node.applied_index:
        return
    running = {lease_id: remaining for lease_id, remaining in node.leases if remaining > 0}
    if not running:
        return
    for lease_id, index in sorted(pending_expiries(node).items()):
        if lease_id in running:
            raise InvariantViolation(
                LEASE_GUARANTEE,
                f"{node.name} (leader, term {node.term}) proposed the expiry of lease "
                f"{lease_id} at log index {index} (applied up to {node.applied_index}), yet "
                f"its clock for it runs again ({running[lease_id]} ticks left): a keep-alive "
                "acknowledged now promises a TTL the pending revoke will break",
            )
