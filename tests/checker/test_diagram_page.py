"""Counterexample diagrams as a reader sees them, in headless Chromium: for every bug of
the model's catalogue (`etcdspec explore --bug NAME --diagram`), for a BMC run of a spec
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
from chromium import ARTEFACTS, CHROMIUM, Elements, chromium, colour_counts, png_pixels
from trace_scenarios import figure8_run

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.model.bugs import CATALOGUE

WINDOW = (1400, 1000)
VIOLATION_RED = bytes.fromhex("f7b2b8")  # diagram.css: the current violated row


def _dom(page: Path, profile: Path, fragment: str = "") -> tuple[Elements, dict[str, str]]:
    if CHROMIUM is None:
        pytest.fail("this test needs Debian's chromium: apt-get install -y chromium (.ci/run does)")
    done = chromium(page, profile, "--dump-dom", window=WINDOW, fragment=fragment)
    errors = [
        line
        for line in done.stderr.splitlines()
        if "CONSOLE" in line and ("Error" in line or "ERROR" in line)
    ]
    assert not errors, errors
    dom = Elements()
    dom.feed(done.stdout)
    body = next(attrs for tag, attrs in dom.all if tag == "body")
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    return dom, body


def _check_page(
    page: Path,
    tmp_path: Path,
    itf: dict[str, object] | None,
    shot_name: str,
    navigate: bool = False,
) -> None:
    """What every diagram page shows, and its screenshot kept as an artefact; with
    `navigate`, the page opened at another step too."""
    dom, body = _dom(page, tmp_path / "profile")
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
    if navigate:
        _navigate(page, tmp_path, messages)
    _screenshot(page, tmp_path, shot_name)


def _navigate(page: Path, tmp_path: Path, messages: list[dict[str, str]]) -> None:
    """#step=0 opens at the initial state, with every message still to come faded."""
    dom0, body0 = _dom(page, tmp_path / "profile", "#step=0")
    assert body0["data-step"] == "0"
    assert "current" in dom0.by_id["row-0"]["class"].split()
    faded = [a for a in dom0.classed("msg") if "future" in a["class"].split()]
    assert len(faded) == len([m for m in messages if m["data-sent"] != "0"])


def _screenshot(page: Path, tmp_path: Path, shot_name: str) -> None:
    shot = tmp_path / "diagram.png"
    chromium(page, tmp_path / "profile", f"--screenshot={shot}", window=WINDOW)
    assert shot.is_file(), "Chromium wrote no screenshot"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / shot_name)
    width, height, pixels = png_pixels(shot)
    assert (width, height) == WINDOW
    counts = colour_counts(pixels)
    assert len(counts) > 50 and max(counts.values()) < 0.9 * width * height
    assert counts.get(VIOLATION_RED, 0) > 300, "the violated row's red is not on screen"


@pytest.mark.parametrize("bug", [b.name for b in CATALOGUE])
def test_every_catalogue_bug_is_drawn(bug: str, tmp_path: Path) -> None:
    itf, page = tmp_path / "run.itf.json", tmp_path / f"{bug}.html"
    code = run(["explore", "--bug", bug, "--itf", str(itf), "--diagram", str(page), "--quiet"])
    assert code == ExitCode.VIOLATION
    document = json.loads(itf.read_text())
    _check_page(page, tmp_path, document, f"diagram_{bug}.png")
    # `etcdspec diagram FILE.itf.json` draws the very same page from the written ITF.
    again = tmp_path / "again.html"
    assert run(["diagram", str(itf), "-o", str(again), "--quiet"]) == ExitCode.HOLDS
    assert again.read_text() == page.read_text()


def test_a_bmc_counterexample_is_drawn(tmp_path: Path) -> None:
    itf, page = tmp_path / "bmc.itf.json", tmp_path / "bmc.html"
    sizes = "node=3,term=2,index=1,value=1,quorum=2"
    argv = ["prove", "raft", "--mutation", "two_votes", "--bmc", "5", "--size", sizes]
    assert run([*argv, "--itf", str(itf)]) == ExitCode.VIOLATION
    assert run(["diagram", str(itf), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    _check_page(page, tmp_path, json.loads(itf.read_text()), "diagram_bmc_two_votes.png", True)


def test_a_failing_trace_validation_is_drawn(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    figure8_run(bug=True).write(traces)
    page = tmp_path / "trace.html"
    assert run(["diagram", str(traces), "-o", str(page), "--quiet"]) == ExitCode.HOLDS
    _check_page(page, tmp_path, None, "diagram_trace_figure8.png", True)


def test_a_trace_that_quint_wrote_is_drawn_in_the_same_viewer(tmp_path: Path) -> None:
    itf = Path(__file__).parent / "data" / "quint_votes.itf.json"
    page = tmp_path / "quint.html"
    argv = ["diagram", str(itf), "-o", str(page), "--invariant", "oneLeaderPerTerm", "--quiet"]
    assert run(argv) == ExitCode.HOLDS
    _check_page(page, tmp_path, json.loads(itf.read_text()), "diagram_quint_votes.png")
