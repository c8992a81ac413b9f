// The timeline page of `etcdspec check --report` (checker/report_page.py inlines this).
// Draws from the inline JSON (checker/report_data.py): the run's context, the checks,
// the failure, a zoomable timeline (processes as rows, operations as bars, faults as
// lanes per member and as bands over the rows), the linearization list and the faults.
// State it keeps in the DOM, for people and for the headless test:
//   body[data-ready="1"]           the script ran to its end
//   body[data-rendered=N]          operations drawn
//   body[data-failing-centred]     "1" when the failing bar sits in the middle of the view
//   #timeline[data-view-start|end] the view, on the history's clock (ns)
//   .bar[data-start|end]           each operation's span; #op-N the bar of op N
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('data').textContent);
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const verdictName = (v) => (v === true ? 'true' : v === false ? 'false' : 'unknown');
  const verdictText = (v) => (v === true ? 'holds' : v === false ? 'VIOLATED' : 'unknown');

  // ------------------------------------------------------------------ time formats
  const origin = data.origin;
  function fmtDur(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(a >= 1e11 ? 4 : 3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toPrecision(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toPrecision(3) + ' µs';
    return Math.round(ns) + ' ns';
  }
  function fmtAt(t) {
    const rel = (t - origin) / 1e9;
    return (rel < 0 ? '−' : '+') + Math.abs(rel).toFixed(6) + ' s';
  }
  function tickLabel(t, step) {
    const rel = t - origin;
    let unit = 1e9, name = 's';
    if (step < 1e3) { unit = 1; name = 'ns'; } else if (step < 1e6) { unit = 1e3; name = 'µs'; } else if (step < 1e9) { unit = 1e6; name = 'ms'; }
    const digits = Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9));
    return (rel / unit).toFixed(digits) + ' ' + name;
  }

  // ------------------------------------------------------------------ header, context, checks
  const head = $('head');
  const badge = el('span', 'badge v-' + verdictName(data.valid), data.verdict);
  const h1 = el('h1');
  h1.append(badge, ' etcdspec check ', el('code', '', data.source));
  head.append(h1);
  const sub = el('p', 'sub', 'model ' + data.model + ' · ' + data.ops.length + ' operations drawn · ' +
    data.faults.length + ' faults · ' + data.processes.length + ' processes');
  head.append(sub);
  const notes = $('notes');
  for (const cut of data.cut) notes.append(el('p', 'cut', '✂ ' + cut));

  const dl = $('context');
  for (const [label, value] of data.context) {
    dl.append(el('dt', '', label), el('dd', '', value));
  }
  // Checks that say the same (e.g. every watch guarantee unknown for want of a
  // linearization) share one row.
  const groups = [];
  for (const c of data.checks) {
    const last = groups[groups.length - 1];
    const alike = last && last.valid === c.valid && last.summary === c.summary && !(c.details && c.details.length) &&
      !(last.details && last.details.length);
    if (alike) { last.names.push(c.name); last.seconds += c.seconds || 0; } else groups.push({ ...c, names: [c.name], seconds: c.seconds || 0 });
  }
  const checks = $('checks');
  for (const c of groups) {
    const tr = el('tr', 'check-' + verdictName(c.valid));
    tr.dataset.checks = c.names.join(',');
    tr.append(el('td', 'name', c.names.join(', ')), el('td', 'v-' + verdictName(c.valid), verdictText(c.valid)),
      el('td', 'num', c.seconds.toFixed(3) + ' s'));
    const td = el('td', 'summary', c.summary);
    if (c.details && c.details.length && c.name !== 'Linearizable') {
      const more = el('details');
      more.append(el('summary', '', c.details.length + ' detail(s)'));
      for (const d of c.details.slice(0, 20)) more.append(el('div', 'detail', d));
      td.append(more);
    }
    tr.append(td);
    checks.append(tr);
  }

  // ------------------------------------------------------------------ operations by id
  const opsById = new Map(data.ops.map((op) => [op.id, op]));
  const failingOp = data.failing !== null ? opsById.get(data.failing) : undefined;
  const durations = data.ops.filter((op) => !op.open).map((op) => op.end - op.start).sort((a, b) => a - b);
  const medianDur = durations.length ? Math.max(1, durations[durations.length >> 1]) : 1;

  // ------------------------------------------------------------------ failure panel
  function opLink(id) {
    const a = el('a', 'oplink', 'op ' + id);
    a.href = '#op-' + id;
    a.addEventListener('click', (e) => { e.preventDefault(); focusOp(id, true); });
    return a;
  }
  if (data.failure) {
    const f = data.failure;
    const box = $('failure');
    box.hidden = false;
    const title = el('h2', 'v-false');
    title.append('✗ ', opLink(f.failing_op), ' cannot be linearized' + (f.partition ? ' (key ' + f.partition + ')' : '') +
      ' after the longest linearizable prefix of ' + f.prefix.length + ' operations');
    box.append(title);
    const grid = el('dl', 'kv');
    grid.append(el('dt', '', 'why'), el('dd', 'mono', f.reason));
    grid.append(el('dt', '', 'model state there'), el('dd', 'mono', f.state));
    const win = el('dd');
    f.window.forEach((id, i) => { if (i) win.append(', '); win.append(opLink(id)); });
    grid.append(el('dt', '', 'concurrent window'), win);
    if (failingOp) {
      grid.append(el('dt', '', 'failing operation'),
        el('dd', 'mono', 'process ' + failingOp.process + ' · ' + failingOp.f + ' · invoked ' + fmtAt(failingOp.start) +
          (failingOp.open ? ' · no completion (info)' : ' · completed ' + fmtAt(failingOp.end))));
      grid.append(el('dt', '', 'faults around it'), el('dd', '', faultsAround(failingOp)));
    } else if (data.failing !== null) {
      grid.append(el('dt', '', 'note'), el('dd', '', 'the failing operation is outside the operations drawn'));
    }
    box.append(grid);
  }

  function faultName(f) { return f.fault + ' ' + (f.members.join('–') || f.target); }
  function faultsAround(op) {
    if (!data.faults.length) return 'no faults recorded';
    const a = op.start, b = op.open ? data.end : op.end;
    const during = data.faults.filter((f) => f.start <= b && f.end >= a);
    const before = data.faults.filter((f) => f.end < a).pop();
    const after = data.faults.find((f) => f.start > b);
    const parts = [];
    parts.push(during.length ? 'during it: ' + during.map(faultName).join(', ') : 'none during it');
    if (before) parts.push('last before: ' + faultName(before) + ', healed ' + fmtDur(a - before.end) + ' earlier');
    else parts.push('none before it');
    if (after) parts.push('next: ' + faultName(after) + ', ' + fmtDur(after.start - b) + ' after it completed');
    return parts.join(' · ');
  }

  // ------------------------------------------------------------------ timeline skeleton
  const LABEL_W = 118, ROW_H = 20, LANE_H = 20;
  const timeline = $('timeline');
  const axis = el('div', 'axis');
  const axisLabel = el('div', 'gutter axis-label', 'since start');
  const axisPlot = el('div', 'plot axis-plot');
  axis.append(axisLabel, axisPlot);

  // Fault lanes: one per member named, then one for the cluster as a whole.
  const memberNames = [];
  const laneOf = (name) => (/^[A-Za-z][\w.]*$/.test(name) && name !== 'all' ? name : 'cluster');
  for (const fault of data.faults) {
    for (const m of fault.members.length ? fault.members : ['cluster']) {
      const lane = laneOf(m);
      if (lane !== 'cluster' && !memberNames.includes(lane)) memberNames.push(lane);
    }
  }
  memberNames.sort();
  const lanes = [...memberNames];
  if (data.faults.some((f) => (f.members.length ? f.members : ['cluster']).some((m) => laneOf(m) === 'cluster'))) lanes.push('cluster');
  const faultBox = el('div', 'faultlanes');
  const faultGutter = el('div', 'gutter');
  const faultPlot = el('div', 'plot');
  faultBox.append(faultGutter, faultPlot);
  faultBox.style.height = Math.max(1, lanes.length) * LANE_H + 'px';
  if (!lanes.length) {
    faultGutter.classList.add('axis-label');
    faultGutter.textContent = 'faults';
    faultPlot.append(el('div', 'nofaults', 'no faults recorded for this history (no faults.jsonl beside it)'));
  }
  lanes.forEach((name, i) => {
    const label = el('div', 'lane-label', name === 'cluster' ? 'cluster' : 'member ' + name);
    label.style.top = i * LANE_H + 'px';
    faultGutter.append(label);
  });

  const rowsBox = el('div', 'rows');
  const rowsInner = el('div', 'rows-inner');
  const rowsGutter = el('div', 'gutter');
  const rowsPlot = el('div', 'plot');
  rowsInner.style.height = data.processes.length * ROW_H + 'px';
  rowsInner.append(rowsGutter, rowsPlot);
  rowsBox.append(rowsInner);
  timeline.append(axis, faultBox, rowsBox);
  data.processes.forEach((p, i) => {
    const label = el('div', 'row-label' + (failingOp && failingOp.row === i ? ' failing-row' : ''), 'process ' + p);
    label.style.top = i * ROW_H + 'px';
    rowsGutter.append(label);
    if (i % 2 === 1) {
      const stripe = el('div', 'stripe');
      stripe.style.top = i * ROW_H + 'px';
      rowsPlot.append(stripe);
    }
  });
  const grid = el('div', 'grid');
  rowsPlot.append(grid);

  // Everything placed on the time axis: {node, start, end, min}.
  const placed = [];
  const place = (node, start, end, min, labelled) => {
    placed.push({ node, start, end, min: min || 0, labelled: !!labelled, narrow: false });
    return node;
  };

  // The concurrent window of the failure: its closed operations' span, and the failing op.
  let windowSpan = null;
  if (data.failure) {
    let lo = Infinity, hi = -Infinity;
    for (const id of data.failure.window) {
      const op = opsById.get(id);
      if (!op) continue;
      lo = Math.min(lo, op.start);
      hi = Math.max(hi, op.open ? op.start + medianDur : op.end);
    }
    if (lo < hi) {
      windowSpan = [lo, hi];
      const band = place(el('div', 'window-band'), lo, hi, 2);
      band.title = 'the failing operation and the operations concurrent with it';
      rowsPlot.append(band);
      const mark = place(el('div', 'window-mark', 'concurrent window'), lo, hi, 2);
      axisPlot.append(mark);
    }
  }

  // Faults: a bar in each lane it touched and a band over the processes' rows.
  for (const fault of data.faults) {
    const kind = 'fault-' + fault.fault.replace(/[^\w-]/g, '');
    const members = fault.members.length ? fault.members : ['cluster'];
    const laneNames = [...new Set(members.map(laneOf))];
    laneNames.forEach((lane, k) => {
      const bar = el('div', 'fault ' + kind, fault.fault + ' ' + members.join('–'));
      if (k === 0) bar.id = 'fault-' + fault.index;
      bar.dataset.fault = fault.index;
      bar.dataset.members = members.join(',');
      bar.style.top = lanes.indexOf(lane) * LANE_H + 3 + 'px';
      place(bar, fault.start, fault.end, 4, true);
      faultPlot.append(bar);
      hover(bar, () => faultTip(fault));
      bar.addEventListener('click', () => { if (!dragMoved) focusSpan(fault.start, fault.end); });
    });
    const shade = place(el('div', 'fault-shade ' + kind), fault.start, fault.end, 2);
    rowsPlot.append(shade);
  }

  // Operations.
  const bars = new Map();
  for (const op of data.ops) {
    const bar = el('div', 'bar ' + op.class + (op.open ? ' open' : ''), (op.id === data.failing ? '✗ ' : '') + op.label);
    bar.id = 'op-' + op.id;
    bar.dataset.start = op.start;
    bar.dataset.end = op.end;
    if (op.id === data.failing) bar.dataset.mark = 'failing';
    else if (op.class === 'window') bar.dataset.mark = 'window';
    bar.style.top = op.row * ROW_H + 3 + 'px';
    place(bar, op.start, op.end, 3, true);
    rowsPlot.append(bar);
    bars.set(op.id, bar);
    hover(bar, () => opTip(op));
    bar.addEventListener('click', () => { if (!dragMoved) select(op.id); });
  }

  // ------------------------------------------------------------------ view and layout
  let full0 = data.start, full1 = Math.max(data.end, data.start + 1);
  if (!data.cut.length) {
    for (const f of data.faults) { full0 = Math.min(full0, f.start); full1 = Math.max(full1, f.end); }
  }
  const pad = (full1 - full0) * 0.01;
  full0 -= pad; full1 += pad;
  const view = { t0: full0, t1: full1 };
  const MIN_SPAN = 50;
  const plotWidth = () => Math.max(50, rowsPlot.clientWidth || timeline.clientWidth - LABEL_W);
  function setView(t0, t1) {
    let span = Math.min(Math.max(t1 - t0, MIN_SPAN), (full1 - full0) * 1.5);
    const mid = (t0 + t1) / 2;
    t0 = mid - span / 2;
    const lo = full0 - span * 0.5, hi = full1 + span * 0.5;
    t0 = Math.min(Math.max(t0, lo), hi - span);
    view.t0 = t0; view.t1 = t0 + span;
    schedule();
  }
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; layout(); });
  }
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  const readout = el('span', 'readout');
  function layout() {
    const W = plotWidth();
    const span = view.t1 - view.t0;
    const k = W / span;
    for (const item of placed) {
      let l = (item.start - view.t0) * k, r = (item.end - view.t0) * k;
      if (r < -10 || l > W + 10) { item.node.style.display = 'none'; continue; }
      item.node.style.display = '';
      l = Math.max(l, -10); r = Math.min(r, W + 10);
      item.node.style.left = l + 'px';
      item.node.style.width = Math.max(item.min, r - l) + 'px';
      const narrow = r - l < 26;  // too small for its label: no stray letters
      if (item.labelled && narrow !== item.narrow) { item.narrow = narrow; item.node.classList.toggle('narrow', narrow); }
    }
    const step = niceStep(span / Math.max(2, W / 110));
    const first = Math.ceil((view.t0 - origin) / step) * step + origin;
    axisPlot.querySelectorAll('.tick').forEach((n) => n.remove());
    grid.textContent = '';
    for (let t = first; t <= view.t1; t += step) {
      const x = (t - view.t0) * k;
      const tick = el('div', 'tick', tickLabel(t, step));
      tick.style.left = x + 'px';
      axisPlot.append(tick);
      const line = el('div', 'gridline');
      line.style.left = x + 'px';
      grid.append(line);
    }
    readout.textContent = fmtAt(view.t0) + ' … ' + fmtAt(view.t1) + '  (' + fmtDur(span) + ' shown)';
    timeline.dataset.viewStart = String(Math.round(view.t0));
    timeline.dataset.viewEnd = String(Math.round(view.t1));
  }
  const timeAt = (clientX) => {
    const rect = rowsPlot.getBoundingClientRect();
    return view.t0 + (clientX - rect.left) / plotWidth() * (view.t1 - view.t0);
  };
  function zoom(factor, at) {
    const t = at === undefined ? (view.t0 + view.t1) / 2 : at;
    setView(t - (t - view.t0) * factor, t + (view.t1 - t) * factor);
  }
  function pan(fraction) {
    const d = (view.t1 - view.t0) * fraction;
    setView(view.t0 + d, view.t1 + d);
  }
  function focusSpan(a, b) {
    const half = Math.max((b - a) * 0.8, medianDur * 2);
    const mid = (a + b) / 2;
    setView(mid - half, mid + half);
  }
  function scrollRowIntoView(row) {
    const top = row * ROW_H - rowsBox.clientHeight / 2 + ROW_H / 2;
    rowsBox.scrollTop = Math.max(0, top);
  }
  function focusOp(id, flash) {
    const op = opsById.get(id);
    if (!op) return;
    const end = op.open ? op.start + medianDur : op.end;
    focusSpan(op.start, end);
    scrollRowIntoView(op.row);
    select(id);
    if (flash) timeline.scrollIntoView({ block: 'nearest' });
  }
  function focusFailure() {
    if (!failingOp) return;
    const c = (failingOp.start + (failingOp.open ? failingOp.start + medianDur : failingOp.end)) / 2;
    let half = Math.max(medianDur * 3, (failingOp.open ? medianDur : failingOp.end - failingOp.start) * 0.9);
    if (windowSpan) half = Math.max(half, (c - windowSpan[0]) * 1.25, (windowSpan[1] - c) * 1.25);
    setView(c - half, c + half);
    scrollRowIntoView(failingOp.row);
  }

  // Wheel: zoom about the cursor; shift+wheel or a sideways wheel: pan.
  timeline.addEventListener('wheel', (e) => {
    e.preventDefault();
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      pan(((e.shiftKey ? e.deltaY : 0) + e.deltaX) * unit / plotWidth());
    } else {
      zoom(Math.exp(e.deltaY * unit * 0.0015), timeAt(e.clientX));
    }
  }, { passive: false });
  // Drag: pan in time (and scroll the rows up and down).
  let drag = null, dragMoved = false;
  timeline.addEventListener('pointerdown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, t0: view.t0, t1: view.t1, top: rowsBox.scrollTop };
    dragMoved = false;
  });
  window.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!dragMoved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!dragMoved) timeline.classList.add('dragging');
    dragMoved = true;
    hideTip();
    const dt = -dx / plotWidth() * (drag.t1 - drag.t0);
    setView(drag.t0 + dt, drag.t1 + dt);
    rowsBox.scrollTop = drag.top - dy;
  });
  window.addEventListener('pointerup', () => {
    drag = null;
    timeline.classList.remove('dragging');
    setTimeout(() => { dragMoved = false; }, 0);
  });
  // Keys: + − zoom, ← → pan, 0 the whole run, F the failing operation, Esc closes.
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const tag = (e.target && e.target.tagName) || '';
    if (tag === 'INPUT' || tag === 'TEXTAREA') return;
    const keys = {
      '+': () => zoom(0.6), '=': () => zoom(0.6), '-': () => zoom(1 / 0.6), '_': () => zoom(1 / 0.6),
      ArrowLeft: () => pan(-0.2), ArrowRight: () => pan(0.2), h: () => pan(-0.2), l: () => pan(0.2),
      '0': () => setView(full0, full1), Home: () => setView(full0, full1),
      f: () => focusFailure(), F: () => focusFailure(),
      Escape: () => { hideTip(); unselect(); },
    };
    const action = keys[e.key];
    if (action) { e.preventDefault(); action(); }
  });

  // ------------------------------------------------------------------ toolbar and legend
  const toolbar = $('toolbar');
  const button = (text, title, action) => {
    const b = el('button', '', text);
    b.type = 'button'; b.title = title;
    b.addEventListener('click', action);
    toolbar.append(b);
    return b;
  };
  button('−', 'zoom out (−, or the wheel)', () => zoom(1 / 0.6));
  button('+', 'zoom in (+, or the wheel)', () => zoom(0.6));
  button('◀', 'earlier (←, or drag)', () => pan(-0.2));
  button('▶', 'later (→, or drag)', () => pan(0.2));
  button('whole run', 'the whole time axis (0)', () => setView(full0, full1));
  const jump = el('a', 'jump', 'failing operation');
  jump.id = 'jump';
  if (failingOp) {
    jump.href = '#op-' + data.failing;
    jump.textContent = '✗ failing operation (op ' + data.failing + ')';
    jump.title = 'centre the view on the failing operation (F)';
    jump.addEventListener('click', (e) => { e.preventDefault(); focusFailure(); select(data.failing); });
    toolbar.append(jump);
  }
  toolbar.append(readout);
  toolbar.append(el('span', 'help', 'wheel or +/− zoom · drag, shift+wheel or ←/→ pan · 0 whole run · F failing op · click an operation to pin it'));

  const legend = $('legend');
  const chip = (cls, text) => { const c = el('span', 'chip'); c.append(el('i', cls), text); legend.append(c); };
  chip('bar prefix', data.failure ? 'linearizable prefix' : 'linearized');
  if (data.failure) { chip('bar failing', 'failing operation'); chip('bar window', 'concurrent with it'); }
  chip('bar ok', 'ok, not reached'); chip('bar info', 'info (outcome unknown)'); chip('bar fail', 'fail');
  for (const kind of [...new Set(data.faults.map((f) => f.fault))]) chip('fault fault-' + kind.replace(/[^\w-]/g, ''), kind);

  // ------------------------------------------------------------------ tooltips and selection
  const tip = $('tip');
  function hover(node, content) {
    node.addEventListener('mouseenter', (e) => { if (drag && dragMoved) return; tip.textContent = ''; tip.append(content()); tip.style.display = 'block'; moveTip(e); });
    node.addEventListener('mousemove', moveTip);
    node.addEventListener('mouseleave', hideTip);
  }
  function moveTip(e) {
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = e.clientX + 14, y = e.clientY + 14;
    if (x + w > window.innerWidth - 8) x = Math.max(8, e.clientX - w - 14);
    if (y + h > window.innerHeight - 8) y = Math.max(8, e.clientY - h - 14);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }
  function kvList(pairs) {
    const d = el('dl', 'kv');
    for (const [k, v, cls] of pairs) d.append(el('dt', '', k), el('dd', cls || '', v));
    return d;
  }
  function opTip(op) {
    const frag = document.createDocumentFragment();
    const state = { failing: 'failing — cannot be linearized', window: 'concurrent with the failing operation',
      prefix: data.failure ? 'in the linearizable prefix' : 'linearized', ok: 'ok', info: 'info', fail: 'fail' }[op.class] || op.class;
    frag.append(el('div', 'tip-title', 'op ' + op.id + ' · process ' + op.process + ' · ' + op.f + ' → ' + op.type));
    const pairs = [
      ['invoked', fmtAt(op.start) + '   (t = ' + op.start + ' ns)'],
      ['completed', op.open ? 'never (info: it may take effect any time after its invoke)' : fmtAt(op.end) + '   (t = ' + op.end + ' ns)'],
    ];
    if (!op.open) pairs.push(['took', fmtDur(op.end - op.start)]);
    pairs.push(['verdict', state, op.class === 'failing' ? 'v-false' : '']);
    if (op.pos) pairs.push(['linearized', '#' + op.pos + ' of ' + data.linearization.total]);
    frag.append(kvList(pairs));
    const io = el('div', 'io');
    for (const [name, text] of [['request', op.request], ['response', op.type === 'info' ? '(none: info)' : op.response]]) {
      const box = el('div');
      box.append(el('div', 'io-name', name), el('pre', 'mono', text));
      io.append(box);
    }
    frag.append(io);
    const after = [];
    if (op.state) after.push(['state after', op.state, 'mono']);
    if (op.id === data.failing && data.failure) {
      after.push(['why', data.failure.reason, 'mono v-false'], ['state there', data.failure.state, 'mono']);
    }
    if (after.length) frag.append(kvList(after));
    return frag;
  }
  function faultTip(fault) {
    const frag = document.createDocumentFragment();
    frag.append(el('div', 'tip-title', 'fault ' + fault.index + ' · ' + fault.fault + ' · ' + (fault.members.join(', ') || fault.target)));
    frag.append(kvList([
      ['what', fault.detail], ['target', fault.target],
      ['from', fmtAt(fault.start)], ['to', fmtAt(fault.end)], ['lasted', fmtDur(fault.end - fault.start)],
    ]));
    return frag;
  }
  const details = $('details');
  let selected = null;
  function unselect() {
    if (selected !== null) {
      const bar = bars.get(selected); if (bar) bar.classList.remove('selected');
      const row = $('lin-' + selected); if (row) row.classList.remove('selected');
    }
    selected = null;
    details.hidden = true;
  }
  function select(id) {
    unselect();
    const op = opsById.get(id);
    if (!op) return;
    selected = id;
    bars.get(id).classList.add('selected');
    details.hidden = false;
    details.textContent = '';
    const close = el('button', 'close', '×'); close.type = 'button'; close.title = 'close (Esc)';
    close.addEventListener('click', unselect);
    details.append(close, opTip(op));
    const row = $('lin-' + id);
    if (row) {
      row.classList.add('selected');
      const box = $('lin-scroll');
      box.scrollTop = row.offsetTop - box.clientHeight / 2;
    }
  }

  // ------------------------------------------------------------------ linearization list
  const lin = data.linearization;
  $('lin-title').textContent = lin.title || 'Linearization';
  const body = $('linearization');
  if (lin.skipped) {
    const tr = el('tr', 'skipped');
    const td = el('td', '', '… ' + lin.skipped + ' earlier linearized operations not listed');
    td.colSpan = 5; tr.append(td); body.append(tr);
  }
  const multi = new Set(lin.entries.map((e) => e.partition)).size > 1;
  for (const entry of lin.entries) {
    const tr = el('tr', entry.synthetic ? 'synthetic' : '');
    tr.id = 'lin-' + entry.id;
    tr.dataset.op = entry.id;
    const opCell = el('td', 'num');
    opCell.append(opsById.has(entry.id) ? opLink(entry.id) : el('span', '', 'op ' + entry.id));
    tr.append(el('td', 'num', entry.pos), opCell,
      el('td', '', entry.synthetic ? '(model)' : entry.process),
      el('td', 'mono', (multi && entry.partition ? '[' + entry.partition + '] ' : '') + (entry.synthetic ? 'synthetic: ' : '') + entry.text),
      el('td', 'mono state' + (entry.state ? '' : ' same'), entry.state || '(unchanged)'));
    tr.addEventListener('mouseenter', () => { const b = bars.get(entry.id); if (b) b.classList.add('hl'); });
    tr.addEventListener('mouseleave', () => { const b = bars.get(entry.id); if (b) b.classList.remove('hl'); });
    body.append(tr);
  }
  if (data.failure) {
    const f = data.failure;
    const tr = el('tr', 'failing');
    tr.id = 'lin-' + f.failing_op;
    tr.dataset.op = f.failing_op;
    const opCell = el('td', 'num'); opCell.append(opLink(f.failing_op));
    tr.append(el('td', 'num', '✗'), opCell, el('td', '', failingOp ? failingOp.process : ''),
      el('td', 'mono', 'cannot be placed: ' + f.reason), el('td', 'mono state', f.state));
    body.append(tr);
  }
  if (!lin.entries.length && !data.failure) {
    const tr = el('tr'); const td = el('td', '', 'nothing to list'); td.colSpan = 5; tr.append(td); body.append(tr);
  }
  body.dataset.count = String(lin.entries.length);

  // ------------------------------------------------------------------ faults list
  const faultsList = $('faults-list');
  if (!data.faults.length) {
    faultsList.append(el('p', 'muted', 'No faults recorded: a plain history, or a run without faults (a conformance run writes faults.jsonl beside its history.jsonl).'));
  } else {
    const table = el('table', 'faults');
    const headRow = el('tr');
    for (const h of ['#', 'fault', 'members', 'from', 'to', 'lasted', 'what happened']) headRow.append(el('th', '', h));
    table.append(headRow);
    for (const f of data.faults) {
      const tr = el('tr');
      const kind = el('td'); kind.append(el('i', 'swatch fault fault-' + f.fault.replace(/[^\w-]/g, '')), f.fault);
      tr.append(el('td', 'num', f.index), kind, el('td', '', f.members.join(', ') || f.target),
        el('td', 'num', fmtAt(f.start)), el('td', 'num', fmtAt(f.end)), el('td', 'num', fmtDur(f.end - f.start)), el('td', '', f.detail));
      tr.addEventListener('click', () => { focusSpan(f.start, f.end); timeline.scrollIntoView({ block: 'nearest' }); });
      table.append(tr);
    }
    faultsList.append(table);
  }

  // ------------------------------------------------------------------ first view
  if (failingOp) focusFailure(); else setView(full0, full1);
  layout();
  if (failingOp) {
    select(data.failing);
    const bar = bars.get(data.failing).getBoundingClientRect();
    const plot = rowsPlot.getBoundingClientRect();
    const mid = (bar.left + bar.right) / 2, centre = plot.left + plot.width / 2;
    const rows = rowsBox.getBoundingClientRect();
    const visible = bar.top >= rows.top && bar.bottom <= rows.bottom;
    document.body.dataset.failingCentred = Math.abs(mid - centre) <= plot.width * 0.1 && visible ? '1' : '0';
  }
  window.addEventListener('resize', schedule);
  document.body.dataset.rendered = String(data.ops.length);
  document.body.dataset.faults = String(data.faults.length);
  document.body.dataset.ready = '1';
})();
