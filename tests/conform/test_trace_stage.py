"""The trace-validation stage of `etcdspec verify` (conform/trace_stage.py): its quick
run records a real 3-member cluster of our server under load with a kill -9 of the
leader and its restart, and the traces replay, every kind of check having had work; the
same stage with a planted bug (the vote is never persisted) fails at the restart, and
that failing run's traces are drawn as a diagram (`etcdspec diagram`) checked in headless
Chromium; a replay that checked too little is UNKNOWN, not a pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser import Browser
from chromium import ARTEFACTS, Elements, colour_counts, png_pixels

from etcdspec.checker.diagram_trace import diagram_from_traces
from etcdspec.checker.trace_check import TraceResult
from etcdspec.cli.main import run
from etcdspec.conform.trace_stage import NAME, TracePlan, judge, run_stage, run_trace_stage
from etcdspec.exitcodes import ExitCode
from etcdspec.stage import StageOptions
from etcdspec.verdict import Verdict


@pytest.mark.timeout(150)
def test_quick_stage_replays_a_loaded_cluster_with_a_kill(tmp_path: Path) -> None:
    result = run_stage(StageOptions(report_dir=tmp_path, seed=1, quick=True))
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.name == NAME
    witnesses = result.details["witnesses"]
    assert witnesses["restarts"] >= 1 and witnesses["leader commits"] >= 25
    assert witnesses["matched receives"] >= 100
    assert result.details["writes"] >= 75
    report = Path(result.details["report"])
    assert sorted(p.name for p in report.glob("*.trace.ndjson")) == [
        "m1.trace.ndjson",
        "m2.trace.ndjson",
        "m3.trace.ndjson",
    ]


@pytest.mark.timeout(150)
def test_stage_with_the_vote_never_persisted_fails_at_the_restart(
    browser: Browser, tmp_path: Path
) -> None:
    options = StageOptions(report_dir=tmp_path, quick=True)
    result = run_trace_stage(options, failpoints=("forget_vote_on_restart",))
    assert result.verdict is Verdict.FALSE, result.describe()
    assert "DurableRestart" in result.summary, result.summary
    _check_diagram(Path(result.details["report"]), browser, tmp_path)


WINDOW = (1400, 1000)
VIOLATION_RED = bytes.fromhex("f7b2b8")  # diagram.css: the current violated row


def _check_diagram(report: Path, browser: Browser, tmp_path: Path) -> None:
    """The real run's traces drawn: members n1-n3 (not their 64-bit ids), the kill -9 and
    restart on the killed member's lifeline (the leader killed: any of n1-n3), messages
    delivered, the diagram ending at the broken rule;
    the page in Chromium (one tab: its DOM and a screenshot, kept in reports/tests/)."""
    diagram = diagram_from_traces([report])
    assert diagram.lifelines == ("n1", "n2", "n3") and diagram.invariant == "DurableRestart"
    assert diagram.violation_step == len(diagram.steps) - 1 >= 100
    restarted = [
        n for n in diagram.lifelines if f"{n} restarted (crashed before)" in diagram.steps[-1].notes
    ]
    assert len(restarted) == 1, diagram.steps[-1].notes
    assert sum(m.fate == "delivered" for m in diagram.messages) >= 50
    page = tmp_path / "trace.html"
    assert run(["diagram", str(report), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    shot = tmp_path / "trace.png"
    tab = browser.open(page, WINDOW)
    assert not tab.errors, tab.errors
    dom = Elements()
    dom.feed(tab.dom())
    tab.screenshot(shot)
    tab.close()
    body = next(attrs for tag, attrs in dom.all if tag == "body")
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    assert body["data-lifelines"] == "n1,n2,n3"
    assert body["data-step"] == body["data-violation-step"] == str(len(diagram.steps) - 1)
    violated = dom.classed("violated")
    assert len(violated) == 1 and violated[0]["id"] == f"row-{body['data-violation-step']}"
    assert int(body["data-messages"]) == len(diagram.messages)
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / "diagram_conform_trace_forget_vote.png")
    width, height, pixels = png_pixels(shot)
    assert (width, height) == WINDOW
    assert colour_counts(pixels).get(VIOLATION_RED, 0) > 300, "the violated row is not on screen"


PLAN = TracePlan(writers=1, writes_per_phase=10, kills=("leader", "follower"), snapshot_count=5)


@pytest.mark.parametrize(
    ("witnesses", "verdict", "why"),
    [
        ((("restarts", 2), ("leader commits", 40)), Verdict.TRUE, ""),
        ((("restarts", 1), ("leader commits", 40)), Verdict.UNKNOWN, "1 restarts"),
        ((("restarts", 2), ("leader commits", 3)), Verdict.UNKNOWN, "3 leader commits"),
    ],
)
def test_a_replay_that_checked_too_little_is_unknown(
    witnesses: tuple[tuple[str, int], ...], verdict: Verdict, why: str
) -> None:
    result = TraceResult(Verdict.TRUE, 100, ("n1", "n2", "n3"), 0, witnesses=witnesses)
    assert judge(result, PLAN) == (verdict, "the replay checked too little: " + why if why else "")
