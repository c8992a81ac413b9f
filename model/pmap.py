"""A small persistent hash map with a content hash kept up to date on every change.

Contract: a `PMap` never changes after construction. `set`, `remove` and `update` return
a new map that shares every untouched bucket with the old one, so a write copies one
bucket (about n/64 entries) and a 64-slot tuple instead of the whole map. Two maps are
equal when they hold the same items; `hash()` is an order-free sum of the items' hashes,
maintained incrementally, so it costs O(1) to ask. Values must be hashable.
Iteration order is not meaningful: callers that need key order sort. Pickling stores
the items, so a map unpickled in another process (another hash seed) is rebuilt there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_BUCKETS = 64
_MASK = _BUCKETS - 1
_MOD = 1 << 64


class PMap(Generic[K, V]):
    """An immutable map; writes return new maps that share structure."""

    __slots__ = ("_buckets", "_hash", "_size")

    def __init__(
        self, buckets: tuple[dict[K, V] | None, ...] | None = None, size: int = 0, h: int = 0
    ) -> None:
        self._buckets: tuple[dict[K, V] | None, ...] = buckets or (None,) * _BUCKETS
        self._size = size
        self._hash = h

    @staticmethod
    def from_mapping(items: Mapping[K, V]) -> PMap[K, V]:
        return PMap[K, V]().update(dict(items))

    def get(self, key: K) -> V | None:
        bucket = self._buckets[hash(key) & _MASK]
        return None if bucket is None else bucket.get(key)

    def __contains__(self, key: object) -> bool:
        bucket = self._buckets[hash(key) & _MASK]
        return bucket is not None and key in bucket

    def __len__(self) -> int:
        return self._size

    def items(self) -> Iterator[tuple[K, V]]:
        for bucket in self._buckets:
            if bucket:
                yield from bucket.items()

    def keys(self) -> Iterator[K]:
        for bucket in self._buckets:
            if bucket:
                yield from bucket

    def values(self) -> Iterator[V]:
        for bucket in self._buckets:
            if bucket:
                yield from bucket.values()

    def set(self, key: K, value: V) -> PMap[K, V]:
        return self.update({key: value})

    def remove(self, key: K) -> PMap[K, V]:
        return self.update({key: None})

    def update(self, changes: Mapping[K, V | None]) -> PMap[K, V]:
        """A new map with each key set to its value, or removed where the value is None."""
        if not changes:
            return self
        if len(changes) == 1:
            ((key, value),) = changes.items()
            return self._update_one(key, value)
        buckets = list(self._buckets)
        copied: set[int] = set()
        size, h = self._size, self._hash
        for key, value in changes.items():
            index = hash(key) & _MASK
            bucket = buckets[index]
            old = None if bucket is None else bucket.get(key)
            if old is None and value is None:
                continue
            if old is not None and value is not None and old == value:
                continue
            if index not in copied:
                bucket = {} if bucket is None else dict(bucket)
                buckets[index] = bucket
                copied.add(index)
            assert bucket is not None
            if old is not None:
                h = (h - hash((key, old))) % _MOD
                size -= 1
                del bucket[key]
            if value is not None:
                h = (h + hash((key, value))) % _MOD
                size += 1
                bucket[key] = value
        return PMap(tuple(buckets), size, h)

    def _update_one(self, key: K, value: V | None) -> PMap[K, V]:
        index = hash(key) & _MASK
        bucket = self._buckets[index]
        old = None if bucket is None else bucket.get(key)
        if old is None and value is None:
            return self
        new_bucket = {} if bucket is None else dict(bucket)
        size, h = self._size, self._hash
        if old is not None:
            h -= hash((key, old))
            size -= 1
            del new_bucket[key]
        if value is not None:
            h += hash((key, value))
            size += 1
            new_bucket[key] = value
        buckets = list(self._buckets)
        buckets[index] = new_bucket
        return PMap(tuple(buckets), size, h % _MOD)

    def __reduce__(self) -> tuple[object, tuple[dict[K, V]]]:
        # Buckets and the hash depend on this process's hash seed: pickle the items and
        # rebuild them, so a map unpickled in another process is laid out for it.
        return (PMap.from_mapping, (dict(self.items()),))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, PMap):
            return NotImplemented
        if self._size != other._size or self._hash != other._hash:
            return False
        for mine, theirs in zip(self._buckets, other._buckets, strict=True):
            if mine is theirs:
                continue
            if (mine or {}) != (theirs or {}):
                return False
        return True

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"
