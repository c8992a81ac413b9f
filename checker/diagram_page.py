"""The message-sequence diagram page: one self-contained HTML file around a `Diagram`.

Contract: `render_diagram(diagram)` returns one HTML document that needs no network:
diagram.css and diagram.js (files of this package) are inlined and the diagram's
`to_json()` is an inline JSON script element (`</` escaped). The script draws the SVG
(lifelines, messages, notes, logs per step) and the step-by-step navigation (buttons,
the arrow keys, Home/End); when it has run to its end it sets `data-ready="1"` on the
body, and it keeps the current step in the body's `data-step` (see the script's
header). `write_diagram(diagram, path)` writes that page.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib import resources
from pathlib import Path

from etcdspec.checker.diagram import Diagram


@cache
def _asset(name: str) -> str:
    return resources.files("etcdspec.checker").joinpath(name).read_text(encoding="utf-8")


def render_diagram(diagram: Diagram) -> str:
    payload = json.dumps(diagram.to_json(), ensure_ascii=False, separators=(",", ":"))
    payload = payload.replace("</", "<\\/")
    script = _asset("diagram.js")
    if "</script" in script.lower():  # would end the inline element early
        raise ValueError("diagram.js must not contain '</script'")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(diagram.title)} — etcdspec diagram</title>
<style>{_asset("diagram.css")}</style></head>
<body data-ready="0">
<header><h1 id="title"></h1><p id="subtitle"></p><ul id="notes"></ul></header>
<nav id="nav" aria-label="steps">
  <button id="first" title="first step (Home)">|◀</button>
  <button id="prev" title="previous step (←)">◀</button>
  <span id="position"></span>
  <button id="next" title="next step (→)">▶</button>
  <button id="last" title="last step (End)">▶|</button>
  <button id="violation" title="the step where the invariant breaks (v)">violation</button>
  <span id="current-label"></span>
</nav>
<main>
  <div id="chart" tabindex="0" aria-label="message-sequence diagram"></div>
  <aside id="state"><h2>State after the step</h2><div id="state-body"></div></aside>
</main>
<footer id="legend"></footer>
<script type="application/json" id="data">{payload}</script>
<script>{script}</script>
</body></html>
"""


def write_diagram(diagram: Diagram, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_diagram(diagram), encoding="utf-8")
    return path
