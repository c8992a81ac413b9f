"""`etcdspec verify`: stages run in order, verdicts merge, result.json is written."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from etcdspec.cli import verify as verify_module
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict


def test_every_part_has_a_stage_in_order() -> None:
    assert [name for name, _ in verify_module.STAGES] == [
        "spec",
        "model",
        "checker",
        "conform",
        "trace",
    ]


def test_one_real_stage_writes_result_json(tmp_path: Path) -> None:
    code = run(["verify", "--quick", "--stage", "checker", "--report", str(tmp_path)])
    assert code == ExitCode.HOLDS
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["schema"] == "etcdspec.verify/1"
    assert document["valid"] is True
    assert [stage["name"] for stage in document["stages"]] == ["checker"]


def _fake_stages(monkeypatch: pytest.MonkeyPatch, outcomes: dict[str, object]) -> None:
    module = types.ModuleType("etcdspec_fake_stages")

    def make(name: str, outcome: object):  # type: ignore[no-untyped-def]
        def stage(options: StageOptions) -> StageResult:
            if isinstance(outcome, Exception):
                raise outcome
            assert isinstance(outcome, Verdict)
            return StageResult(name, outcome, "fake", 0.0)

        return stage

    for name, outcome in outcomes.items():
        setattr(module, name, make(name, outcome))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(
        verify_module, "STAGES", [(name, f"{module.__name__}:{name}") for name in outcomes]
    )


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ({"a": Verdict.TRUE, "b": Verdict.TRUE}, ExitCode.HOLDS),
        ({"a": Verdict.TRUE, "b": Verdict.UNKNOWN}, ExitCode.UNKNOWN),
        ({"a": Verdict.UNKNOWN, "b": Verdict.FALSE}, ExitCode.VIOLATION),
        ({"a": RuntimeError("boom"), "b": Verdict.TRUE}, ExitCode.UNKNOWN),
    ],
)
def test_stage_verdicts_merge_and_a_crash_is_unknown(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    outcomes: dict[str, object],
    expected: ExitCode,
) -> None:
    _fake_stages(monkeypatch, outcomes)
    assert run(["verify", "--report", str(tmp_path)]) == expected
