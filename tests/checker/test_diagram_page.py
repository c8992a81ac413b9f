"""Counterexample diagrams as a reader sees them, in headless Chromium: for every bug of
the model's catalogue (`etcdspec diagram` of the ITF that `explore --bug NAME` writes;
`explore --diagram` draws the same page), for a BMC run of a spec
mutation (`etcdspec prove --bmc --itf`, then `etcdspec diagram`) and for a failing
trace validation (`etcdspec diagram TRACES`) and for an ITF that Quint wrote, the page's script runs to its end, draws a
lifeline per node, an arrow per message, the rows of every step and the violated
invariant at its step; navigation by #step=N; the screenshot (reports/tests/) shows the
violation's red. Without Chromium these tests fail: it is part of the test setup."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from browser import Browser, Tab
from catalogue_runs import found
from chromium import ARTEFACTS, Elements, colour_counts, png_pixels
from trace_scenarios import figure8_run

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.model.bugs import CATALOGUE

WINDOW = (1400, 1000)
VIOLATION_RED = bytes.fromhex("f7b2b8")  # diagram.css: the current violated row


def _open(browser: Browser, page: Path, fragment: str = "") -> tuple[Tab, Elements, dict[str, str]]:
    tab = browser.open(page, WINDOW, fragment)
    assert not tab.errors, tab.errors
    dom = Elements()
    dom.feed(tab.dom())
    body = next(attrs for tag, attrs in dom.all if tag == "body")
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    return tab, dom, body


def _check_page(
    browser: Browser,
    page: Path,
    tmp_path: Path,
    itf: dict[str, object] | None,
    shot_name: str,
    navigate: bool = False,
) -> None:
    """What every diagram page shows, and its screenshot kept as an artefact; with
    `navigate`, the page opened at another step too."""
    tab, dom, body = _open(browser, page)
    try:
        steps = int(body["data-steps"])
        if itf is not None:
            assert steps == len(itf["states"]) - 1  # type: ignore[arg-type]
        assert steps >= 1
        assert body["data-violation-step"] == str(steps) or page.name.startswith("trace")
        assert body["data-step"] == body["data-violation-step"]  # opens at the violation
        lifelines = body["data-lifelines"].split(",")
        assert len(lifelines) >= 2 and all(f"lane-{n}" in dom.by_id for n in lifelines)
        rows = [a for _, a in dom.all if a.get("id", "").startswith("row-")]
        assert len(rows) == steps + 1
        violated = dom.classed("violated")
        assert len(violated) == 1 and violated[0]["id"] == f"row-{body['data-violation-step']}"
        assert "violation-mark" in dom.by_id
        messages = [a for _, a in dom.all if a.get("id", "").startswith("msg-")]
        assert len(messages) == int(body["data-messages"]) >= 1
        assert {m["data-from"] for m in messages} <= set(lifelines)
        _screenshot(tab, tmp_path, shot_name)
    finally:
        tab.close()
    if navigate:
        _navigate(browser, page, messages)


def _navigate(browser: Browser, page: Path, messages: list[dict[str, str]]) -> None:
    """#step=0 opens at the initial state, with every message still to come faded."""
    tab, dom0, body0 = _open(browser, page, "#step=0")
    tab.close()
    assert body0["data-step"] == "0"
    assert "current" in dom0.by_id["row-0"]["class"].split()
    faded = [a for a in dom0.classed("msg") if "future" in a["class"].split()]
    assert len(faded) == len([m for m in messages if m["data-sent"] != "0"])


def _screenshot(tab: Tab, tmp_path: Path, shot_name: str) -> None:
    shot = tmp_path / "diagram.png"
    tab.screenshot(shot)
    assert shot.is_file(), "Chromium wrote no screenshot"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / shot_name)
    width, height, pixels = png_pixels(shot)
    assert (width, height) == WINDOW
    counts = colour_counts(pixels)
    assert len(counts) > 50 and max(counts.values()) < 0.9 * width * height
    assert counts.get(VIOLATION_RED, 0) > 300, "the violated row's red is not on screen"


@pytest.mark.parametrize("bug", [b.name for b in CATALOGUE])
def test_every_catalogue_bug_is_drawn(bug: str, browser: Browser, tmp_path: Path) -> None:
    """`etcdspec diagram FILE.itf.json` on the counterexample `explore --bug NAME` finds
    (the session's one run of the bug's finder: tests/support/catalogue_runs.py)."""
    counterexample = found(bug).counterexample
    assert counterexample is not None, f"{bug}: its finder found nothing"
    itf, page = tmp_path / "run.itf.json", tmp_path / f"{bug}.html"
    counterexample.to_itf().write(itf)
    assert run(["diagram", str(itf), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    _check_page(browser, page, tmp_path, json.loads(itf.read_text()), f"diagram_{bug}.png")


def test_explore_draws_the_page_that_diagram_draws_from_its_itf(tmp_path: Path) -> None:
    itf, page = tmp_path / "run.itf.json", tmp_path / "explored.html"
    argv = ["explore", "--bug", "commit_without_quorum", "--itf", str(itf), "--diagram", str(page)]
    assert run([*argv, "--quiet"]) == ExitCode.VIOLATION
    again = tmp_path / "again.html"
    assert run(["diagram", str(itf), "-o", str(again), "--quiet"]) == ExitCode.HOLDS
    assert again.read_text() == page.read_text()


def test_a_bmc_counterexample_is_drawn(browser: Browser, tmp_path: Path) -> None:
    itf, page = tmp_path / "bmc.itf.json", tmp_path / "bmc.html"
    sizes = "node=3,term=2,index=1,value=1,quorum=2"
    argv = ["prove", "raft", "--mutation", "two_votes", "--bmc", "5", "--size", sizes]
    assert run([*argv, "--itf", str(itf)]) == ExitCode.VIOLATION
    assert run(["diagram", str(itf), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    _check_page(
        browser, page, tmp_path, json.loads(itf.read_text()), "diagram_bmc_two_votes.png", True
    )


def test_a_failing_trace_validation_is_drawn(browser: Browser, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    figure8_run(bug=True).write(traces)
    page = tmp_path / "trace.html"
    assert run(["diagram", str(traces), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    _check_page(browser, page, tmp_path, None, "diagram_trace_figure8.png", True)


def test_a_trace_that_quint_wrote_is_drawn_in_the_same_viewer(
    browser: Browser, tmp_path: Path
) -> None:
    itf = Path(__file__).parent / "data" / "quint_votes.itf.json"
    page = tmp_path / "quint.html"
    argv = ["diagram", str(itf), "-o", str(page), "--invariant", "oneLeaderPerTerm", "--quiet"]
    assert run(argv) == ExitCode.HOLDS
    _check_page(browser, page, tmp_path, json.loads(itf.read_text()), "diagram_quint_votes.png")
