"""The server's verify stage: a quick run holds on a correct server, and its verdict
logic reports lost writes as a violation and a stalled run as unknown (never a pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.impl.tools import durability
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict


def test_quick_stage_holds_on_our_server(tmp_path: Path) -> None:
    result = durability.run_stage(StageOptions(report_dir=tmp_path, quick=True))
    assert result.verdict is Verdict.TRUE, result.describe()
    # A witness that the load ran across the faults, not a throughput figure (the stage
    # itself says UNKNOWN if writes stall).
    assert result.details["acknowledged"] >= 50
    assert "HashKV agree" in result.summary


def test_a_run_without_progress_is_unknown() -> None:
    load = durability.Load(endpoints=[])
    with pytest.raises(durability.StageUnknown, match="stalled"):
        load.wait_for_more(1, timeout_s=0.1)


def test_unreachable_members_are_unknown_not_a_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise durability.launcher.LauncherError("cluster not ready after 60 s")

    monkeypatch.setattr(durability.launcher, "wait_ready", refuse)
    result = durability.run_stage(StageOptions(report_dir=tmp_path, quick=True))
    assert result.verdict is Verdict.UNKNOWN
    assert "undecided" in result.summary
