"""Disk faults (conform/disk_faults.py): an acknowledged write damaged in the middle of a
member's WAL while it is down. The member must refuse to start; ours does and names the
file and offset, real etcd 3.5.1 does ("walpb: crc mismatch"), and ours with the WAL's
payload checksum skipped (failpoint wal_skip_payload_crc) starts and serves, which the
run's DiskFaults check reports as a violation."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.checker.results import CheckResult
from etcdspec.conform.disk_faults import (
    DiskFaultError,
    DiskFaultOutcome,
    damage_wal,
    disk_fault_result,
    last_log_line,
)
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.verdict import Verdict

MARKER = b"disk-fault-marker-00000000deadbeef"


def _wal(tmp_path: Path, *segments: bytes) -> Path:
    wal = tmp_path / "member" / "wal"
    wal.mkdir(parents=True)
    for index, data in enumerate(segments):
        (wal / f"{index:016x}-{index:016x}.wal").write_bytes(data)
    return tmp_path


def test_damage_flips_one_bit_in_every_copy_of_the_marker_and_restore_undoes_it(
    tmp_path: Path,
) -> None:
    first = b"head" + MARKER + b"middle" + MARKER + b"tail"
    second = b"x" * 10 + MARKER + bytes(20)
    data_dir = _wal(tmp_path, first, second)
    damage = damage_wal(data_dir, MARKER)
    assert len(damage.flips) == 3
    paths = sorted((data_dir / "member" / "wal").glob("*.wal"))
    damaged = [path.read_bytes() for path in paths]
    assert MARKER not in damaged[0] and MARKER not in damaged[1]
    assert [
        sum(a != b for a, b in zip(d, o, strict=True))
        for d, o in zip(damaged, (first, second), strict=True)
    ] == [2, 1]
    middle = len(MARKER) // 2
    assert damage.flips[0].offset == 4 + middle
    assert "0000000000000000-0000000000000000.wal:" in damage.describe()
    damage.restore()
    assert [path.read_bytes() for path in paths] == [first, second]


def test_damage_without_a_wal_or_without_the_marker_says_why(tmp_path: Path) -> None:
    with pytest.raises(DiskFaultError, match="no WAL segment"):
        damage_wal(tmp_path, MARKER)
    data_dir = _wal(tmp_path, b"other bytes")
    with pytest.raises(DiskFaultError, match="in none of 1 WAL segment"):
        damage_wal(data_dir, MARKER)
    assert (
        data_dir / "member" / "wal" / "0000000000000000-0000000000000000.wal"
    ).read_bytes() == b"other bytes"


def test_outcomes_judged_refused_holds_served_violates_undecided_unknown() -> None:
    refused = DiskFaultOutcome("m1", "damaged", "refused", "walpb: crc mismatch")
    served = DiskFaultOutcome("m2", "damaged", "served", "Status answered")
    undecided = DiskFaultOutcome("m3", "damaged", "undecided", "after 20 s")
    assert disk_fault_result([]) is None
    holds = disk_fault_result([refused])
    assert holds is not None and holds.verdict is Verdict.TRUE and holds.details == ()
    unknown = disk_fault_result([refused, undecided])
    assert unknown is not None and unknown.verdict is Verdict.UNKNOWN
    violated = disk_fault_result([refused, undecided, served])
    assert violated is not None and violated.verdict is Verdict.FALSE
    assert violated.summary == "1 of 3 members refused a WAL damaged in the middle"
    assert any("started and served (it must refuse)" in d for d in violated.details)


def test_last_log_line_reads_the_error_of_a_json_line(tmp_path: Path) -> None:
    log = tmp_path / "m1.log"
    log.write_text(
        '{"level":"info","msg":"starting"}\n'
        '{"level":"fatal","msg":"discovery failed","error":"walpb: crc mismatch"}\n'
        "plain last line\n"
    )
    assert last_log_line(str(log)) == "walpb: crc mismatch"
    assert last_log_line(str(tmp_path / "none.log")).startswith("(no log:")


def disk(result: ConformResult) -> CheckResult | None:
    return result.more_check("DiskFaults")


def _options(tmp_path: Path, target: str, failpoints: tuple[str, ...] = ()) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path,
        target=target,
        faults=("corrupt-wal",),
        duration_s=5.0,
        seed=1,
        fault_interval_s=1.0,
        failpoints=failpoints,
    )


def _run(tmp_path: Path, target: str, failpoints: tuple[str, ...] = ()) -> ConformResult:
    return run_conform(_options(tmp_path, target, failpoints))


Runs = dict[str, Outcome[ConformResult]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The WAL-damage runs (ours, ours skipping the checksum, etcd), made side by side (each
    its own cluster and report folder)."""
    jobs: dict[str, Callable[[], ConformResult]] = {
        "ours": partial(_run, tmp_path_factory.mktemp("ours"), "reference"),
        "skip_crc": partial(
            _run, tmp_path_factory.mktemp("skip_crc"), "reference", ("wal_skip_payload_crc",)
        ),
        "etcd": partial(_run, tmp_path_factory.mktemp("etcd"), "etcd"),
    }
    return run_side_by_side(jobs)


@pytest.mark.slow
def test_our_members_refuse_a_wal_damaged_in_the_middle(runs: Runs) -> None:
    result = runs["ours"].value()
    assert disk(result) is not None and disk(result).verdict is Verdict.TRUE, result.describe()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert any("corrupt WAL record at offset" in fault for fault in result.faults)


@pytest.mark.slow
def test_a_member_skipping_the_wal_checksum_is_caught(runs: Runs) -> None:
    result = runs["skip_crc"].value()
    assert disk(result) is not None and disk(result).verdict is Verdict.FALSE, result.describe()
    assert result.verdict is Verdict.FALSE


@pytest.mark.slow
@pytest.mark.etcd
def test_real_etcd_refuses_a_wal_damaged_in_the_middle(runs: Runs) -> None:
    result = runs["etcd"].value()
    assert disk(result) is not None and disk(result).verdict is Verdict.TRUE, result.describe()
    assert any("crc mismatch" in fault for fault in result.faults), result.faults
