"""timeline.html: the page around the data, with its CSS and script inlined.

Contract: `render_page(data)` takes report_data.timeline_data's dict and returns one
HTML document that needs no network: report_timeline.css and report_timeline.js (files
of this package, read with importlib.resources) are inlined, the data is an inline
JSON script element (`</` escaped). The script draws everything from that data; when it
has run to its end it sets `data-ready="1"` on the body (the headless test's sign that
there was no script error) and keeps the view's state in data attributes (see the
script's header).
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _asset(name: str) -> str:
    return resources.files("etcdspec.checker").joinpath(name).read_text(encoding="utf-8")


def render_page(data: dict[str, Any]) -> str:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    title = f"{data['verdict']} — etcdspec check {data['source']}"
    script = _asset("report_timeline.js")
    if "</script" in script.lower():  # would end the inline element early
        raise ValueError("report_timeline.js must not contain '</script'")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_asset("report_timeline.css")}</style></head>
<body data-ready="0">
<header id="head"></header>
<div id="notes"></div>
<section class="top">
  <div class="panel"><h2>Run</h2><dl id="context"></dl></div>
  <div class="panel"><h2>Checks</h2><table class="checks"><thead><tr><th>check</th>
  <th>verdict</th><th>time</th><th>summary</th></tr></thead><tbody id="checks"></tbody></table>
  </div>
</section>
<section id="failure" class="panel failure" hidden></section>
<section class="panel timeline-panel">
  <div class="toolbar" id="toolbar"></div>
  <div id="timeline" tabindex="0" aria-label="timeline of operations and faults"></div>
  <div class="legend" id="legend"></div>
  <div id="details" class="details" hidden></div>
</section>
<section class="panel" id="lin-panel"><h2 id="lin-title">Linearization</h2>
  <div class="lin-scroll" id="lin-scroll"><table class="lin"><thead><tr><th>#</th><th>op</th>
  <th>process</th><th>operation → response</th><th>model state after</th></tr></thead>
  <tbody id="linearization"></tbody></table></div>
</section>
<section class="panel" id="faults-panel"><h2>Faults</h2><div id="faults-list"></div></section>
<div id="tip" role="tooltip"></div>
<script type="application/json" id="data">{payload}</script>
<script>{script}</script>
</body></html>
"""
