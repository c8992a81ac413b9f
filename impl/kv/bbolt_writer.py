"""A writer of bbolt database files, for snapshots that etcd's tools read.

Pure: `write_bbolt(buckets)` returns the bytes of a fresh, compact bbolt database
(format version 2, 4096-byte pages, little-endian) holding the given top-level buckets,
each a sorted list of (key, value). The layout is the one impl/tools/bbolt.py documents:
pages 0 and 1 meta (FNV-64a checksummed, transaction ids 0 and 1), page 2 an empty
freelist, then every bucket's B+tree (leaf pages packed in key order, a value larger
than a page on a leaf with overflow pages, branch levels above until one root page),
then the root bucket's leaf naming each bucket. Every page is reachable exactly once, so
`bbolt check` (run by `etcdctl snapshot status`) finds nothing, and bbolt opens it
read-write (etcdutl's restore). Nested buckets and inline buckets are not written.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from itertools import pairwise

PAGE_SIZE = 4096
MAGIC = 0xED0CDAED
VERSION = 2
PAGE_HEADER = 16
ELEMENT = 16
BRANCH, LEAF, META, FREELIST = 0x01, 0x02, 0x04, 0x10
BUCKET_LEAF_FLAG = 0x01
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def _fnv64a(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value


class _Pages:
    """Pages allocated in order; each written page is its bytes, padded to whole pages."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.pages: list[bytes] = []

    @property
    def next_id(self) -> int:
        return len(self.pages)

    def add(self, flags: int, count: int, body: bytes) -> int:
        page_id = self.next_id
        size = PAGE_HEADER + len(body)
        spans = max(1, -(-size // self.page_size))
        header = struct.pack("<QHHI", page_id, flags, count, spans - 1)
        raw = (header + body).ljust(spans * self.page_size, b"\0")
        self.pages.extend([raw[: self.page_size]] + [b""] * (spans - 1))
        self.pages[page_id] = raw
        return page_id


def _node_body(
    elements: Sequence[tuple[bytes, bytes]],
    leaf_flags: Sequence[int] | None,
    children: Sequence[int] | None,
) -> bytes:
    """The bytes after the page header: element headers, then keys (and values)."""
    count = len(elements)
    headers = bytearray()
    data = bytearray()
    for i, (key, value) in enumerate(elements):
        pos = (count - i) * ELEMENT + len(data)  # from this element's header to its key
        if children is None:
            flags = leaf_flags[i] if leaf_flags is not None else 0
            headers += struct.pack("<IIII", flags, pos, len(key), len(value))
            data += key + value
        else:
            headers += struct.pack("<IIQ", pos, len(key), children[i])
            data += key
    return bytes(headers + data)


def _split(sizes: Sequence[int], page_size: int) -> list[tuple[int, int]]:
    """[start, end) runs of elements filling pages in order (at least one each)."""
    runs = []
    start, used = 0, PAGE_HEADER
    for i, size in enumerate(sizes):
        if i > start and used + ELEMENT + size > page_size:
            runs.append((start, i))
            start, used = i, PAGE_HEADER
        used += ELEMENT + size
    runs.append((start, len(sizes)))
    return runs


def _write_tree(
    pages: _Pages, entries: Sequence[tuple[bytes, bytes]], leaf_flags: Sequence[int] | None = None
) -> int:
    """A B+tree of `entries` (sorted by key); the root page's id."""
    if not entries:
        return pages.add(LEAF, 0, b"")
    level: list[tuple[bytes, int]] = []  # (first key, page id)
    for start, end in _split([len(k) + len(v) for k, v in entries], pages.page_size):
        flags = leaf_flags[start:end] if leaf_flags is not None else None
        body = _node_body(entries[start:end], flags, None)
        level.append((entries[start][0], pages.add(LEAF, end - start, body)))
    while len(level) > 1:
        upper: list[tuple[bytes, int]] = []
        for start, end in _split([len(k) for k, _ in level], pages.page_size):
            run = level[start:end]
            body = _node_body([(k, b"") for k, _ in run], None, [p for _, p in run])
            upper.append((run[0][0], pages.add(BRANCH, len(run), body)))
        level = upper
    return level[0][1]


def _meta_page(page_id: int, root: int, freelist: int, high_water: int, page_size: int) -> bytes:
    body = struct.pack(
        "<IIIIQQQQQ", MAGIC, VERSION, page_size, 0, root, 0, freelist, high_water, page_id
    )
    body += struct.pack("<Q", _fnv64a(body))
    header = struct.pack("<QHHI", page_id, META, 0, 0)
    return (header + body).ljust(page_size, b"\0")


def write_bbolt(
    buckets: Mapping[bytes, Sequence[tuple[bytes, bytes]]], page_size: int = PAGE_SIZE
) -> bytes:
    """A bbolt file holding `buckets` (name -> entries sorted by key, keys unique)."""
    for name, entries in buckets.items():
        for (a, _), (b, _) in pairwise(entries):
            if not a < b:
                raise ValueError(f"bucket {name!r}: keys not strictly ascending at {b!r}")
    pages = _Pages(page_size)
    pages.pages.extend([b"", b""])  # the meta pages, written last
    freelist = pages.add(FREELIST, 0, b"")
    roots = {name: _write_tree(pages, entries) for name, entries in sorted(buckets.items())}
    names = sorted(roots)
    root = _write_tree(
        pages,
        [(name, struct.pack("<QQ", roots[name], 0)) for name in names],
        [BUCKET_LEAF_FLAG] * len(names),
    )
    high_water = pages.next_id
    pages.pages[0] = _meta_page(0, root, freelist, high_water, page_size)
    pages.pages[1] = _meta_page(1, root, freelist, high_water, page_size)
    return b"".join(pages.pages)
