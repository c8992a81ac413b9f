"""Disk faults: an acknowledged write's bytes damaged in the middle of a member's WAL
while the member is down, and the rule for what the member must then do.

Contract:
- `damage_wal(data_dir, marker)` flips one bit in the middle of every occurrence of
  `marker` in the member's WAL segments (`member/wal/*.wal`: etcd's layout, and ours).
  The marker is a unique value the harness wrote through the cluster and saw applied on
  that member, followed by later writes, so the record holding it is covered by a
  checksum and is not the WAL's last (a damaged last record may be a torn write, which a
  member may cut away). The flipped byte stays printable, so the record still parses:
  only the checksum can tell. `WalDamage.restore()` puts the original bytes back (the
  operator replaced the bad block), after which the member starts on its own data.
- The rule (`DiskFaultOutcome`): a member started on a WAL damaged in the middle must
  refuse to start (etcd stops at the CRC mismatch; ours raises WalCorruption naming the
  file and offset). One that serves (answers Status naming a leader) is a violation:
  it replayed bytes it cannot vouch for, where it had acknowledged others. Neither
  within the deadline is unknown.
- `damage_snapshot(data_dir)` (corrupt-snap) flips the lowest bit of the middle byte of
  the member's newest snapshot file (`member/snap/*.snap`, etcd's name and ours:
  term-index in hex; the harness made the member take it after a marker write, and
  waited for its log to say it saved it: `saved_snapshots`).
  `SnapDamage.restore()` writes the original bytes back under the original name and
  removes etcd's `<name>.broken` (etcd renames a snapshot file that fails its CRC).
  The rule: the member refuses to start ("refused"), or it starts from what is intact
  — an older snapshot and the WAL — having said in its log that it passed the damaged
  file over (its name), and serves every acknowledged write: the marker, read on that
  member ("recovered"). One that serves without naming the file used bytes it could
  not vouch for ("served"); one that lost the marker served a history missing an
  acknowledged write ("lost"); both are violations. etcd 3.5.1 and ours both recover
  (etcd: "snap file is corrupt", "renamed to a broken snap file"; ours: "skipping
  snapshot file ... checksum mismatch"); the snap_skip_crc failpoint serves silently.
- Works on files only: the member must be down while it runs.
- The same check judges fsync-eio (conform/faults.py, on faultfs): a member whose
  fsyncs fail must stop ("stopped" holds); one still serving after the deadline is a
  violation ("served"); neither is unknown.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

FSYNC_EIO = "fsync fails (EIO)"  # the damage of a fsync-eio outcome


class DiskFaultError(RuntimeError):
    """The damage could not be done (no WAL, or the marker is not in it); says why."""


@dataclass(frozen=True)
class Flip:
    path: Path
    offset: int
    original: int

    def describe(self) -> str:
        return f"{self.path.name}:{self.offset}"


@dataclass(frozen=True)
class WalDamage:
    flips: tuple[Flip, ...]

    def describe(self) -> str:
        return "bit flipped at " + ", ".join(flip.describe() for flip in self.flips)

    def restore(self) -> None:
        for flip in self.flips:
            with flip.path.open("r+b") as handle:
                handle.seek(flip.offset)
                handle.write(bytes([flip.original]))
                handle.flush()


@dataclass(frozen=True)
class SnapDamage:
    flip: Flip

    @property
    def path(self) -> Path:
        return self.flip.path

    def describe(self) -> str:
        return f"bit flipped at {self.flip.describe()}"

    def restore(self) -> None:
        """The original bytes back under the original name (etcd renamed it .broken)."""
        broken = self.path.with_name(self.path.name + ".broken")
        source = self.path if self.path.exists() else broken
        data = bytearray(source.read_bytes())
        data[self.flip.offset] = self.flip.original
        self.path.write_bytes(bytes(data))
        broken.unlink(missing_ok=True)


def snapshot_files(data_dir: Path) -> list[Path]:
    """The member's snapshot files, oldest first (by the index in the name, then term)."""

    def position(path: Path) -> tuple[int, int]:
        return snapshot_index(path), int(path.stem.partition("-")[0], 16)

    found = [p for p in (data_dir / "member" / "snap").glob("*.snap") if "-" in p.stem]
    return sorted(found, key=position)


def snapshot_index(path: Path) -> int:
    return int(path.stem.partition("-")[2], 16)


def saved_snapshots(log_path: str) -> list[int]:
    """The indexes of the snapshots a member's log says it saved — recorded in its WAL,
    so a start reads them (ours: "snapshot saved" with `index`; etcd: "saved snapshot"
    with `snapshot-index`). A file on disk may not be recorded yet, and is then never
    read: damaging it would test nothing."""
    found = []
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        if "snapshot" not in line:
            continue
        with contextlib.suppress(ValueError, AttributeError):
            entry = json.loads(line)
            if entry.get("msg") in ("snapshot saved", "saved snapshot"):
                index = entry.get("index", entry.get("snapshot-index"))
                if isinstance(index, int):
                    found.append(index)
    return found


def damage_snapshot(data_dir: Path, index: int | None = None) -> SnapDamage:
    """Flip the lowest bit of the middle byte of the member's snapshot file at `index`
    (default: its newest; DiskFaultError when there is none)."""
    files = snapshot_files(data_dir)
    if index is not None:
        files = [path for path in files if snapshot_index(path) == index]
    if not files:
        at = "" if index is None else f" at index {index}"
        raise DiskFaultError(f"{data_dir}: no snapshot file{at} under member/snap/")
    path = files[-1]
    data = path.read_bytes()
    offset = len(data) // 2
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(bytes([data[offset] ^ 0x01]))
        handle.flush()
    return SnapDamage(Flip(path, offset, data[offset]))


def wal_segments(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "member" / "wal").glob("*.wal"))


def damage_wal(data_dir: Path, marker: bytes) -> WalDamage:
    """Flip the lowest bit of the middle byte of every occurrence of `marker` in the
    member's WAL segments (DiskFaultError when there are none)."""
    segments = wal_segments(data_dir)
    if not segments:
        raise DiskFaultError(f"{data_dir}: no WAL segment under member/wal/")
    flips: list[Flip] = []
    for path in segments:
        data = path.read_bytes()
        start = data.find(marker)
        while start >= 0:
            offset = start + len(marker) // 2
            flips.append(Flip(path, offset, data[offset]))
            start = data.find(marker, start + len(marker))
    if not flips:
        raise DiskFaultError(
            f"{data_dir}: the marker {marker.decode(errors='replace')} is in none of "
            f"{len(segments)} WAL segment(s)"
        )
    for flip in flips:
        with flip.path.open("r+b") as handle:
            handle.seek(flip.offset)
            handle.write(bytes([flip.original ^ 0x01]))
            handle.flush()
    return WalDamage(tuple(flips))


@dataclass(frozen=True)
class DiskFaultOutcome:
    """What one member did when started on a WAL damaged in the middle."""

    member: str
    damage: str
    # "refused", "stopped" or "recovered" (as required); "served" or "lost"; "undecided"
    outcome: str
    evidence: str  # the member's last log line, or what was seen
    file: str = "WAL"  # what was damaged: "WAL" or "snapshot"

    @property
    def verdict(self) -> Verdict:
        good = {
            "refused": Verdict.TRUE,
            "stopped": Verdict.TRUE,
            "recovered": Verdict.TRUE,
            "served": Verdict.FALSE,
            "lost": Verdict.FALSE,
        }
        return good.get(self.outcome, Verdict.UNKNOWN)

    @property
    def fsync_failed(self) -> bool:
        return self.damage == FSYNC_EIO

    def describe(self) -> str:
        if self.fsync_failed:
            said = {
                "stopped": "stopped",
                "served": "kept serving (it must stop)",
                "undecided": "neither stopped nor served in time",
            }[self.outcome]
            return f"{self.member}, {self.damage}: {said}: {self.evidence}"
        if self.file == "snapshot":
            said = {
                "refused": "refused to start",
                "recovered": "passed the damaged file over, naming it, and kept every write",
                "served": "served without naming the damaged file (it used it)",
                "lost": "served without an acknowledged write",
                "undecided": "neither refused nor served in time",
            }[self.outcome]
            return f"{self.member}, snapshot {self.damage}: {said}: {self.evidence}"
        said = {
            "refused": "refused to start",
            "served": "started and served (it must refuse)",
            "undecided": "neither refused nor served in time",
        }[self.outcome]
        return f"{self.member}, WAL {self.damage}: {said}: {self.evidence}"


def disk_fault_result(outcomes: list[DiskFaultOutcome]) -> CheckResult | None:
    """The run's DiskFaults check (None when no disk fault was injected)."""
    if not outcomes:
        return None
    verdict = Verdict.merge_all([outcome.verdict for outcome in outcomes])
    parts = []
    snapshots = [o for o in outcomes if o.file == "snapshot"]
    if snapshots:
        kept = sum(o.outcome in ("refused", "recovered") for o in snapshots)
        parts.append(
            f"{kept} of {len(snapshots)} members refused a damaged snapshot file or "
            "recovered from what was intact, saying so"
        )
    damaged = [o for o in outcomes if not o.fsync_failed and o.file == "WAL"]
    if damaged:
        refused = sum(o.outcome == "refused" for o in damaged)
        parts.append(f"{refused} of {len(damaged)} members refused a WAL damaged in the middle")
    failing = [o for o in outcomes if o.fsync_failed]
    if failing:
        stopped = sum(o.outcome == "stopped" for o in failing)
        parts.append(f"{stopped} of {len(failing)} members stopped when their fsync failed")
    summary = "; ".join(parts)
    bad = [o.describe() for o in outcomes if o.verdict is not Verdict.TRUE]
    return CheckResult("DiskFaults", verdict, summary, details=tuple(bad))


def last_log_line(log_path: str, contains: tuple[str, ...] = ("wal", "WAL", "crc")) -> str:
    """What the member last said of its WAL or a checksum (else its last line): the
    `error` field of a JSON log line (etcd's and ours), or the line itself."""
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError as error:
        return f"(no log: {error})"
    chosen = next(
        (line for line in reversed(lines[-200:]) if any(word in line for word in contains)),
        lines[-1] if lines else "(empty log)",
    )
    with contextlib.suppress(ValueError, AttributeError):
        said = json.loads(chosen).get("error")
        if said:
            return str(said)[:400]
    return chosen.strip()[:400]
