"""What the timeline page shows, as one JSON-able dict: operations, faults, the run's
context, the checks, the failure and the linearization up to it.

Contract:
- `timeline_data(report, options, faults, context, more_checks)` is pure: it reads the
  CheckReport (and replays the linearization on a fresh model for the states), never a
  file. Times stay on the history's clock (nanoseconds); `origin` is the history's
  first event, which the page counts from.
- Caps, each said on the page (`cut`): at most MAX_OPS operations drawn (those around
  the failing operation), at most MAX_LIST linearized operations listed (the last ones
  before the failure), model states text at most STATE_CHARS long.
- Operation classes (the bar's CSS class): `failing`, `window` (concurrent with the
  failing one), `prefix` (in the linearization found, or its longest prefix), else the
  operation's type (`ok`, `fail`, `info`).
- A fault is the faults.jsonl record (conform/faults.py) plus `members`: the member
  names it touched, read off its target ("m1", "m1-m2" for a cut between two, "all").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from etcdspec.checker.check import CheckOptions, CheckReport
from etcdspec.checker.history import Operation
from etcdspec.checker.models import CheckModel, PreparedOp
from etcdspec.checker.results import CheckResult
from etcdspec.model.requests import LeaseRevokeRequest
from etcdspec.verdict import Verdict

MAX_OPS = 4000
MAX_LIST = 2000  # linearized operations listed (and model states described)
STATE_CHARS = 600
VALUE_CHARS = 2000


def _short(value: Any, limit: int = VALUE_CHARS) -> str:
    """JSON on one line when it is short, else indented; at most `limit` characters."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > 90:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int = STATE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(op: Operation) -> str:
    """The short text on a bar: f and the key (or the register's value)."""
    request = op.request
    if isinstance(request, dict):
        key = request.get("key")
        if isinstance(key, str):
            return f"{op.f} {key}"
        if isinstance(key, dict):  # {"b64": ...}
            return f"{op.f} (bytes)"
        return op.f
    if request is None:
        return op.f
    return f"{op.f} {json.dumps(request, ensure_ascii=False)}"[:40]


def _prepare(model: CheckModel, op: Operation) -> PreparedOp | None:
    if op.f == "lease_expire":  # the etcd model's synthetic expiry: a revoke
        return PreparedOp(op, (LeaseRevokeRequest(op.request["ID"]), None))
    return model.prepare(op)


def _describe_op(model: CheckModel, prepared: PreparedOp | None, op: Operation) -> str:
    if prepared is None:
        return op.describe()
    try:
        text = model.describe_op(prepared)
    except Exception:  # a model that cannot describe a synthetic op: the history's text
        text = op.describe()
    prefix = f"op {op.id} "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _linearization(
    report: CheckReport, options: CheckOptions
) -> tuple[dict[str, Any], dict[int, tuple[int, str]]]:
    """The order to list (the failure's prefix, else the linearization found), replayed
    on the model: the entries listed and, per op id, (position, state after)."""
    lin = report.linearizability
    empty: dict[str, Any] = {"entries": [], "skipped": 0, "total": 0, "title": ""}
    if lin is None:
        return empty, {}
    failure = lin.failure
    if failure is not None:
        orders = [(failure.partition, failure.prefix)]
        where = f" of key {failure.partition}" if failure.partition else ""
        title = (
            f"The longest linearizable prefix{where}: {len(failure.prefix)} operations in "
            f"linearized order, then the operation that cannot be placed"
        )
    elif lin.verdict is Verdict.TRUE:
        orders = [(part.partition, part.linearization) for part in lin.partitions]
        title = f"The linearization found: {sum(len(o) for _, o in orders)} operations"
    else:
        return {**empty, "title": f"No linearization to list: {lin.reason}"}, {}
    model = options.make_model()
    by_id = {op.id: op for op in (*report.history.operations, *lin.synthetic)}
    synthetic = {op.id for op in lin.synthetic}
    total = sum(len(order) for _, order in orders)
    first_listed = max(0, total - MAX_LIST)
    entries: list[dict[str, Any]] = []
    places: dict[int, tuple[int, str]] = {}
    position = 0
    for partition, order in orders:
        state = model.init()
        previous = ""
        for op_id in order:
            position += 1
            op = by_id.get(op_id)
            prepared = _prepare(model, op) if op is not None else None
            text = ""
            if prepared is not None:
                following = model.step(state, prepared)
                if following:
                    state = following[0]
                    text = model.describe_state(state)
            if op is None or position <= first_listed:
                continue
            entries.append(
                {
                    "pos": position,
                    "id": op_id,
                    "process": str(op.process),
                    "f": op.f,
                    "partition": partition,
                    "synthetic": op_id in synthetic,
                    "text": _describe_op(model, prepared, op),
                    "state": _clip(text) if text != previous else "",
                }
            )
            places[op_id] = (position, _clip(text))
            previous = text
    return {"entries": entries, "skipped": first_listed, "total": total, "title": title}, places


def _members(record: Mapping[str, Any]) -> list[str]:
    target = str(record.get("target", ""))
    if record.get("fault") == "partition" and "-" in target and "://" not in target:
        return target.split("-")
    return [target] if target else []


def _fault_items(faults: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for record in faults:
        start = int(record.get("start", 0))
        items.append(
            {
                "index": int(record.get("index", len(items))),
                "fault": str(record.get("fault", "fault")),
                "target": str(record.get("target", "")),
                "detail": str(record.get("detail", "")),
                "start": start,
                "end": max(start, int(record.get("end", start))),
                "members": _members(record),
            }
        )
    return items


def _context(
    report: CheckReport, options: CheckOptions, context: Mapping[str, Any] | None
) -> list[list[str]]:
    """Label/value pairs: the run's (conformance) context first, then the check's."""
    rows: list[list[str]] = []
    for label, value in (context or {}).items():
        if isinstance(value, list | tuple):
            value = ", ".join(map(str, value)) or "none"
        rows.append([str(label), str(value)])
    history = report.history
    counts = {
        t: sum(1 for op in history.operations if op.type == t) for t in ("ok", "fail", "info")
    }
    memory = options.memory_bound_mb()
    budget = [
        f"timeout {options.timeout_s:g} s" if options.timeout_s is not None else "no timeout",
        f"memory {memory:g} MB" if memory is not None else "memory unbounded",
    ]
    rows += [
        ["history", report.source],
        [
            "recorded",
            f"{len(history.operations)} operations ({counts['ok']} ok, {counts['fail']} fail, "
            f"{counts['info']} info) by {len({op.process for op in history.operations})} "
            f"processes, {len(history.watch_events)} watch events",
        ],
        ["model", report.model + ("" if options.lease_expiry else " (no lease expiry)")],
        ["checker budget", ", ".join(budget)],
        ["checker seed", str(options.seed)],
        ["check took", f"{report.seconds:.3f} s"],
    ]
    return rows


def _shown_ops(report: CheckReport, failing: int | None) -> tuple[list[Operation], str]:
    ops = list(report.history.operations)
    if len(ops) <= MAX_OPS:
        return ops, ""
    center = next((i for i, op in enumerate(ops) if op.id == failing), 0)
    low = max(0, min(center - MAX_OPS // 2, len(ops) - MAX_OPS))
    where = "around the failing operation" if failing is not None else "from the start"
    cut = (
        f"the history has {len(ops)} operations; the timeline draws the {MAX_OPS} "
        f"{where} (operations {ops[low].id}..{ops[low + MAX_OPS - 1].id}), the other "
        f"{len(ops) - MAX_OPS} are in the history file"
    )
    return ops[low : low + MAX_OPS], cut


def timeline_data(
    report: CheckReport,
    options: CheckOptions,
    faults: Iterable[Mapping[str, Any]] = (),
    context: Mapping[str, Any] | None = None,
    more_checks: Sequence[CheckResult] = (),
) -> dict[str, Any]:
    lin = report.linearizability
    failure = lin.failure if lin is not None else None
    failing = failure.failing_op if failure is not None else None
    window = set(failure.window) if failure is not None else set()
    linearization, places = _linearization(report, options)
    prefix = set(failure.prefix) if failure is not None else set()
    if failure is None and lin is not None and lin.verdict is Verdict.TRUE:
        prefix = set(lin.linearization())
    ops, cut_ops = _shown_ops(report, failing)
    events = report.history.events
    origin = min((e.time for e in events), default=0)
    end_time = max((e.time for e in events), default=origin + 1)
    if cut_ops:  # the axis (and the open-ended info operations) end with what is drawn
        end_time = max(op.return_time or op.call_time for op in ops)
    processes = sorted({str(op.process) for op in ops}, key=lambda p: (len(p), p))
    rows = {p: i for i, p in enumerate(processes)}
    items: list[dict[str, Any]] = []
    for op in ops:
        place = places.get(op.id)
        items.append(
            {
                "id": op.id,
                "row": rows[str(op.process)],
                "process": str(op.process),
                "f": op.f,
                "label": _label(op),
                "type": op.type,
                "start": op.call_time,
                "end": op.return_time if op.return_time is not None else end_time,
                "open": op.return_time is None,
                "request": _short(op.request),
                "response": _short(op.response),
                "class": "failing"
                if op.id == failing
                else "window"
                if op.id in window
                else "prefix"
                if op.id in prefix
                else op.type,
                "pos": place[0] if place else None,
                "state": place[1] if place else "",
            }
        )
    window_ops = [op for op in items if op["id"] in window]
    cut = [cut_ops] if cut_ops else []
    if linearization["skipped"]:
        cut.append(
            f"the linearization list shows the last {len(linearization['entries'])} of "
            f"{linearization['total']} linearized operations"
        )
    checks = [*report.results, *more_checks]
    verdict = Verdict.merge_all([report.verdict, *(c.verdict for c in more_checks)])
    return {
        "source": report.source,
        "model": report.model,
        "valid": verdict.to_json(),
        "verdict": verdict.describe(),
        "context": _context(report, options, context),
        "checks": [c.to_json() for c in checks],
        "failing": failing,
        "failure": failure.to_json() if failure is not None else None,
        "failure_text": failure.describe() if failure is not None else "",
        "processes": processes,
        "ops": items,
        "faults": _fault_items(faults),
        "window": [min(op["start"] for op in window_ops), max(op["end"] for op in window_ops)]
        if window_ops
        else None,
        "linearization": linearization,
        "origin": origin,
        "start": min((op.call_time for op in ops), default=origin),
        "end": end_time,
        "cut": cut,
    }
