"""Report folder: result.json (valid, one entry per check, durations) and timeline.html,
which a headless Chromium renders without script errors, showing the failing op."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from etcdspec.checker.check import CheckOptions, check_history, load_history
from etcdspec.checker.report import write_report
from etcdspec.cli.main import run

DATA = Path(__file__).parent / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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


def _render(page: Path, tmp_path: Path) -> tuple[str, str]:
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=3000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    return done.stdout, done.stderr


def test_timeline_renders_in_headless_chromium_and_shows_the_failing_op(tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.fail("this test needs Debian's chromium: apt-get install -y chromium (.ci/run does)")
    options = CheckOptions(model="etcd")
    report = check_history(load_history(DATA / "etcd_stale_read.jsonl"), options)
    page = write_report(report, tmp_path / "report", options)["timeline"]
    dom, log = _render(page, tmp_path)
    console_errors = [
        line
        for line in log.splitlines()
        if "CONSOLE" in line and ("Error" in line or "ERROR" in line)
    ]
    assert not console_errors, console_errors
    assert 'data-rendered="3"' in dom  # the script ran to its end and drew every op
    assert 'id="op-2"' in dom and "bar failing" in dom
    assert 'href="#op-2"' in dom
    assert "bar prefix" in dom
