"""The corrupt-snap fault (conform/disk_faults.py, conform/faults.py): a bit flipped in the
middle of a member's newest saved snapshot file while it is down. The member must refuse
to start, or recover from what is intact (an older snapshot and the WAL) naming the file
it passed over, keeping every acknowledged write. Ours and etcd 3.5.1 both recover so
(ours: "skipping snapshot file ... checksum mismatch"; etcd: "snap file is corrupt",
renamed .broken); ours with the snapshot checksum skipped (failpoint snap_skip_crc) uses
the damaged file without a word, which the run's DiskFaults check reports as a violation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.conform.disk_faults import (
    DiskFaultError,
    DiskFaultOutcome,
    damage_snapshot,
    disk_fault_result,
    saved_snapshots,
    snapshot_files,
)
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.verdict import Verdict


def _snaps(tmp_path: Path, *names: str) -> Path:
    snap = tmp_path / "member" / "snap"
    snap.mkdir(parents=True)
    for number, name in enumerate(names):
        (snap / name).write_bytes(bytes(range(number, number + 40)))
    (snap / "db").write_bytes(b"not a snapshot file")
    return tmp_path


def test_damage_flips_the_middle_of_the_chosen_snapshot_and_restore_undoes_it(
    tmp_path: Path,
) -> None:
    data_dir = _snaps(
        tmp_path,
        "0000000000000002-00000000000000c8.snap",
        "0000000000000001-0000000000000064.snap",
        "0000000000000002-000000000000012c.snap",
    )
    assert [p.name[-8:] for p in snapshot_files(data_dir)] == ["064.snap", "0c8.snap", "12c.snap"]
    newest = snapshot_files(data_dir)[-1]
    original = newest.read_bytes()
    damage = damage_snapshot(data_dir)
    assert damage.path == newest and damage.flip.offset == 20
    assert newest.read_bytes()[20] == original[20] ^ 1
    newest.rename(newest.with_name(newest.name + ".broken"))  # as etcd does with a bad one
    damage.restore()
    assert newest.read_bytes() == original
    assert not newest.with_name(newest.name + ".broken").exists()
    chosen = damage_snapshot(data_dir, index=0xC8)
    assert chosen.path.name == "0000000000000002-00000000000000c8.snap"
    chosen.restore()
    with pytest.raises(DiskFaultError, match="no snapshot file at index 7"):
        damage_snapshot(data_dir, index=7)


def test_no_snapshot_file_says_why(tmp_path: Path) -> None:
    with pytest.raises(DiskFaultError, match="no snapshot file under member/snap/"):
        damage_snapshot(_snaps(tmp_path))


def test_saved_snapshots_are_read_from_our_log_and_etcds(tmp_path: Path) -> None:
    ours = tmp_path / "ours.log"
    ours.write_text(
        '{"level": "info", "msg": "snapshot saved", "index": 100}\n'
        '{"level": "info", "msg": "snapshot passed over", "snapshot": "100/1"}\n'
        "not json, a snapshot word\n"
        '{"level": "info", "msg": "snapshot saved", "index": 200}\n'
    )
    etcd = tmp_path / "etcd.log"
    etcd.write_text(
        '{"level":"info","msg":"triggering snapshot","local-member-applied-index":101}\n'
        '{"level":"info","msg":"saved snapshot","snapshot-index":101}\n'
    )
    assert saved_snapshots(str(ours)) == [100, 200]
    assert saved_snapshots(str(etcd)) == [101]
    assert saved_snapshots(str(tmp_path / "none.log")) == []


def test_outcomes_judged_refused_and_recovered_hold_served_and_lost_violate() -> None:
    def outcome(kind: str) -> DiskFaultOutcome:
        return DiskFaultOutcome("m1", "bit flipped", kind, "evidence", "snapshot")

    holds = disk_fault_result([outcome("refused"), outcome("recovered")])
    assert holds is not None and holds.verdict is Verdict.TRUE
    assert holds.summary.startswith("2 of 2 members refused a damaged snapshot file")
    for bad in ("served", "lost"):
        violated = disk_fault_result([outcome("recovered"), outcome(bad)])
        assert violated is not None and violated.verdict is Verdict.FALSE
    unknown = disk_fault_result([outcome("recovered"), outcome("undecided")])
    assert unknown is not None and unknown.verdict is Verdict.UNKNOWN
    assert "without an acknowledged write" in outcome("lost").describe()


def _options(tmp_path: Path, target: str, failpoints: tuple[str, ...] = ()) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path,
        target=target,
        faults=("corrupt-snap",),
        duration_s=2.0,  # one fault (at 1 s): the run waits for it to end
        seed=1,
        fault_interval_s=1.0,
        failpoints=failpoints,
    )


def _run(tmp_path: Path, target: str, failpoints: tuple[str, ...] = ()) -> ConformResult:
    return run_conform(_options(tmp_path, target, failpoints))


Runs = dict[str, Outcome[ConformResult]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The snapshot-damage runs (ours, ours skipping the checksum, etcd), made side by side
    (each its own cluster and report folder)."""
    jobs: dict[str, Callable[[], ConformResult]] = {
        "ours": partial(_run, tmp_path_factory.mktemp("ours"), "reference"),
        "skip_crc": partial(
            _run, tmp_path_factory.mktemp("skip_crc"), "reference", ("snap_skip_crc",)
        ),
        "etcd": partial(_run, tmp_path_factory.mktemp("etcd"), "etcd"),
    }
    return run_side_by_side(jobs)


@pytest.mark.slow
def test_our_members_recover_from_a_damaged_snapshot_naming_it(runs: Runs) -> None:
    result = runs["ours"].value()
    disk = result.more_check("DiskFaults")
    assert disk is not None and disk.verdict is Verdict.TRUE, result.describe()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert any("checksum mismatch" in fault for fault in result.faults), result.faults


@pytest.mark.slow
def test_a_member_skipping_the_snapshot_checksum_is_caught(runs: Runs) -> None:
    result = runs["skip_crc"].value()
    disk = result.more_check("DiskFaults")
    assert disk is not None and disk.verdict is Verdict.FALSE, result.describe()
    assert result.verdict is Verdict.FALSE


@pytest.mark.slow
@pytest.mark.etcd
def test_real_etcd_recovers_from_a_damaged_snapshot_naming_it(runs: Runs) -> None:
    result = runs["etcd"].value()
    disk = result.more_check("DiskFaults")
    assert disk is not None and disk.verdict is Verdict.TRUE, result.describe()
    assert any("broken snap file" in fault for fault in result.faults), result.faults
