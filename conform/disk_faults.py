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
    outcome: str  # "refused" or "stopped" (as required), "served" or "undecided"
    evidence: str  # the member's last log line, or what was seen

    @property
    def verdict(self) -> Verdict:
        good = {"refused": Verdict.TRUE, "stopped": Verdict.TRUE, "served": Verdict.FALSE}
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
    damaged = [o for o in outcomes if not o.fsync_failed]
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
