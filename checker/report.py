"""The report folder of `etcdspec check`: result.json and a self-contained timeline.html.

Contract:
- `write_report(report, folder)` writes result.json (CheckReport.to_json) and
  timeline.html, and returns their paths.
- timeline.html needs nothing from the network: inline CSS, inline script, the data as
  inline JSON. Processes are rows, operations bars on a time axis (info operations run
  to the end of the axis); operations of the longest linearizable prefix are green,
  the failing operation red (element id `op-N`, reached by the "jump to the failing
  operation" link), the operations of its window orange; hovering a bar shows the
  operation and the model state after it (for the prefix; at most MAX_STATES states).
  Histories longer than MAX_OPS operations show the MAX_OPS around the failure.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from etcdspec.checker.check import CheckOptions, CheckReport
from etcdspec.checker.history import Operation
from etcdspec.checker.models import PreparedOp
from etcdspec.model.requests import LeaseRevokeRequest

MAX_OPS = 4000
MAX_STATES = 3000


def write_report(
    report: CheckReport, folder: Path | str, options: CheckOptions | None = None
) -> dict[str, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    result = folder / "result.json"
    result.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    timeline = folder / "timeline.html"
    timeline.write_text(render_timeline(report, options or CheckOptions(model=report.model)))
    return {"result": result, "timeline": timeline}


def _states_after(report: CheckReport, options: CheckOptions) -> dict[int, str]:
    """op id -> the model state after it, replaying the linearization (or the prefix)."""
    lin = report.linearizability
    if lin is None:
        return {}
    model = options.make_model()
    by_id: dict[int, Operation] = {op.id: op for op in (*report.history.operations, *lin.synthetic)}
    orders: list[tuple[int, ...]] = []
    failure = lin.failure
    if failure is not None:
        orders.append(failure.prefix)
    else:
        orders.extend(part.linearization for part in lin.partitions)
    states: dict[int, str] = {}
    for order in orders:
        state = model.init()
        for op_id in order:
            if len(states) >= MAX_STATES:
                return states
            op = by_id.get(op_id)
            if op is None:
                continue
            prepared: PreparedOp | None
            if op.f == "lease_expire":  # the etcd model's synthetic expiry: a revoke
                prepared = PreparedOp(op, (LeaseRevokeRequest(op.request["ID"]), None))
            else:
                prepared = model.prepare(op)
            if prepared is None:
                continue
            following = model.step(state, prepared)
            if not following:
                break
            state = following[0]
            states[op_id] = model.describe_state(state)
    return states


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def timeline_data(report: CheckReport, options: CheckOptions) -> dict[str, Any]:
    lin = report.linearizability
    failure = lin.failure if lin is not None else None
    prefix = set(failure.prefix) if failure is not None else set()
    if failure is None and lin is not None and lin.verdict.to_json() is True:
        prefix = set(lin.linearization())
    window = set(failure.window) if failure is not None else set()
    failing = failure.failing_op if failure is not None else None
    ops = list(report.history.operations)
    cut = ""
    if len(ops) > MAX_OPS:
        center = next((i for i, op in enumerate(ops) if op.id == failing), 0)
        low = max(0, min(center - MAX_OPS // 2, len(ops) - MAX_OPS))
        ops = ops[low : low + MAX_OPS]
        cut = f"showing operations {low}..{low + MAX_OPS - 1} of {len(report.history.operations)}"
    states = _states_after(report, options)
    end_time = max((e.time for e in report.history.events), default=1)
    processes = sorted({str(op.process) for op in ops}, key=lambda p: (len(p), p))
    rows = {p: i for i, p in enumerate(processes)}
    items = []
    for op in ops:
        items.append(
            {
                "id": op.id,
                "row": rows[str(op.process)],
                "process": str(op.process),
                "f": op.f,
                "type": op.type,
                "start": op.call_time,
                "end": op.return_time if op.return_time is not None else end_time,
                "request": _short(op.request),
                "response": _short(op.response),
                "class": "failing"
                if op.id == failing
                else "window"
                if op.id in window
                else "prefix"
                if op.id in prefix
                else op.type,
                "state": states.get(op.id, ""),
            }
        )
    return {
        "source": report.source,
        "model": report.model,
        "valid": report.verdict.to_json(),
        "verdict": report.verdict.describe(),
        "checks": [r.to_json() for r in report.results],
        "failing": failing,
        "failure": failure.to_json() if failure is not None else None,
        "processes": processes,
        "ops": items,
        "start": min((op.call_time for op in ops), default=0),
        "end": end_time,
        "cut": cut,
    }


_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 8px; }
table.checks { border-collapse: collapse; margin: 8px 0 12px; }
table.checks td, table.checks th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
.v-true { color: #17692b; } .v-false { color: #b00020; font-weight: bold; } .v-unknown { color: #8a6d00; }
#timeline { position: relative; overflow: auto; border: 1px solid #ccc; height: 70vh; }
.row-label { position: absolute; left: 0; width: 90px; font-size: 11px; color: #555;
  white-space: nowrap; overflow: hidden; }
.bar { position: absolute; height: 14px; border-radius: 2px; font-size: 10px; color: #fff;
  overflow: hidden; white-space: nowrap; cursor: default; opacity: .9; }
.bar.ok { background: #7a8ea8; } .bar.info { background: #b7a65a; } .bar.fail { background: #bbb; }
.bar.prefix { background: #3b9b57; } .bar.window { background: #e08a1e; }
.bar.failing { background: #d0021b; outline: 3px solid #000; z-index: 2; }
#tip { position: fixed; pointer-events: none; background: #fffbe6; border: 1px solid #999;
  padding: 6px; max-width: 640px; font: 12px monospace; white-space: pre-wrap; display: none; z-index: 5; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 6px; color: #fff; border-radius: 2px; }
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById('data').textContent);
  const checks = document.getElementById('checks');
  for (const c of data.checks) {
    const tr = document.createElement('tr');
    const v = c.valid === true ? 'true' : c.valid === false ? 'false' : 'unknown';
    for (const [text, cls] of [[c.name, ''], [v, 'v-' + v], [c.seconds.toFixed(3) + ' s', ''], [c.summary, '']]) {
      const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td);
    }
    checks.appendChild(tr);
  }
  const box = document.getElementById('timeline');
  const rowH = 18, left = 96, width = Math.max(900, box.clientWidth - left - 20);
  const span = Math.max(1, data.end - data.start);
  const x = t => left + (t - data.start) / span * width;
  data.processes.forEach((p, i) => {
    const label = document.createElement('div');
    label.className = 'row-label'; label.style.top = (i * rowH + 2) + 'px';
    label.textContent = 'process ' + p; box.appendChild(label);
  });
  const tip = document.getElementById('tip');
  for (const op of data.ops) {
    const bar = document.createElement('div');
    bar.className = 'bar ' + op.class;
    bar.id = 'op-' + op.id;
    bar.style.top = (op.row * rowH + 2) + 'px';
    bar.style.left = x(op.start) + 'px';
    bar.style.width = Math.max(3, x(op.end) - x(op.start)) + 'px';
    bar.textContent = op.f;
    const lines = ['op ' + op.id + '  process ' + op.process + '  ' + op.f + '  (' + op.type + ')',
      'request:  ' + op.request, 'response: ' + op.response];
    if (op.state) lines.push('model state after: ' + op.state);
    if (op.id === data.failing && data.failure) {
      lines.push('CANNOT BE LINEARIZED: ' + data.failure.reason);
      lines.push('model state at failure: ' + data.failure.state);
    }
    bar.addEventListener('mouseenter', () => { tip.textContent = lines.join('\\n'); tip.style.display = 'block'; });
    bar.addEventListener('mousemove', e => { tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 12) + 'px'; });
    bar.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    box.appendChild(bar);
  }
  const filler = document.createElement('div');
  filler.style.position = 'absolute'; filler.style.top = (data.processes.length * rowH + 4) + 'px';
  filler.style.width = (left + width + 10) + 'px'; filler.style.height = '1px';
  box.appendChild(filler);
  const jump = document.getElementById('jump');
  if (data.failing !== null && document.getElementById('op-' + data.failing)) {
    jump.href = '#op-' + data.failing;
    jump.textContent = 'jump to the failing operation (op ' + data.failing + ')';
    jump.addEventListener('click', e => {
      e.preventDefault();
      document.getElementById('op-' + data.failing).scrollIntoView({block: 'center', inline: 'center'});
    });
  } else {
    jump.remove();
  }
  document.body.dataset.rendered = String(data.ops.length);
})();
"""


def render_timeline(report: CheckReport, options: CheckOptions) -> str:
    data = timeline_data(report, options)
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    verdict_class = {"true": "v-true", "false": "v-false"}.get(report.verdict.value, "v-unknown")
    failure = report.linearizability.failure if report.linearizability else None
    failure_text = ""
    if failure is not None:
        failure_text = f'<p class="v-false">{html.escape(failure.describe())}</p>'

    cut = f"<p>{html.escape(data['cut'])}</p>" if data["cut"] else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>etcdspec check — {html.escape(report.source)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>etcdspec check: {html.escape(report.source)} (model {html.escape(report.model)}) —
<span class="{verdict_class}">{html.escape(report.verdict.describe())}</span></h1>
<table class="checks"><thead><tr><th>check</th><th>valid</th><th>time</th><th>summary</th></tr></thead>
<tbody id="checks"></tbody></table>
{failure_text}{cut}
<p class="legend"><span style="background:#3b9b57">linearizable prefix</span>
<span style="background:#d0021b">failing operation</span>
<span style="background:#e08a1e">concurrent window</span>
<span style="background:#7a8ea8">ok</span><span style="background:#b7a65a">info</span>
<span style="background:#bbb">fail</span> <a id="jump" href="#">jump</a></p>
<div id="timeline"></div>
<div id="tip"></div>
<script type="application/json" id="data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
