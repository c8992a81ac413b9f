"""HashKV across targets: the seeded write script is a pure function of the seed; trails
that agree hold, the first differing step is a violation with both answers, a missing
trail is unknown; run for real, a member of ours and real etcd 3.5.1 agree after every
write, and `etcdspec conform --hashkv-across` reports the check in result.json."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from etcdspec.cli.main import run
from etcdspec.conform.hash_across import NAME, Step, compare_trails, hashkv_across, seeded_writes
from etcdspec.verdict import Verdict


def test_the_script_is_a_function_of_the_seed_and_has_every_kind_of_write() -> None:
    one, again, other = seeded_writes(7), seeded_writes(7), seeded_writes(8)
    assert [w.describe() for w in one] == [w.describe() for w in again]
    assert [w.describe() for w in one] != [w.describe() for w in other]
    kinds = Counter(w.method for w in one)
    assert set(kinds) == {"Put", "DeleteRange", "Txn", "LeaseGrant", "LeaseRevoke", "Compact"}


def _trail(*hashes: int) -> list[Step]:
    return [("OK", (h, -1, i + 2)) for i, h in enumerate(hashes)]


def test_equal_trails_hold_and_the_first_difference_is_a_violation() -> None:
    writes = seeded_writes(0, 3)
    same = compare_trails({"reference": _trail(1, 2, 3), "etcd": _trail(1, 2, 3)}, writes, 0.1)
    assert same.verdict is Verdict.TRUE
    differ = compare_trails({"reference": _trail(1, 5, 6), "etcd": _trail(1, 2, 3)}, writes, 0.1)
    assert differ.verdict is Verdict.FALSE and "after write 2 of 3" in differ.summary
    assert differ.details[1:] == ("reference: ('OK', (5, -1, 3))", "etcd: ('OK', (2, -1, 3))")


def test_a_target_without_a_trail_is_unknown_not_a_pass() -> None:
    result = compare_trails({"reference": _trail(1), "etcd": "TargetError: no etcd"}, [], 0.1)
    assert result.verdict is Verdict.UNKNOWN and "no etcd" in result.summary


@pytest.mark.etcd
def test_ours_and_etcd_agree_after_every_seeded_write(tmp_path: Path) -> None:
    result = asyncio.run(hashkv_across(tmp_path, seed=3))
    assert result.verdict is Verdict.TRUE, (result.summary, result.details)


@pytest.mark.etcd
def test_conform_hashkv_across_adds_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(
        [
            "conform",
            "--report",
            str(tmp_path),
            "--duration",
            "2s",
            "--faults",
            "",
            "--members",
            "1",
            "--hashkv-across",
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    checks = {check["name"]: check for check in document["checks"]}
    assert checks[NAME]["valid"] is True, checks[NAME]
    assert code == 0
