"""The report folder of `etcdspec check`: result.json and a self-contained timeline.html.

Contract:
- `write_report(report, folder, options, faults=, context=, more_checks=)` writes
  result.json (CheckReport.to_json, nothing added) and timeline.html, and returns their
  paths. `faults` are faults.jsonl records (conform/faults.py: index, fault, target,
  detail, start, end on the history's clock) or a path to such a file; when None, a
  faults.jsonl beside the history is read if there is one. `context` is the run's
  label -> value pairs (a conformance run's target, failpoints, seed, ...); when None
  and the history sits beside a conformance run's result.json, its "conform" block
  and HashKV check are read from there (before result.json is written, so a report
  into the run's own folder keeps them). `more_checks` are shown with the checks
  (the conformance run's HashKV) but not written to result.json.
- timeline.html needs nothing from the network: inline CSS, inline script, the data as
  inline JSON (report_data.timeline_data; the page is report_page.render_page). What it
  shows and the caps it says it applied are in those modules' docstrings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from etcdspec.checker.check import CheckOptions, CheckReport
from etcdspec.checker.report_data import MAX_LIST, MAX_OPS, timeline_data
from etcdspec.checker.report_page import render_page
from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

__all__ = ["MAX_LIST", "MAX_OPS", "read_faults", "render_timeline", "write_report"]

Faults = Iterable[Mapping[str, Any]] | Path | str


def read_faults(path: Path | str) -> list[dict[str, Any]]:
    """The records of a faults.jsonl file (blank or unreadable lines skipped: the page is
    a view, the history is what is judged)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "start" in record:
            records.append(record)
    return records


def _beside(report: CheckReport, name: str) -> Path | None:
    """A file of that name in the history's folder, if the history is a file."""
    source = Path(report.source)
    if not source.is_file():
        return None
    candidate = source.parent / name
    return candidate if candidate.is_file() else None


def _run_context(report: CheckReport) -> tuple[dict[str, Any] | None, list[CheckResult]]:
    """The conformance run's context and HashKV from a result.json beside the history."""
    path = _beside(report, "result.json")
    if path is None:
        return None, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None, []
    conform = data.get("conform") if isinstance(data, dict) else None
    if not isinstance(conform, dict):
        return None, []
    context = {
        label: conform[key]
        for label, key in (
            ("target", "target"),
            ("workload", "workload"),
            ("seed", "seed"),
            ("duration", "duration_s"),
            ("faults asked for", "faults_requested"),
            ("faults skipped", "faults_skipped"),
            ("failpoints", "failpoints"),
        )
        if key in conform
    }
    if isinstance(context.get("duration"), int | float):
        context["duration"] = f"{context['duration']:g} s"
    checks = []
    for check in data.get("checks", []):
        if isinstance(check, dict) and check.get("name") == "HashKV":
            valid = check.get("valid")
            verdict = Verdict.TRUE if valid is True else Verdict.FALSE if valid is False else None
            checks.append(
                CheckResult(
                    "HashKV",
                    verdict or Verdict.UNKNOWN,
                    str(check.get("summary", "")),
                    float(check.get("seconds", 0.0)),
                    tuple(map(str, check.get("details", []))),
                )
            )
    return context, checks


def render_timeline(
    report: CheckReport,
    options: CheckOptions,
    faults: Faults | None = None,
    context: Mapping[str, Any] | None = None,
    more_checks: Sequence[CheckResult] = (),
) -> str:
    if faults is None:
        found = _beside(report, "faults.jsonl")
        faults = read_faults(found) if found is not None else []
    elif isinstance(faults, Path | str):
        faults = read_faults(faults)
    if context is None:
        context, found_checks = _run_context(report)
        more_checks = (*more_checks, *found_checks)
    data = timeline_data(report, options, faults, context, more_checks)
    return render_page(data)


def write_report(
    report: CheckReport,
    folder: Path | str,
    options: CheckOptions | None = None,
    faults: Faults | None = None,
    context: Mapping[str, Any] | None = None,
    more_checks: Sequence[CheckResult] = (),
) -> dict[str, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # The page first: it may read a conformance run's result.json that this overwrites.
    page = render_timeline(
        report, options or CheckOptions(model=report.model), faults, context, more_checks
    )
    result = folder / "result.json"
    result.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    timeline = folder / "timeline.html"
    timeline.write_text(page, encoding="utf-8")
    return {"result": result, "timeline": timeline}
