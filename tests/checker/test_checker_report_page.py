"""The report page (timeline.html) of a violating history with faults, as a reader sees
it: rendered in headless Chromium, the DOM after its script ran holds the failing
operation marked and centred, its concurrent window, the faults on their members'
lanes, the linearization up to the failure in order, the run's context; the
screenshot (a test artefact: the pytest tmp dir and reports/tests/) shows the failing
bar's red and the faults' colours. Without Chromium: what the page's data holds."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from browser import Browser
from chromium import ARTEFACTS, Elements, colour_counts, png_pixels

from etcdspec.checker.check import CheckOptions, CheckReport, check_history, load_history
from etcdspec.checker.history import HistoryEvent, write_history
from etcdspec.checker.report import render_timeline, write_report
from etcdspec.checker.report_data import timeline_data
from etcdspec.checker.simulate import simulate_etcd

WINDOW = (1400, 1500)
SCALE_NS = 40_000  # the simulator's clock ticks, stretched to a run of about 14 s


def _violating_events() -> list[HistoryEvent]:
    """A linearizable etcd history of 240 operations with one range, three fifths in,
    made to read a value nobody wrote: the search fails there, after a long prefix."""
    events = simulate_etcd(7, ops=240, processes=6, info_rate=0.05)
    reads = [
        i for i, e in enumerate(events) if e.type == "ok" and e.f == "range" and e.value["kvs"]
    ]
    i = reads[len(reads) * 3 // 5]
    value = dict(events[i].value)
    value["kvs"] = [{**value["kvs"][0], "value": "never-written"}, *value["kvs"][1:]]
    events[i] = replace(events[i], value=value)
    return [replace(e, time=e.time * SCALE_NS) for e in events]


@dataclass(frozen=True)
class Run:
    folder: Path
    report: CheckReport
    options: CheckOptions
    faults: list[dict[str, object]]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A run folder as `etcdspec conform` leaves it: history.jsonl and faults.jsonl."""
    folder = tmp_path_factory.mktemp("run")
    write_history(_violating_events(), folder / "history.jsonl")
    options = CheckOptions(model="etcd", timeout_s=30.0, seed=5)
    report = check_history(load_history(folder / "history.jsonl"), options)
    failure = report.linearizability.failure if report.linearizability else None
    assert failure is not None and len(failure.prefix) > 100  # the page has much to show
    at = next(op.call_time for op in report.history.operations if op.id == failure.failing_op)
    second = 1_000_000_000
    faults: list[dict[str, object]] = [
        {"fault": "partition", "target": "m1-m3", "detail": "leader cut from m3 only, healed"},
        {"fault": "kill", "target": "m2", "detail": "kill -9 of the leader, restarted"},
        {"fault": "pause", "target": "m3", "detail": "SIGSTOP of the follower, SIGCONT"},
        {"fault": "compact", "target": "http://127.0.0.1:2379", "detail": "at revision 40: ok"},
    ]
    spans = [(-4.0, -2.5), (-0.6, 0.9), (2.0, 3.2), (4.0, 4.05)]
    for index, (fault, (start, end)) in enumerate(zip(faults, spans, strict=True)):
        fault.update(index=index, start=at + int(start * second), end=at + int(end * second))
    with (folder / "faults.jsonl").open("w", encoding="utf-8") as handle:
        for fault in faults:
            handle.write(json.dumps(fault) + "\n")
    return Run(folder, report, options, faults)


# ------------------------------------------------------------------------- the data


def test_page_data_reads_the_faults_beside_the_history(run: Run) -> None:
    page = render_timeline(run.report, run.options)
    data = json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert [f["fault"] for f in data["faults"]] == ["partition", "kill", "pause", "compact"]
    assert data["faults"][0]["members"] == ["m1", "m3"]
    assert data["faults"][3]["members"] == ["http://127.0.0.1:2379"]
    context = dict(data["context"])
    assert context["checker seed"] == "5" and "timeout 30 s" in context["checker budget"]
    assert context["history"] == str(run.folder / "history.jsonl")


def test_page_reads_a_conformance_run_s_context_beside_the_history(
    run: Run, tmp_path: Path
) -> None:
    shutil.copyfile(run.folder / "history.jsonl", tmp_path / "history.jsonl")
    conform = {"target": "reference cluster of 3", "seed": 9, "duration_s": 20.0, "failpoints": []}
    hashkv = {"name": "HashKV", "valid": False, "summary": "members disagree", "seconds": 0.1}
    result = {"valid": False, "checks": [hashkv], "conform": conform}
    (tmp_path / "result.json").write_text(json.dumps(result))
    report = check_history(load_history(tmp_path / "history.jsonl"), run.options)
    page = write_report(report, tmp_path, run.options)["timeline"].read_text()
    data = json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    context = dict(data["context"])
    assert context["target"] == "reference cluster of 3" and context["seed"] == "9"
    assert context["duration"] == "20 s" and context["failpoints"] == "none"
    assert [c["name"] for c in data["checks"]][-1] == "HashKV"
    assert data["checks"][-1]["valid"] is False and data["faults"] == []
    # result.json, written after the page, is the checker's own.
    assert json.loads((tmp_path / "result.json").read_text()) == report.to_json()


def test_page_data_lists_the_linearization_in_order_with_states(run: Run) -> None:
    data = timeline_data(run.report, run.options, run.faults, {"target": "reference"})
    failure = run.report.linearizability.failure  # type: ignore[union-attr]
    assert failure is not None
    entries = data["linearization"]["entries"]
    assert [e["id"] for e in entries] == list(failure.prefix)
    assert [e["pos"] for e in entries] == list(range(1, len(entries) + 1))
    assert entries[0]["state"].startswith("revision ")
    unchanged = [e for e in entries if e["f"] == "range"]
    assert unchanged and all(e["state"] == "" for e in unchanged)  # reads change nothing
    assert data["context"][0] == ["target", "reference"]
    by_id = {op["id"]: op for op in data["ops"]}
    assert by_id[failure.failing_op]["class"] == "failing"
    assert {by_id[i]["class"] for i in failure.window if i != failure.failing_op} <= {"window"}


def test_page_says_what_it_cut(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from etcdspec.checker import report_data

    monkeypatch.setattr(report_data, "MAX_OPS", 50)
    monkeypatch.setattr(report_data, "MAX_LIST", 20)
    data = timeline_data(run.report, run.options)
    failing = data["failing"]
    assert len(data["ops"]) == 50 and failing in {op["id"] for op in data["ops"]}
    # The axis ends with what is drawn, not with the history.
    assert data["end"] == max(op["end"] for op in data["ops"])
    assert data["end"] < run.report.history.events[-1].time
    assert len(data["linearization"]["entries"]) == 20
    assert data["linearization"]["skipped"] == data["linearization"]["total"] - 20
    assert any("draws the 50 around the failing operation" in c for c in data["cut"])
    assert any("last 20 of" in c for c in data["cut"])


def test_result_json_is_the_checker_s_alone(run: Run, tmp_path: Path) -> None:
    paths = write_report(run.report, tmp_path, run.options, faults=run.faults, context={"seed": 1})
    assert json.loads(paths["result"].read_text()) == run.report.to_json()


def test_page_is_self_contained(run: Run, tmp_path: Path) -> None:
    page = write_report(run.report, tmp_path, run.options)["timeline"].read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2


# ------------------------------------------------------------------------- in Chromium


def test_report_page_in_headless_chromium(run: Run, browser: Browser, tmp_path: Path) -> None:
    failure = run.report.linearizability.failure  # type: ignore[union-attr]
    assert failure is not None
    # As `etcdspec check run/history.jsonl --report DIR` does: the faults are found beside.
    page = write_report(run.report, tmp_path / "report", run.options)["timeline"]
    tab = browser.open(page, WINDOW)
    assert not tab.errors, tab.errors
    shown = tab.dom()
    dom = Elements()
    dom.feed(shown)
    body = next(attrs for tag, attrs in dom.all if tag == "body")
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    assert body.get("data-rendered") == str(len(run.report.history.operations))
    # The failing operation: marked, and in the middle of the first view.
    bar = dom.by_id[f"op-{failure.failing_op}"]
    assert bar["class"].startswith("bar failing") and bar["data-mark"] == "failing"
    assert body.get("data-failing-centred") == "1"
    timeline = dom.by_id["timeline"]
    view = (int(timeline["data-view-start"]), int(timeline["data-view-end"]))
    for op_id in failure.window:
        window_bar = dom.by_id[f"op-{op_id}"]
        if op_id != failure.failing_op:
            assert window_bar["data-mark"] == "window"
        assert view[0] <= int(window_bar["data-start"]) and int(window_bar["data-end"]) <= view[1]
    assert dom.by_id["jump"]["href"] == f"#op-{failure.failing_op}"
    assert dom.classed("window-band")
    # The faults: one bar per member lane they touched, and a band over the rows.
    assert body.get("data-faults") == "4"
    for index, kind in enumerate(("partition", "kill", "pause", "compact")):
        assert f"fault-{kind}" in dom.by_id[f"fault-{index}"]["class"].split()
    partition = [a for a in dom.classed("fault") if a.get("data-fault") == "0"]
    assert len(partition) == 2 and partition[0]["data-members"] == "m1,m3"
    assert len(dom.classed("fault-shade")) == 4
    # The linearization up to the failure, in order, then the failing operation.
    rows = [a for tag, a in dom.all if tag == "tr" and a.get("id", "").startswith("lin-")]
    assert [int(a["data-op"]) for a in rows] == [*failure.prefix, failure.failing_op]
    assert "failing" in rows[-1]["class"].split()
    assert dom.by_id["linearization"]["data-count"] == str(len(failure.prefix))
    # The run's context and the failure's panel were drawn.
    assert f"<dd>{run.folder / 'history.jsonl'}</dd>" in shown
    assert "cannot be linearized" in shown and "faults around it" in shown

    shot = tmp_path / "timeline.png"
    tab.screenshot(shot)
    tab.close()
    assert shot.is_file(), "Chromium wrote no screenshot"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / "checker_report_timeline.png")
    width, height, pixels = png_pixels(shot)
    assert (width, height) == WINDOW
    counts = colour_counts(pixels)
    assert len(counts) > 50, "the screenshot is nearly one colour"
    assert max(counts.values()) < 0.9 * width * height
    # The failing bar's red and the kill fault's purple (CSS --failing, --kill) are seen.
    assert counts.get(bytes.fromhex("d0021b"), 0) > 200
    assert counts.get(bytes.fromhex("6d2c91"), 0) > 100
