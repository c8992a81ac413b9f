"""Which keys a user may read or write: the union of its roles' permissions, checked as
etcd checks them.

A permission (authpb.Permission) covers a key interval: `[key]` when range_end is empty,
`[key, range_end)`, or every key from `key` on when range_end is "\\0". A request over one
key is permitted when some interval of the right type holds that key; a request over a
range `[key, range_end)` (or from `key` on) when the intervals of that type together
cover all of it without a gap, whichever roles they come from (etcd's interval-tree
`Contains`). READWRITE counts as both READ and WRITE.

`UserPerms` is an immutable value built from a user's roles; the auth store caches one
per user and drops the cache on every auth change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from etcdspec.impl.pb import auth_pb2

# An interval [begin, end); end None is "no end" (every key from begin on).
Interval = tuple[bytes, bytes | None]

READ = auth_pb2.Permission.READ
WRITE = auth_pb2.Permission.WRITE
READWRITE = auth_pb2.Permission.READWRITE


def interval_of(key: bytes, range_end: bytes) -> Interval:
    """The keys a permission (or a request) over (key, range_end) names."""
    if not range_end:
        return key, key + b"\x00"
    if range_end == b"\x00":
        return key, None
    return key, range_end


def _covers(intervals: list[Interval], wanted: Interval) -> bool:
    """Whether `intervals` (sorted by begin) together hold every key of `wanted`."""
    begin, end = wanted
    if end is not None and end <= begin:
        # An empty or reversed request range: etcd's tree visits the intervals that hold
        # its first key, and those contain it (etcd 3.5.1 permits such a range then).
        return any(b <= begin and (e is None or begin < e) for b, e in intervals)
    min_begin: bytes | None = None
    max_end: bytes | None = b""
    found = False
    for ivl_begin, ivl_end in intervals:
        overlaps = (end is None or ivl_begin < end) and (ivl_end is None or ivl_end > begin)
        if not overlaps:
            continue
        if not found:
            found, min_begin, max_end = True, ivl_begin, ivl_end
            continue
        if max_end is not None and max_end < ivl_begin:
            return False
        if max_end is not None and (ivl_end is None or ivl_end > max_end):
            max_end = ivl_end
    if not found or min_begin is None or min_begin > begin:
        return False
    if max_end is None:
        return True
    return end is not None and max_end >= end


@dataclass(frozen=True)
class UserPerms:
    """A user's merged read and write intervals, each sorted by begin."""

    read: tuple[Interval, ...]
    write: tuple[Interval, ...]

    @classmethod
    def of_roles(cls, roles: Iterable[auth_pb2.Role]) -> UserPerms:
        read: list[Interval] = []
        write: list[Interval] = []
        for role in roles:
            for perm in role.keyPermission:
                interval = interval_of(perm.key, perm.range_end)
                if perm.permType in (READ, READWRITE):
                    read.append(interval)
                if perm.permType in (WRITE, READWRITE):
                    write.append(interval)
        return cls(tuple(sorted(read, key=_begin)), tuple(sorted(write, key=_begin)))

    def permits(self, perm_type: int, key: bytes, range_end: bytes) -> bool:
        """Whether READ or WRITE (`perm_type`) over (key, range_end) is granted."""
        intervals = list(self.read if perm_type == READ else self.write)
        return _covers(intervals, interval_of(key, range_end))

    def describe(self) -> str:
        def text(intervals: tuple[Interval, ...]) -> str:
            return ", ".join(f"[{b!r}, {'∞' if e is None else repr(e)})" for b, e in intervals)

        return f"read {text(self.read) or '-'}; write {text(self.write) or '-'}"


def _begin(interval: Interval) -> bytes:
    return interval[0]
