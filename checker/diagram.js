/* The message-sequence diagram page's script (checker/diagram_page.py inlines it).
 *
 * Reads the diagram (checker/diagram.py, to_json format 1) from #data and draws one SVG:
 * a row per step (step 0 is the initial state), a lifeline per node (dashed while the
 * node is down; a cross where it crashes, a triangle where it restarts, a badge where
 * its role or term changes), messages as arrows from the sending step to the delivering
 * one (solid: delivered; ending in a cross: dropped; dashed to the bottom: in flight;
 * a short stub: a broadcast), and each node's log at each step in a column of its own
 * (one box per entry, coloured by term, committed ones outlined). The row of the
 * violated invariant is red and names it.
 * Navigation: the buttons, the arrow keys, Home/End, "v" for the violation, a click on
 * a row, or #step=N in the address. The current step is highlighted, later messages are
 * faded, and the side panel shows every node's state after it.
 * State kept in data attributes (the headless test reads them): body data-ready="1"
 * once drawn, data-step (current), data-steps, data-lifelines, data-messages,
 * data-violation-step; each message <g id="msg-N" data-fate data-from data-to>.
 */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var ROW = 30, TOP = 56, LABEL_W = 330, LANE = 125, BOX = 15, STUB = 34;
  var MAX_BOXES = 12, SKIP_W = 46;  // a longer log shows its last entries after "…N"
  var steps = data.steps, nodes = data.lifelines, messages = data.messages;
  var last = steps.length - 1;
  var violation = data.violation_step;
  var current = violation === null ? last : violation;
  var laneX = {};
  nodes.forEach(function (n, i) { laneX[n] = LABEL_W + 50 + i * LANE; });
  var lanesEnd = LABEL_W + 50 + Math.max(nodes.length - 1, 0) * LANE + 70;
  var logX = {}, x = lanesEnd;
  nodes.forEach(function (n) {
    var longest = 1;
    steps.forEach(function (s) { if (s.nodes[n]) { longest = Math.max(longest, s.nodes[n].log.length); } });
    logX[n] = x;
    var textual = steps.some(function (s) { return s.nodes[n] && s.nodes[n].log.length && !/^\d/.test(s.nodes[n].log[0]); });
    var boxes = Math.min(longest, MAX_BOXES) * (BOX + 2) + (longest > MAX_BOXES ? SKIP_W : 0);
    x += textual ? 330 : Math.max(64, boxes + 16);
  });
  var width = Math.max(x + 10, 700), height = TOP + (last + 2) * ROW + 20;

  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function rowY(s) { return TOP + s * ROW + ROW / 2; }
  function shorten(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }
  // A log as text, runs of equal entries counted: "1×25, 2, 2:+n4".
  function logText(log) {
    var parts = [], k = 0;
    while (k < log.length) {
      var j = k;
      while (j + 1 < log.length && log[j + 1] === log[k]) { j += 1; }
      parts.push(j > k ? log[k] + "×" + (j - k + 1) : log[k]);
      k = j + 1;
    }
    return parts.join(", ");
  }
  function termColour(term) { return "hsl(" + ((term * 67) % 360) + ",62%," + (term ? 72 : 88) + "%)"; }
  function entryTerm(entry) { var m = /^(\d+)/.exec(entry); return m ? parseInt(m[1], 10) : 0; }
  function roleShort(role) {
    return { leader: "L", candidate: "C", "pre-candidate": "PC", precandidate: "PC", follower: "F" }[role] || role;
  }

  var svg = el("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, id: "svg" });
  var defs = el("defs", {}, svg);
  [["arrow", "#1f5fa8"], ["arrow-drop", "#b0181e"], ["arrow-flight", "#8a8a8a"]].forEach(function (a) {
    var m = el("marker", { id: a[0], viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", fill: a[1] }, m);
  });

  // Rows: band, step number and label.
  var rows = el("g", { id: "rows" }, svg);
  steps.forEach(function (s) {
    var g = el("g", { id: "row-" + s.number, "class": "row" + (s.violation ? " violated" : ""), "data-step": s.number }, rows);
    el("rect", { x: 0, y: TOP + s.number * ROW, width: width, height: ROW, "class": "band" }, g);
    el("text", { x: 8, y: rowY(s.number) + 4, "class": "num" }, g, String(s.number));
    var label = s.number === 0 ? "initial state" : s.label;
    var t = el("text", { x: 42, y: rowY(s.number) + 4, "class": "label", id: "step-" + s.number }, g, shorten(label, 50));
    el("title", {}, t, label + (s.notes.length ? "\n" + s.notes.join("\n") : ""));
    if (s.violation) {
      el("text", { x: 42, y: rowY(s.number) + ROW + 4, "class": "violation-text", id: "violation-mark" }, g, "✗ " + s.violation + " violated after step " + s.number);
    }
    g.addEventListener("click", function () { go(s.number); });
  });

  // Header: node names above the lanes and the log columns.
  nodes.forEach(function (n) {
    el("text", { x: laneX[n], y: 30, "class": "node-name", "text-anchor": "middle", id: "lane-" + n }, svg, n);
    el("text", { x: logX[n], y: 30, "class": "log-head" }, svg, "log " + n);
  });

  // Lifelines: one segment per step, dashed while down; markers for crashes, restarts, roles.
  var lanes = el("g", { id: "lanes" }, svg);
  nodes.forEach(function (n) {
    steps.forEach(function (s) {
      var st = s.nodes[n];
      if (!st) { return; }
      var y0 = rowY(s.number) - ROW / 2, y1 = rowY(s.number) + ROW / 2;
      el("line", { x1: laneX[n], y1: y0, x2: laneX[n], y2: y1, "class": "lifeline" + (st.up ? "" : " down") }, lanes);
      var before = s.number ? steps[s.number - 1].nodes[n] : null;
      var y = rowY(s.number);
      if (before && before.up && !st.up) {
        el("text", { x: laneX[n], y: y + 5, "class": "crash", "text-anchor": "middle" }, lanes, "✕").appendChild(el("title", {}, null, n + " crashed"));
      } else if (before && !before.up && st.up) {
        el("text", { x: laneX[n], y: y + 5, "class": "restart", "text-anchor": "middle" }, lanes, "▲").appendChild(el("title", {}, null, n + " restarted"));
      }
      if (!before || before.role !== st.role || before.term !== st.term) {
        var badge = roleShort(st.role) + (st.term === null ? "" : " t" + st.term);
        var b = el("g", { "class": "badge role-" + st.role.replace(/[^a-z-]/g, "") }, lanes);
        el("rect", { x: laneX[n] + 6, y: y - 9, width: 8 + badge.length * 7, height: 16, rx: 4 }, b);
        el("text", { x: laneX[n] + 10, y: y + 3 }, b, badge);
      }
    });
  });

  // Actors: a dot where a node takes a step.
  steps.forEach(function (s) {
    if (s.actor && laneX[s.actor] !== undefined) {
      el("circle", { cx: laneX[s.actor], cy: rowY(s.number), r: 4.5, "class": "actor" }, lanes);
    }
  });

  // Messages.
  var arrows = el("g", { id: "messages" }, svg);
  var drawn = 0;
  messages.forEach(function (m, i) {
    if (laneX[m.from] === undefined) { return; }
    var g = el("g", { id: "msg-" + i, "class": "msg " + m.fate.replace(" ", "-"), "data-fate": m.fate, "data-from": m.from, "data-to": m.to === null ? "*" : m.to, "data-sent": m.sent }, arrows);
    var x1 = laneX[m.from], y1 = rowY(m.sent), x2, y2, marker = "arrow";
    var same = m.ended !== null && m.ended === m.sent;
    var stub = m.to === null || laneX[m.to] === undefined || m.fate === "in flight";
    if (stub) {
      var dir = m.to !== null && laneX[m.to] !== undefined && laneX[m.to] < x1 ? -1 : 1;
      x2 = x1 + dir * STUB; y2 = y1 + 7; marker = "arrow-flight";
    } else if (m.fate === "delivered") {
      x2 = laneX[m.to]; y2 = rowY(m.ended);
      if (same) {  // a request and its answer in one step: above and below the row's middle
        var lift = x2 > x1 ? -5 : 6; y1 += lift; y2 += lift;
      }
    } else if (m.fate === "dropped") {
      x2 = (x1 + laneX[m.to]) / 2; y2 = rowY(m.ended); marker = "arrow-drop";
    }
    var shrink = x2 > x1 ? -6 : 6;
    el("line", { x1: x1, y1: y1, x2: x2 + (m.fate === "delivered" && m.to !== null ? shrink : 0), y2: y2, "marker-end": "url(#" + marker + ")" }, g);
    if (m.fate === "dropped") {
      el("text", { x: x2, y: y2 + 5, "class": "drop-x", "text-anchor": "middle" }, g, "✕");
    }
    var text = m.label.replace(/^\S+→\S+ /, "");
    var lx = (x1 + x2) / 2, ly = same && x2 < x1 ? y2 + 11 : (y1 + y2) / 2 - 3;
    if (!stub) { el("text", { x: lx, y: ly, "class": "msg-label", "text-anchor": "middle" }, g, shorten(text, 22)); }
    el("title", {}, g, m.from + " → " + (m.to === null ? "all" : m.to) + ": " + m.label + " (" + m.fate + (m.ended === null ? "" : " at step " + m.ended) + ", sent at step " + m.sent + ")");
    drawn += 1;
  });

  // Logs per node per step.
  var logsG = el("g", { id: "logs" }, svg);
  nodes.forEach(function (n) {
    steps.forEach(function (s) {
      var st = s.nodes[n];
      if (!st) { return; }
      var before = s.number ? steps[s.number - 1].nodes[n] : null;
      var changed = before && before.log.join("|") !== st.log.join("|");
      var g = el("g", { "class": "log" + (changed ? " changed" : "") + (st.up ? "" : " down"), id: "log-" + n + "-" + s.number }, logsG);
      if (st.log.length && !/^\d/.test(st.log[0])) {  // not Raft entries (the store's keys): as text
        el("text", { x: logX[n], y: rowY(s.number) + 4, "class": "log-text" }, g, shorten(st.log.join("  "), 60));
        return;
      }
      var skip = Math.max(0, st.log.length - MAX_BOXES);
      if (skip) {
        el("text", { x: logX[n], y: rowY(s.number) + 4, "class": "log-skip" }, g, "…" + skip);
        el("title", {}, g.lastChild, n + ": " + skip + " earlier entries: " + logText(st.log.slice(0, skip)));
      }
      st.log.forEach(function (entry, k) {
        if (k < skip) { return; }
        var term = entryTerm(entry);
        var committed = st.commit !== null && k < st.commit;
        var bx = logX[n] + (skip ? SKIP_W : 0) + (k - skip) * (BOX + 2), by = rowY(s.number) - BOX / 2;
        el("rect", { x: bx, y: by, width: BOX, height: BOX, fill: termColour(term), "class": committed ? "entry committed" : "entry" }, g);
        el("text", { x: bx + BOX / 2, y: by + 12.5, "text-anchor": "middle", "class": "entry-term" }, g, String(term));
        el("title", {}, g.lastChild, n + " [" + (k + 1) + "] " + entry + (committed ? " (committed)" : ""));
      });
      if (!st.log.length) { el("text", { x: logX[n], y: rowY(s.number) + 4, "class": "empty-log" }, g, "·"); }
    });
  });

  var chart = document.getElementById("chart");
  chart.appendChild(svg);

  // Header text and notes.
  document.getElementById("title").textContent = data.title;
  document.getElementById("subtitle").textContent = data.source + " · " + last + " step(s) · " + nodes.length + " lifeline(s) · " + drawn + " message(s)" + (data.invariant ? " · violated: " + data.invariant : "");
  var notes = document.getElementById("notes");
  data.notes.forEach(function (n) { var li = document.createElement("li"); li.textContent = n; notes.appendChild(li); });
  document.getElementById("legend").textContent = "Arrows: solid = delivered, ending in ✕ = dropped, short grey = sent but never delivered (still in flight at the end) or a broadcast. ✕ on a lifeline = crash, ▲ = restart, dashed lifeline = down. Badges: role (L leader, C candidate, PC pre-candidate, F follower) and term where they change. Log boxes: one per entry, its term inside, coloured by term, outlined = committed; …N = N earlier entries not drawn (listed in the state table); TERM:+nX etc. = a configuration change entry. Keys: ← → step, Home/End, v = violation.";

  function stateTable(s) {
    var body = document.getElementById("state-body");
    body.textContent = "";
    var h = document.createElement("h3");
    h.textContent = "step " + s.number + ": " + (s.number === 0 ? "initial state" : s.label);
    body.appendChild(h);
    if (s.violation) {
      var p = document.createElement("p"); p.className = "violation-text"; p.textContent = "✗ " + s.violation + " violated"; body.appendChild(p);
    }
    s.notes.forEach(function (n) { var p = document.createElement("p"); p.className = "note"; p.textContent = n; body.appendChild(p); });
    var table = document.createElement("table");
    nodes.forEach(function (n) {
      var st = s.nodes[n]; if (!st) { return; }
      var tr = document.createElement("tr");
      var cells = [n, st.up ? st.role : "DOWN (" + st.role + ")", st.term === null ? "" : "term " + st.term, st.vote ? "vote " + st.vote : "", st.commit === null ? "" : "commit " + st.commit, "[" + logText(st.log) + "]"];
      cells.forEach(function (c) { var td = document.createElement("td"); td.textContent = c; tr.appendChild(td); });
      table.appendChild(tr);
    });
    Object.keys(s.raw).forEach(function (k) {
      var tr = document.createElement("tr");
      [k, s.raw[k]].forEach(function (c) { var td = document.createElement("td"); td.textContent = c; tr.appendChild(td); });
      table.appendChild(tr);
    });
    body.appendChild(table);
  }

  function go(step) {
    current = Math.max(0, Math.min(last, step));
    steps.forEach(function (s) {
      document.getElementById("row-" + s.number).classList.toggle("current", s.number === current);
    });
    messages.forEach(function (m, i) {
      var g = document.getElementById("msg-" + i);
      if (g) { g.classList.toggle("future", m.sent > current); }
    });
    document.getElementById("position").textContent = "step " + current + " / " + last;
    document.getElementById("current-label").textContent = current === 0 ? "initial state" : steps[current].label;
    stateTable(steps[current]);
    document.body.setAttribute("data-step", String(current));
    var row = document.getElementById("row-" + current);
    if (row && document.body.getAttribute("data-ready") === "1") {
      var y = TOP + current * ROW;
      if (y < chart.scrollTop || y + ROW > chart.scrollTop + chart.clientHeight) { chart.scrollTop = Math.max(0, y - chart.clientHeight / 2); }
    }
  }

  document.getElementById("first").addEventListener("click", function () { go(0); });
  document.getElementById("prev").addEventListener("click", function () { go(current - 1); });
  document.getElementById("next").addEventListener("click", function () { go(current + 1); });
  document.getElementById("last").addEventListener("click", function () { go(last); });
  var vb = document.getElementById("violation");
  if (violation === null) { vb.disabled = true; } else { vb.addEventListener("click", function () { go(violation); }); }
  document.addEventListener("keydown", function (e) {
    var keys = { ArrowRight: current + 1, ArrowDown: current + 1, ArrowLeft: current - 1, ArrowUp: current - 1, Home: 0, End: last, v: violation === null ? current : violation };
    if (Object.prototype.hasOwnProperty.call(keys, e.key)) { e.preventDefault(); go(keys[e.key]); }
  });
  var wanted = /step=(\d+)/.exec(window.location.hash);
  go(wanted ? parseInt(wanted[1], 10) : current);
  document.body.setAttribute("data-steps", String(last));
  document.body.setAttribute("data-lifelines", nodes.join(","));
  document.body.setAttribute("data-messages", String(drawn));
  document.body.setAttribute("data-violation-step", violation === null ? "" : String(violation));
  var opened = document.getElementById("row-" + current);
  if (opened) {  // the chart scrolls, not the page: the opening step in the middle of it
    var top = TOP + current * ROW - chart.clientHeight / 2;
    chart.scrollTop = Math.max(0, top);
    document.body.setAttribute("data-scrolled", String(chart.scrollTop));
  }
  document.body.setAttribute("data-ready", "1");
})();
