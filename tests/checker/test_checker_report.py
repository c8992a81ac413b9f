"""Report folder: result.json (valid, one entry per check, durations) and timeline.html,
which a headless Chromium renders without script errors, showing the failing op."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import Browser

from etcdspec.checker.check import CheckOptions, check_history, load_history
from etcdspec.checker.report import write_report
from etcdspec.cli.main import run

DATA = Path(__file__).parent / "data"


def test_result_json_has_one_entry_per_check(tmp_path: Path) -> None:
    report = check_history(load_history(DATA / "watch_reliable_broken.jsonl"))
    paths = write_report(report, tmp_path)
    result = json.loads(paths["result"].read_text())
    assert result["schema_version"] == 1
    assert result["valid"] is False
    names = [c["name"] for c in result["checks"]]
    assert names[0] == "Linearizable" and "Reliable" in names
    assert all(isinstance(c["seconds"], float | int) for c in result["checks"])
    reliable = next(c for c in result["checks"] if c["name"] == "Reliable")
    assert reliable["valid"] is False and reliable["details"]


def test_check_json_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["check", str(DATA / "etcd_stale_read.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["valid"] is False
    assert out["linearizability"]["failure"]["failing_op"] == 2


def test_timeout_is_unknown_exit_3(tmp_path: Path) -> None:
    from etcdspec.checker.history import write_history
    from etcdspec.checker.simulate import simulate_register

    path = tmp_path / "big.jsonl"
    write_history(simulate_register(5, ops=3000, processes=40, info_rate=0.3), path)
    assert run(["check", str(path), "--model", "register", "--timeout", "0"]) == 3


def test_timeline_renders_in_headless_chromium_and_shows_the_failing_op(
    browser: Browser, tmp_path: Path
) -> None:
    options = CheckOptions(model="etcd")
    report = check_history(load_history(DATA / "etcd_stale_read.jsonl"), options)
    page = write_report(report, tmp_path / "report", options)["timeline"]
    tab = browser.open(page)
    assert not tab.errors, tab.errors
    dom = tab.dom()
    tab.close()
    assert 'data-rendered="3"' in dom  # the script ran to its end and drew every op
    assert 'id="op-2"' in dom and "bar failing" in dom
    assert 'href="#op-2"' in dom
    assert "bar prefix" in dom
