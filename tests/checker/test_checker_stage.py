"""The checker's verify stage: every generated history of known verdict is judged right."""

from __future__ import annotations

from pathlib import Path

from etcdspec.checker.stage import run_stage
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict


def test_quick_stage_holds_and_lists_every_case(tmp_path: Path) -> None:
    result = run_stage(StageOptions(report_dir=tmp_path, seed=0, quick=True))
    assert result.verdict is Verdict.TRUE, result.details
    assert len(result.details) >= 3 + 4 + 2 + 9
    assert "watch drop_event" in result.details
