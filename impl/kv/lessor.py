"""Leases: which exist, their TTLs, the keys attached to each, and (on the leader) when
each expires.

Contract:
- The set of leases and their granted TTLs is replicated state: it changes only through
  applied log entries (`grant`, `revoke`, called by the applier after the backend
  transaction holding the same change committed), and is rebuilt from the backend by
  `reload()` after a restart or a snapshot restore.
- Key attachment follows the applied events: `on_events()` moves a key from its previous
  lease to its new one (a put) or detaches it (a delete).
- Expiry is leader-local and uses an injected clock: every method that needs the time
  takes `now` (seconds, monotonic, from the caller). Only a primary lessor (the leader's)
  tracks expiries: `promote(now)` starts every lease afresh at now + TTL (so a lease
  survives a leader change with at least its full TTL), `demote()` stops tracking,
  `expired(now)` lists leases the server must revoke by proposing a LeaseRevoke through
  the log (each once per `retry_interval`, 3 s as etcd), and `renew()` (keep-alive)
  works only on the primary.
- Lease ids are chosen before proposing (`LeaseIdGenerator`), so applying is
  deterministic; `allocate_id(index)` is the applier's deterministic fallback for a
  grant proposed with ID 0.
- No I/O, no clock, no threads: a pure data structure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.mvcc import Event, EventType

MAX_LEASE_TTL = 9_000_000_000  # etcd's MaxLeaseTTL, seconds
DEFAULT_MIN_TTL = 2  # etcd: ceil(1.5 * election timeout) with the default 1 s timeout
EXPIRED_RETRY_INTERVAL = 3.0  # etcd's expiredLeaseRetryInterval, seconds
_INT63 = (1 << 63) - 1


def min_ttl_seconds(election_timeout_ms: int) -> int:
    """etcd's minimum lease TTL for an election timeout: ceil(1.5 x timeout), in seconds."""
    return max(1, -(-3 * election_timeout_ms // 2000))


class NotPrimaryError(Exception):
    """A leader-only lease operation (keep-alive) reached a member that is not leader."""

    def describe(self) -> str:
        return "lessor is not primary: forward the request to the leader"


@dataclass
class Lease:
    """One lease: granted TTL, attached keys, and expiry while the lessor is primary."""

    lease_id: int
    ttl: int
    keys: set[bytes] = field(default_factory=set)
    expiry: float | None = None

    def remaining(self, now: float) -> float:
        """Seconds left; the full TTL when expiry is not tracked (not primary)."""
        if self.expiry is None:
            return float(self.ttl)
        return max(0.0, self.expiry - now)

    def describe(self) -> str:
        expiry = "untracked" if self.expiry is None else f"{self.expiry:.3f}"
        return f"lease {self.lease_id:x} ttl={self.ttl} keys={len(self.keys)} expiry={expiry}"


@dataclass(frozen=True)
class TimeToLive:
    """LeaseTimeToLive's answer."""

    lease_id: int
    ttl: int
    granted_ttl: int
    keys: tuple[bytes, ...]

    def describe(self) -> str:
        return f"lease {self.lease_id:x} ttl={self.ttl}/{self.granted_ttl} keys={list(self.keys)}"


class LeaseIdGenerator:
    """Unique lease ids for one member: member id bits on top, a counter below.

    Like etcd's idutil generator: the top 16 bits (below the sign bit) come from the
    member id, the low 47 bits from a counter seeded by the caller (e.g. the start time
    in milliseconds), so ids from different members and restarts do not collide.
    """

    def __init__(self, member_id: int, seed: int) -> None:
        self._prefix = (member_id & 0x7FFF) << 48
        self._counter = seed & ((1 << 48) - 1)

    def next(self) -> int:
        self._counter = (self._counter + 1) & ((1 << 48) - 1)
        lease_id = (self._prefix | self._counter) & _INT63
        return lease_id or 1


class Lessor:
    """The leases of one member."""

    def __init__(
        self, min_ttl: int = DEFAULT_MIN_TTL, retry_interval: float = EXPIRED_RETRY_INTERVAL
    ) -> None:
        self.min_ttl = min_ttl
        self.retry_interval = retry_interval
        self.leases: dict[int, Lease] = {}
        self.primary = False
        self._reported: dict[int, float] = {}  # lease id -> when expired() last listed it
        self._key_lease: dict[bytes, int] = {}  # key -> the lease it is attached to

    # ---- replicated state (applier only) ----

    def reload(self, backend: Backend) -> None:
        """Rebuild leases and key attachments from the backend; expiries restart if primary."""
        self.leases = {i: Lease(i, ttl) for i, ttl in backend.leases()}
        self._key_lease = {}
        self._reported.clear()
        for lease_id, key in backend.leased_keys():
            lease = self.leases.get(lease_id)
            if lease is not None:
                lease.keys.add(key)
                self._key_lease[key] = lease_id

    def exists(self, lease_id: int) -> bool:
        return lease_id in self.leases

    def effective_ttl(self, ttl: int) -> int:
        """The TTL a grant of `ttl` gets: at least min_ttl; TTL_TOO_LARGE above the maximum."""
        if ttl > MAX_LEASE_TTL:
            raise RpcError(errors.LEASE_TTL_TOO_LARGE)
        return max(ttl, self.min_ttl)

    def allocate_id(self, index: int) -> int:
        """A free id derived from the log index (same on every member)."""
        candidate = index & _INT63 or 1
        while candidate in self.leases:
            candidate = ((candidate + 1) & _INT63) or 1
        return candidate

    def check_grant(self, lease_id: int, ttl: int) -> int:
        """Validate a grant; return the effective TTL (LEASE_EXIST, TTL_TOO_LARGE)."""
        if lease_id in self.leases:
            raise RpcError(errors.LEASE_EXIST)
        if lease_id == 0:
            raise RpcError(errors.LEASE_NOT_FOUND, "lease id 0 means no lease")
        return self.effective_ttl(ttl)

    def grant(self, lease_id: int, ttl: int, now: float | None = None) -> Lease:
        """Record a granted lease (after its backend row committed)."""
        lease = Lease(lease_id, ttl)
        if self.primary and now is not None:
            lease.expiry = now + ttl
        self.leases[lease_id] = lease
        return lease

    def keys_of(self, lease_id: int) -> list[bytes]:
        """The keys attached to a lease, sorted; LEASE_NOT_FOUND if it does not exist."""
        lease = self.leases.get(lease_id)
        if lease is None:
            raise RpcError(errors.LEASE_NOT_FOUND)
        return sorted(lease.keys)

    def revoke(self, lease_id: int) -> None:
        """Forget a revoked lease (its keys were deleted in the same applied entry)."""
        lease = self.leases.pop(lease_id, None)
        self._reported.pop(lease_id, None)
        for key in lease.keys if lease is not None else ():
            self._key_lease.pop(key, None)

    def on_events(self, events: Iterable[Event]) -> None:
        """Follow applied changes: detach each key from its lease, attach a put's new one."""
        for event in events:
            key = event.kv.key
            old = self._key_lease.pop(key, 0)
            if old in self.leases:
                self.leases[old].keys.discard(key)
            new = event.kv.lease if event.type is EventType.PUT else 0
            if new in self.leases:
                self.leases[new].keys.add(key)
                self._key_lease[key] = new

    # ---- leader-local expiry ----

    def promote(self, now: float, extend: float = 0.0) -> None:
        """Become primary: every lease expires TTL (+extend) seconds from now."""
        self.primary = True
        self._reported.clear()
        for lease in self.leases.values():
            lease.expiry = now + lease.ttl + extend

    def demote(self) -> None:
        """Stop tracking expiry (no longer leader)."""
        self.primary = False
        self._reported.clear()
        for lease in self.leases.values():
            lease.expiry = None

    def renew(self, lease_id: int, now: float) -> int:
        """Keep-alive: restart the lease's TTL from now; return the TTL.

        NotPrimaryError off the leader; LEASE_NOT_FOUND for an unknown or expired lease.
        """
        if not self.primary:
            raise NotPrimaryError()
        lease = self.leases.get(lease_id)
        if lease is None or (lease.expiry is not None and lease.expiry <= now):
            raise RpcError(errors.LEASE_NOT_FOUND)
        lease.expiry = now + lease.ttl
        return lease.ttl

    def expired(self, now: float) -> list[int]:
        """Ids of leases whose expiry has passed, soonest first (empty unless primary).

        A lease listed once is listed again only after `retry_interval` seconds if it is
        still there (its revocation got lost), so a server polling every tick proposes
        each revocation once, not once per tick.
        """
        if not self.primary:
            return []
        due = [
            (lease.expiry, lease.lease_id)
            for lease in self.leases.values()
            if lease.expiry is not None
            and lease.expiry <= now
            and now - self._reported.get(lease.lease_id, -math.inf) >= self.retry_interval
        ]
        for _, lease_id in due:
            self._reported[lease_id] = now
        return [lease_id for _, lease_id in sorted(due)]

    def time_to_live(self, lease_id: int, now: float, with_keys: bool = False) -> TimeToLive:
        """Remaining TTL (whole seconds, truncated as etcd does) and granted TTL."""
        lease = self.leases.get(lease_id)
        if lease is None:
            raise RpcError(errors.LEASE_NOT_FOUND)
        remaining = int(lease.remaining(now))
        keys = tuple(sorted(lease.keys)) if with_keys else ()
        return TimeToLive(lease_id, remaining, lease.ttl, keys)

    def lease_ids(self) -> list[int]:
        return sorted(self.leases)
