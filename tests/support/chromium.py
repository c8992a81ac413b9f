"""What the tests of self-contained pages (the checker's timeline, the counterexample
diagrams) need besides the browser (tests/support/browser.py opens the pages): decode a
PNG with the standard library, count its colours, index the DOM's elements. `CHROMIUM`
is None when Debian's chromium is not installed; `ARTEFACTS` (reports/tests/,
gitignored) is where tests leave their screenshots."""

from __future__ import annotations

import shutil
import struct
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTEFACTS = Path(__file__).resolve().parents[2] / "reports" / "tests"


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit RGB or RGBA PNG (the
    standard library's zlib; the five PNG filters undone)."""
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos : pos + 4])
        kind, body = blob[pos + 4 : pos + 8], blob[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), f"unexpected PNG format {depth}/{colour}"
    step = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * step
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], raw[start + 1 : start + 1 + stride]
        previous = _unfilter(kind, line, previous, step)
        rows.append(
            previous if step == 3 else bytes(v for i, v in enumerate(previous) if i % 4 != 3)
        )
    return width, height, rows


def _unfilter(kind: int, line: bytes, up: bytes, step: int) -> bytes:
    """One scanline with its PNG filter (0 none, 1 sub, 2 up, 3 average, 4 Paeth) undone."""
    if kind == 0:
        return line
    if kind == 2:
        return bytes((a + b) & 0xFF for a, b in zip(line, up, strict=True))
    out = bytearray(line)
    for x in range(len(out)):
        left = out[x - step] if x >= step else 0
        if kind == 1:
            out[x] = (out[x] + left) & 0xFF
        elif kind == 3:
            out[x] = (out[x] + ((left + up[x]) >> 1)) & 0xFF
        else:
            above, corner = up[x], up[x - step] if x >= step else 0
            p = left + above - corner
            pa, pb, pc = abs(p - left), abs(p - above), abs(p - corner)
            best = left if pa <= pb and pa <= pc else above if pb <= pc else corner
            out[x] = (out[x] + best) & 0xFF
    return bytes(out)


def colour_counts(rows: list[bytes]) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for row in rows:
        counts.update(row[x : x + 3] for x in range(0, len(row), 3))
    return counts


class Elements(HTMLParser):
    """Every element's tag and attributes, and those with an id by id."""

    def __init__(self) -> None:
        super().__init__()
        self.all: list[tuple[str, dict[str, str]]] = []
        self.by_id: dict[str, dict[str, str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.all.append((tag, found))
        if "id" in found:
            self.by_id[found["id"]] = found

    def classed(self, name: str) -> list[dict[str, str]]:
        return [a for _, a in self.all if name in a.get("class", "").split()]
