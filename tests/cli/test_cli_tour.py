"""The guided tour runs end to end: every command of docs/tour.md, in order, in a fresh
folder, gives the exit code and the output shape the tour promises; docs/tour.md is
what `etcdspec tour --markdown` prints; a step whose output lacks its shape fails."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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


def lanes() -> list[list[int]]:
    """The step numbers of the tour's lanes, each in the tour's order: its conform runs
    (mostly waiting on a cluster for a fixed duration), in two lanes, and every other
    step in a third. The lanes share no file: a conform run reads none, and no other
    step names a folder a conform run reports into."""
    conform = [n for n, step in enumerate(TOUR, start=1) if step.argv[0] == "conform"]
    others = [n for n in range(1, len(TOUR) + 1) if n not in conform]
    outputs = {value for n in others for value in _option_values(TOUR[n - 1], OUTPUTS)}
    reports = {value for n in conform for value in _option_values(TOUR[n - 1], ("--report",))}
    for n in conform:
        assert not outputs & set(TOUR[n - 1].argv), f"step {n} reads another lane's file"
    for n in others:
        named = [arg for arg in TOUR[n - 1].argv for folder in reports if folder in arg]
        assert not named, f"step {n} names a conform report: {named}"
    half = len(conform) // 2
    return [lane for lane in (others, conform[:half], conform[half:]) if lane]


OUTPUTS = ("--itf", "--diagram", "-o", "--report")


def _option_values(step: TourStep, options: tuple[str, ...]) -> list[str]:
    return [step.argv[i + 1] for i, arg in enumerate(step.argv[:-1]) if arg in options]


def test_the_tour_s_lanes_hold_every_step_once() -> None:
    steps = sorted(n for lane in lanes() for n in lane)
    assert steps == list(range(1, len(TOUR) + 1))
    for lane in lanes():
        assert lane == sorted(lane), "each lane keeps the tour's order"


@pytest.mark.timeout(900)
def test_the_tour_runs_end_to_end(tmp_path: Path) -> None:
    """Each step in order (later steps read the files earlier ones wrote); the conform
    runs, which share no file with the other steps, in two lanes of their own beside them."""
    planned = lanes()
    with ThreadPoolExecutor(len(planned)) as pool:
        ran = pool.map(lambda lane: [(n, *run_step(TOUR[n - 1], tmp_path)) for n in lane], planned)
        results = sorted(result for lane in ran for result in lane)
    assert [n for n, _, _ in results] == list(range(1, len(TOUR) + 1))
    for number, ok, output in results:
        assert ok, f"step {number} ({TOUR[number - 1].describe()}):\n{output[-3000:]}"
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
