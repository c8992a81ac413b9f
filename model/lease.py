"""Leases in the store model: grants, attached keys, revocation (etcd's lessor, no clock).

Contract: a `LeaseTable` is immutable and hashed by content; every change returns a new
table. The store keeps the granted TTL and the keys attached to each lease; it has NO
clock. When a lease expires is decided outside the store (the Raft leader counts ticks)
and the expiry enters the store as a LeaseRevokeRequest through the log, exactly as
etcd's leader proposes a revoke for an expired lease. Keep-alive is answered by the
leader from `ttl_of` and never changes the store.

etcd facts this follows (server/lease/lessor.go, etcdserver/server.go):
- a grant with a TTL above MaxLeaseTTL (9,000,000,000 s) fails with ErrLeaseTTLTooLarge;
- a grant with a TTL below the minimum TTL is raised to it; the minimum is
  ceil(1.5 * election timeout) seconds, 2 s with etcd's defaults;
- a grant of an id already granted fails with ErrLeaseExist; id 0 lets the server pick;
- revoking deletes every attached key in one write (one revision if any key existed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from etcdspec.model.requests import show_bytes

MAX_LEASE_TTL = 9_000_000_000
"""lease.MaxLeaseTTL: the largest TTL (seconds) a grant may ask for."""

DEFAULT_MIN_LEASE_TTL = 2
"""etcd's minimum lease TTL with its default 1 s election timeout: ceil(3 * 10 / 2 ticks)."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One granted lease: its id, granted TTL and the keys attached to it."""

    id: int
    ttl: int
    keys: frozenset[bytes] = frozenset()

    def describe(self) -> str:
        keys = ", ".join(show_bytes(k) for k in sorted(self.keys))
        return f"lease {self.id} ttl {self.ttl} keys [{keys}]"


class LeaseTable:
    """The granted leases, immutable; `with_*` methods return a new table."""

    __slots__ = ("_hash", "_leases")

    def __init__(self, leases: dict[int, LeaseRecord] | None = None) -> None:
        self._leases: dict[int, LeaseRecord] = leases or {}
        self._hash = hash(frozenset(self._leases.values()))

    def get(self, lease_id: int) -> LeaseRecord | None:
        return self._leases.get(lease_id)

    def __contains__(self, lease_id: object) -> bool:
        return lease_id in self._leases

    def __len__(self) -> int:
        return len(self._leases)

    def __iter__(self) -> Iterator[LeaseRecord]:
        return iter(sorted(self._leases.values(), key=lambda r: r.id))

    def ids(self) -> frozenset[int]:
        return frozenset(self._leases)

    def with_record(self, record: LeaseRecord) -> LeaseTable:
        leases = dict(self._leases)
        leases[record.id] = record
        return LeaseTable(leases)

    def without(self, lease_id: int) -> LeaseTable:
        leases = dict(self._leases)
        del leases[lease_id]
        return LeaseTable(leases)

    def with_key_moves(self, moves: dict[bytes, tuple[int, int]]) -> LeaseTable:
        """Apply key moves {key: (old lease, new lease)}; lease 0 means no lease."""
        changed: dict[int, set[bytes]] = {}
        for key, (old, new) in moves.items():
            if old == new:
                continue
            if old and old in self._leases:
                changed.setdefault(old, set(self._leases[old].keys)).discard(key)
            if new:
                changed.setdefault(new, set(self._leases[new].keys)).add(key)
        if not changed:
            return self
        leases = dict(self._leases)
        for lease_id, keys in changed.items():
            record = leases[lease_id]
            leases[lease_id] = LeaseRecord(record.id, record.ttl, frozenset(keys))
        return LeaseTable(leases)

    def __reduce__(self) -> tuple[object, tuple[dict[int, LeaseRecord]]]:
        return (LeaseTable, (dict(self._leases),))  # the hash is recomputed on load

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, LeaseTable):
            return NotImplemented
        return self._hash == other._hash and self._leases == other._leases

    def describe(self) -> str:
        return "; ".join(record.describe() for record in self) or "no leases"


def effective_ttl(requested: int, min_ttl: int) -> int:
    """The TTL a grant gets: the requested one, raised to the minimum (lessor.Grant)."""
    return max(requested, min_ttl)


def next_free_id(table: LeaseTable, counter: int) -> int:
    """The id a grant with id 0 gets: the first unused id from the state's counter up.

    etcd's leader draws ids from a request-id generator; the model allocates them
    deterministically from a counter kept in the state, so replays give the same ids.
    """
    lease_id = max(counter, 1)
    while lease_id in table:
        lease_id += 1
    return lease_id
