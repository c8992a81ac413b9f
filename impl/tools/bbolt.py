"""A reader of bbolt database files (the format of etcd's backend and its snapshots).

Pure: it reads a bytes object and never writes. Every offset is bounds-checked; a file
that is not bbolt, or is damaged, raises `BoltError` naming the file, the page and the
byte offset, and what was wrong. No maintained bbolt reader exists on PyPI (the one
package named for it is an unmaintained 2020 port), hence this small module.

The format, as bbolt (etcd-io/bbolt) lays it out on little-endian machines:
- The file is pages of `page_size` bytes. Page 0 and 1 are the two meta pages; the one
  with the higher transaction id whose FNV-64a checksum holds is current.
- A page starts with a 16-byte header: id u64, flags u16 (branch 0x01, leaf 0x02,
  meta 0x04, freelist 0x10), count u16, overflow u32 (the page continues over
  `overflow` more pages).
- Meta (after the header): magic u32 0xED0CDAED, version u32 (2), page_size u32,
  flags u32, root bucket (root page u64, sequence u64), freelist page u64, high water
  mark u64 (pages in use), txid u64, checksum u64 = FNV-64a of the 56 bytes before it.
- Branch elements (16 bytes each after the header): pos u32, ksize u32, child page u64;
  the key lies `pos` bytes after the element's own start.
- Leaf elements: flags u32 (0x01: the value is a nested bucket), pos u32, ksize u32,
  vsize u32; key then value `pos` bytes after the element's start.
- A bucket value is root page u64 + sequence u64; root 0 means an inline bucket, whose
  leaf page follows those 16 bytes inside the value.
- Freelist: page ids u64; a count of 0xFFFF means the real count is the first u64.

`BoltFile.check()` does what `bbolt check` (and etcdutl's status) does: every page
reachable from the root or free exactly once, none past the high water mark.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = 0xED0CDAED
NO_FREELIST = 0xFFFFFFFFFFFFFFFF
VERSION = 2
PAGE_HEADER = 16
ELEMENT = 16
META_BYTES = 64
BRANCH, LEAF, META, FREELIST = 0x01, 0x02, 0x04, 0x10
BUCKET_LEAF_FLAG = 0x01
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3

_HEADER = struct.Struct("<QHHI")
_META = struct.Struct("<IIIIQQQQQQ")
_BRANCH = struct.Struct("<IIQ")
_LEAF = struct.Struct("<IIII")
_BUCKET = struct.Struct("<QQ")


class BoltError(ValueError):
    """The file is not a readable bbolt database; the message names file, page, offset."""


def fnv64a(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value


@dataclass(frozen=True)
class Meta:
    """A meta page's fields."""

    page_size: int
    flags: int
    root: int
    freelist: int
    high_water: int
    txid: int

    def describe(self) -> str:
        return (
            f"page size {self.page_size}, root page {self.root}, freelist page "
            f"{self.freelist}, {self.high_water} pages, txid {self.txid}"
        )


@dataclass(frozen=True)
class Entry:
    """One leaf element: a key and its value, or a nested bucket's name (value None)."""

    key: bytes
    value: bytes | None


class BoltFile:
    """A bbolt database held in memory (`data`), read through its current meta page."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.where = where
        self.meta = self._current_meta()
        self.page_size = self.meta.page_size

    # ---- bounds ----

    def _fail(self, what: str, offset: int, page: int | None = None) -> BoltError:
        at = f"page {page}, " if page is not None else ""
        return BoltError(f"{self.where}: {at}offset {offset}: {what}")

    def _take(self, offset: int, size: int, page: int | None = None) -> bytes:
        if offset < 0 or offset + size > len(self.data):
            raise self._fail(
                f"needs {size} bytes but the file ends at {len(self.data)} (truncated?)",
                offset,
                page,
            )
        return self.data[offset : offset + size]

    # ---- meta ----

    def _read_meta(self, offset: int, page: int) -> Meta | str:
        """The meta page at `offset`, or why it is not valid."""
        if offset + PAGE_HEADER + META_BYTES > len(self.data):
            return f"meta page {page} at offset {offset} lies past the end of the file"
        _, flags, _, _ = _HEADER.unpack_from(self.data, offset)
        body = offset + PAGE_HEADER
        magic, version, page_size, mflags, root, _, freelist, high, txid, checksum = (
            _META.unpack_from(self.data, body)
        )
        if magic != MAGIC:
            return f"meta page {page}: magic {magic:#x} is not bbolt's {MAGIC:#x}"
        if not flags & META:
            return f"meta page {page}: flags {flags:#x} do not mark a meta page"
        if version != VERSION:
            return f"meta page {page}: version {version}, only {VERSION} is read"
        if fnv64a(self.data[body : body + META_BYTES - 8]) != checksum:
            return f"meta page {page}: checksum does not match its contents"
        if page_size < 512 or page_size & (page_size - 1):
            return f"meta page {page}: page size {page_size} is not a power of two >= 512"
        return Meta(page_size, mflags, root, freelist, high, txid)

    def _current_meta(self) -> Meta:
        first = self._read_meta(0, 0)
        if isinstance(first, str) and first.startswith("meta page 0: magic"):
            raise BoltError(f"{self.where}: not a bbolt database ({first})")
        page_size = first.page_size if isinstance(first, Meta) else 4096
        second = self._read_meta(page_size, 1)
        valid = [m for m in (first, second) if isinstance(m, Meta)]
        if not valid:
            raise BoltError(f"{self.where}: no valid meta page ({first}; {second})")
        meta = max(valid, key=lambda m: m.txid)
        if meta.high_water * meta.page_size > len(self.data):
            raise BoltError(
                f"{self.where}: the meta page says {meta.high_water} pages of "
                f"{meta.page_size} bytes ({meta.high_water * meta.page_size} bytes) but the "
                f"file has {len(self.data)} bytes (truncated?)"
            )
        return meta

    @property
    def size(self) -> int:
        """The database's size as bbolt reports it (tx.Size): high water mark x page size."""
        return self.meta.high_water * self.page_size

    # ---- pages ----

    def _page(self, page: int) -> tuple[int, int, int, int]:
        """(offset, flags, count, overflow) of page `page`, checked against the file."""
        if page < 2 or page >= self.meta.high_water:
            raise self._fail(
                f"reference to page {page}, outside the pages in use (2..{self.meta.high_water - 1})",
                page * self.page_size,
            )
        offset = page * self.page_size
        pid, flags, count, overflow = _HEADER.unpack(self._take(offset, PAGE_HEADER, page))
        if pid != page:
            raise self._fail(f"page header says page {pid}", offset, page)
        if page + overflow >= self.meta.high_water:
            raise self._fail(f"overflow of {overflow} pages runs past the pages in use", offset)
        return offset, flags, count, overflow

    def _walk(self, root: int, seen: dict[int, str] | None) -> Iterator[tuple[Entry, bytes]]:
        """Leaf entries under page `root` in key order, with each bucket entry's raw
        value (the bucket header) beside it."""
        offset, flags, count, overflow = self._page(root)
        if seen is not None:
            for p in range(root, root + overflow + 1):
                if p in seen:
                    raise self._fail(f"page {p} reached twice ({seen[p]})", p * self.page_size)
                seen[p] = f"tree page {root}"
        end = offset + (overflow + 1) * self.page_size
        if flags & LEAF:
            yield from self._leaf_with_raw(offset, count, end, root)
        elif flags & BRANCH:
            for i in range(count):
                at = offset + PAGE_HEADER + i * ELEMENT
                _, _, child = _BRANCH.unpack(self._take(at, ELEMENT, root))
                yield from self._walk(child, seen)
        else:
            raise self._fail(f"flags {flags:#x}: expected a branch or leaf page", offset, root)

    def _leaf_with_raw(
        self, offset: int, count: int, end: int, page: int | None
    ) -> Iterator[tuple[Entry, bytes]]:
        for i in range(count):
            at = offset + PAGE_HEADER + i * ELEMENT
            flags, pos, ksize, vsize = _LEAF.unpack(self._take(at, ELEMENT, page))
            start = at + pos
            if pos < ELEMENT or start + ksize + vsize > end:
                raise self._fail(
                    f"leaf element {i} ({ksize}+{vsize} bytes at {start}) lies outside its page",
                    at,
                    page,
                )
            key = self.data[start : start + ksize]
            value = self.data[start + ksize : start + ksize + vsize]
            if flags & BUCKET_LEAF_FLAG:
                yield Entry(key, None), value
            else:
                yield Entry(key, value), b""

    def _bucket_entries(
        self, header: bytes, name: bytes, seen: dict[int, str] | None
    ) -> Iterator[tuple[Entry, bytes]]:
        if len(header) < _BUCKET.size:
            raise BoltError(f"{self.where}: bucket {name!r}: header of {len(header)} bytes")
        root, _ = _BUCKET.unpack_from(header)
        if root != 0:
            yield from self._walk(root, seen)
            return
        # Inline bucket: a leaf page inside the value, after the bucket header.
        inline = header[_BUCKET.size :]
        if len(inline) < PAGE_HEADER:
            return
        _, flags, count, _ = _HEADER.unpack_from(inline)
        if count and not flags & LEAF:
            raise BoltError(
                f"{self.where}: inline bucket {name!r}: flags {flags:#x}, not a leaf page"
            )
        reader = BoltFile.__new__(BoltFile)
        reader.data, reader.where, reader.meta = (
            inline,
            f"{self.where} (bucket {name!r})",
            self.meta,
        )
        reader.page_size = self.page_size
        yield from reader._leaf_with_raw(0, count, len(inline), None)

    # ---- public ----

    def buckets(self) -> list[bytes]:
        """The top-level bucket names, in key order."""
        return [entry.key for entry, _ in self._walk(self.meta.root, None)]

    def bucket(self, name: bytes) -> Iterator[Entry]:
        """The entries of top-level bucket `name` in key order (nested buckets' values
        are None). BoltError if there is no such bucket."""
        for entry, raw in self._walk(self.meta.root, None):
            if entry.key == name:
                if entry.value is not None:
                    raise BoltError(f"{self.where}: {name!r} is a key, not a bucket")
                for inner, _ in self._bucket_entries(raw, name, None):
                    yield inner
                return
        raise BoltError(f"{self.where}: no bucket {name!r}")

    def has_bucket(self, name: bytes) -> bool:
        return name in self.buckets()

    def freelist(self) -> list[int] | None:
        """The free page ids (None: the file keeps no freelist, bbolt's NoFreelistSync)."""
        page = self.meta.freelist
        if page == NO_FREELIST:
            return None
        offset, flags, count, _ = self._page(page)
        if not flags & FREELIST:
            raise self._fail(f"flags {flags:#x}: expected the freelist page", offset, page)
        start = offset + PAGE_HEADER
        if count == 0xFFFF:
            (count,) = struct.unpack("<Q", self._take(start, 8, page))
            start += 8
        raw = self._take(start, 8 * count, page)
        return list(struct.unpack(f"<{count}Q", raw))

    def check(self) -> list[str]:
        """Consistency errors, as `bbolt check` reports them (empty: consistent)."""
        seen: dict[int, str] = {0: "meta", 1: "meta"}
        errors: list[str] = []
        free = None
        try:
            free = self.freelist()
            if free is not None:
                _, _, _, overflow = self._page(self.meta.freelist)
                for p in range(self.meta.freelist, self.meta.freelist + overflow + 1):
                    seen[p] = "freelist"
                for p in free:
                    if p in seen:
                        errors.append(f"page {p}: already {seen[p]}, also on the freelist")
                    elif p >= self.meta.high_water:
                        errors.append(f"page {p}: on the freelist, past the pages in use")
                    seen[p] = "free"
            for entry, raw in self._walk(self.meta.root, seen):
                if entry.value is None:
                    for _ in self._bucket_entries(raw, entry.key, seen):
                        pass
        except BoltError as error:
            errors.append(str(error))
            return errors
        for p in range(self.meta.high_water if free is not None else 0):
            if p not in seen:
                errors.append(f"page {p}: unreachable unfreed")
        return errors
