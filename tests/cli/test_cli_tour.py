"""The guided tour runs end to end: every command of docs/tour.md, in order, in a fresh
folder, gives the exit code and the output shape the tour promises; docs/tour.md is
what `etcdspec tour --markdown` prints; a step whose output lacks its shape fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.cli.main import run
from etcdspec.cli.tour import TOUR, TourStep, markdown, run_step
from etcdspec.exitcodes import ExitCode

DOC = Path(__file__).resolve().parents[2] / "docs" / "tour.md"


def test_docs_tour_is_the_tour_s_own_text() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "docs/tour.md is stale: etcdspec tour --markdown > docs/tour.md"
    )
    for step in TOUR:
        assert f"$ {step.command()}" in DOC.read_text(encoding="utf-8")


@pytest.mark.timeout(900)
def test_the_tour_runs_end_to_end(tmp_path: Path) -> None:
    """Each step in order (later steps read the files earlier ones wrote)."""
    for number, step in enumerate(TOUR, start=1):
        ok, output = run_step(step, tmp_path)
        assert ok, f"step {number} ({step.describe()}):\n{output[-3000:]}"
    for drawn in ("bmc.html", "figure8.html", "lease.html", "watch.html"):
        assert (tmp_path / drawn).is_file(), drawn
    assert (tmp_path / "cti.itf.json").is_file()


def test_a_step_whose_output_lacks_its_shape_fails(tmp_path: Path) -> None:
    wrong_shape = TourStep("t", "", ("tour", "--show", "raft:commit"), 0, (r"action elect\(",))
    ok, output = run_step(wrong_shape, tmp_path)
    assert not ok and "no match for" in output
    wrong_exit = TourStep("t", "", ("tour", "--show", "raft:commit"), 1, ())
    ok, output = run_step(wrong_exit, tmp_path)
    assert not ok and "exit 0, expected 1" in output


def test_tour_verb_lists_and_refuses_a_step_out_of_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["tour", "--list"]) == ExitCode.HOLDS
    assert len(capsys.readouterr().out.splitlines()) == len(TOUR)
    assert run(["tour", "--step", str(len(TOUR) + 1)]) == ExitCode.USAGE
    assert run(["tour", "--show", "raft:nosuchaction"]) == ExitCode.USAGE
    assert "its actions: " in capsys.readouterr().err
