// mastif trace viewer: the grid of stacks x tasks (viewer.js loads the data and routes here).
"use strict";

// ---- colours ------------------------------------------------------------------------------
const STATUS_CLASS = { ok: "c-good", timeout: "c-warn", error: "c-bad" };

const metricsByKey = {};
function metricOf(key) {
  if (!metricsByKey[key]) metricsByKey[key] = mastif.grid.metrics.find((m) => m.key === key);
  return metricsByKey[key];
}

// [min, max] of a metric over every run: the scale of an "amount" metric
const ranges = {};
function rangeOf(key) {
  if (!ranges[key]) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of mastif.grid.runs[key]) {
      if (v === null) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    ranges[key] = lo <= hi ? [lo, hi] : [0, 0];
  }
  return ranges[key];
}

// A run's cell: [class, inline style]
function cellColour(colour, i) {
  const runs = mastif.grid.runs;
  if (colour === "status") return [STATUS_CLASS[runs.status[i]] || "c-unknown", ""];
  const value = runs[colour][i];
  if (value === null || value === undefined) return ["c-unknown", ""];
  const metric = metricOf(colour);
  if (metric.kind === "bool") return [value ? "c-good" : "c-bad", ""];
  return valueColour(metric, value);
}

// a number's colour: a score (or a rate of a bool metric) red to green, an amount in blue
function valueColour(metric, value) {
  if (value === null) return ["c-unknown", ""];
  if (metric.kind !== "amount") {
    const hue = Math.round(Math.max(0, Math.min(1, value)) * 125);
    return ["", "background:hsl(" + hue + ",62%,48%)"];
  }
  const range = rangeOf(metric.key);
  const span = Math.log1p(range[1] - range[0]) || 1;
  const t = Math.log1p(value - range[0]) / span;
  return ["", "background:hsl(212,70%," + Math.round(92 - t * 60) + "%)"];
}

function legendHtml(colour) {
  const item = function (cls, style, label) {
    return '<span class="key"><i class="' + cls + '" style="' + style + '"></i>' + label + "</span>";
  };
  const unknown = item("c-unknown", "", "unknown");
  if (colour === "status")
    return item("c-good", "", "ok") + item("c-warn", "", "timeout") + item("c-bad", "", "error") + unknown;
  const metric = metricOf(colour);
  if (metric.kind === "bool") return item("c-good", "", "true") + item("c-bad", "", "false") + unknown;
  if (metric.kind === "score")
    return (
      item("", "background:hsl(0,62%,48%)", "0") +
      item("", "background:hsl(62,62%,48%)", "0.5") +
      item("", "background:hsl(125,62%,48%)", "1") +
      unknown
    );
  const range = rangeOf(colour);
  return (
    item("", "background:hsl(212,70%,92%)", mastif.fmt(range[0])) +
    item("", "background:hsl(212,70%,32%)", mastif.fmt(range[1]) + " (log scale)") +
    unknown
  );
}

// ---- grid state and filtering -------------------------------------------------------------
const FACETS = ["model", "protocol", "framework"];
const state = {
  colour: "success",
  sort: "",
  desc: true,
  search: "",
  // facet -> Set of the values shown; a missing facet shows every value
  shown: {},
};

function successLabel(value) {
  return value === null || value === undefined ? "unknown" : String(value);
}

function facetValues(grid) {
  const values = {};
  for (const f of FACETS) values[f] = unique(grid.stacks.map((s) => s[f]));
  values.status = unique(grid.runs.status.map((s) => (s === null ? "unknown" : s)));
  values.success = unique(grid.runs.success.map(successLabel));
  return values;
}

function unique(list) {
  return Array.from(new Set(list));
}

function isShown(facet, value) {
  const set = state.shown[facet];
  return !set || set.has(value);
}

function runPasses(i) {
  const runs = mastif.grid.runs;
  return (
    isShown("status", runs.status[i] === null ? "unknown" : runs.status[i]) &&
    isShown("success", successLabel(runs.success[i]))
  );
}

// runs of stack s on task t, repeats in order (built once), and the most runs in a cell
let cells = null;
let mostRepeats = 1;
function buildCells() {
  const grid = mastif.grid;
  const runs = grid.runs;
  cells = new Array(grid.stacks.length * grid.tasks.length);
  for (let i = 0; i < grid.n_runs; i++) {
    const k = runs.stack[i] * grid.tasks.length + runs.task[i];
    (cells[k] = cells[k] || []).push(i);
  }
  for (const list of cells) {
    if (!list) continue;
    list.sort((a, b) => (runs.repeat[a] || 0) - (runs.repeat[b] || 0));
    if (list.length > mostRepeats) mostRepeats = list.length;
  }
}

function cellRuns(s, t) {
  if (!cells) buildCells();
  return cells[s * mastif.grid.tasks.length + t] || [];
}

function maxRepeats() {
  if (!cells) buildCells();
  return mostRepeats;
}

// sum and count of a metric per stack and per task over the runs shown (unknown left out)
function meansBy(view, key) {
  const grid = mastif.grid;
  const values = grid.runs[key];
  const sums = { stack: new Float64Array(grid.stacks.length), task: new Float64Array(grid.tasks.length) };
  const counts = { stack: new Uint32Array(grid.stacks.length), task: new Uint32Array(grid.tasks.length) };
  const runsIn = new Uint32Array(grid.stacks.length);
  for (const i of view.shown) {
    const s = grid.runs.stack[i];
    runsIn[s]++;
    const v = values[i];
    if (v === null || v === undefined) continue;
    const x = typeof v === "boolean" ? (v ? 1 : 0) : v;
    const t = grid.runs.task[i];
    sums.stack[s] += x;
    counts.stack[s]++;
    sums.task[t] += x;
    counts.task[t]++;
  }
  const mean = (axis, k) => (counts[axis][k] ? sums[axis][k] / counts[axis][k] : null);
  return { stack: (s) => mean("stack", s), task: (t) => mean("task", t), runsIn: runsIn };
}

// What the filters leave: stacks (columns), tasks (rows), and which runs are shown
// (passes[i] = 1), in one pass over the runs
function visible() {
  const grid = mastif.grid;
  const runs = grid.runs;
  const stackOk = grid.stacks.map((s) => FACETS.every((f) => isShown(f, s[f])));
  const needle = state.search.trim().toLowerCase();
  const taskOk = grid.tasks.map((task) => !needle || (task.id + " " + task.text).toLowerCase().indexOf(needle) >= 0);
  const passes = new Uint8Array(grid.n_runs);
  const taskHas = new Uint8Array(grid.tasks.length);
  const shown = [];
  for (let i = 0; i < grid.n_runs; i++) {
    if (stackOk[runs.stack[i]] && taskOk[runs.task[i]] && runPasses(i)) {
      passes[i] = 1;
      taskHas[runs.task[i]] = 1;
      shown.push(i);
    }
  }
  const stacks = [];
  stackOk.forEach((ok, s) => ok && stacks.push(s));
  const tasks = [];
  taskHas.forEach((has, t) => has && tasks.push(t));
  const view = { stacks: stacks, tasks: tasks, passes: passes, shown: shown };
  if (state.sort) {
    const means = meansBy(view, state.sort);
    const sign = state.desc ? -1 : 1;
    const order = function (a, b) {
      if (a[1] === b[1]) return a[0] - b[0];
      if (a[1] === null) return 1; // unknown last either way
      if (b[1] === null) return -1;
      return sign * (a[1] - b[1]);
    };
    view.stacks = stacks.map((s) => [s, means.stack(s)]).sort(order).map((p) => p[0]);
    view.tasks = tasks.map((t) => [t, means.task(t)]).sort(order).map((p) => p[0]);
  }
  return view;
}

// ---- grid page ----------------------------------------------------------------------------
function controlsHtml() {
  const grid = mastif.grid;
  const values = facetValues(grid);
  const colourOptions = ['<option value="status">run status</option>']
    .concat(grid.metrics.map((m) => '<option value="' + m.key + '">' + mastif.esc(m.label) + "</option>"))
    .join("");
  const sortOptions = ['<option value="">task and stack order</option>']
    .concat(grid.metrics.map((m) => '<option value="' + m.key + '">mean ' + mastif.esc(m.label) + "</option>"))
    .join("");
  let html =
    '<label class="field">Colour by<select id="colour">' + colourOptions + "</select></label>" +
    '<label class="field">Sort tasks and stacks by<select id="sort">' + sortOptions + "</select></label>" +
    '<label class="check"><input type="checkbox" id="desc" checked> highest first</label>' +
    '<label class="field">Task<input id="search" type="search" placeholder="id or text"></label>';
  const names = { model: "Model", protocol: "Protocol", framework: "Framework", status: "Status", success: "Check success" };
  for (const facet of ["model", "protocol", "framework", "status", "success"]) {
    html += '<fieldset class="facet" data-facet="' + facet + '"><legend>' + names[facet] + "</legend>";
    for (const value of values[facet]) {
      html +=
        '<label class="check"><input type="checkbox" data-facet="' + facet + '" value="' +
        mastif.esc(value) + '" checked> ' + mastif.esc(value) + "</label>";
    }
    html += "</fieldset>";
  }
  return html + '<button id="reset" type="button">Show everything</button>';
}

function countsHtml(view) {
  const runs = mastif.grid.runs;
  const tally = { ok: 0, timeout: 0, error: 0, unknownStatus: 0, yes: 0, no: 0, unchecked: 0, judged: 0, judgeFailed: 0, unjudged: 0 };
  let n = 0;
  for (const i of view.shown) {
    n++;
    const status = runs.status[i];
    if (status === "ok" || status === "timeout" || status === "error") tally[status]++;
    else tally.unknownStatus++;
    if (runs.success[i] === true) tally.yes++;
    else if (runs.success[i] === false) tally.no++;
    else tally.unchecked++;
    if (runs.judge_status[i] === "ok") tally.judged++;
    else if (runs.judge_status[i] === "judge_failed") tally.judgeFailed++;
    else tally.unjudged++;
  }
  const chip = function (cls, label, count) {
    return '<span class="chip ' + cls + '">' + label + " <b>" + count.toLocaleString("en") + "</b></span>";
  };
  return (
    '<span id="counts" data-runs="' + n + '"><b>' + n.toLocaleString("en") + "</b> of " +
    mastif.grid.n_runs.toLocaleString("en") + " runs · " + view.stacks.length + " stacks × " +
    view.tasks.length + " tasks</span>" +
    chip("s-good", "ok", tally.ok) + chip("s-warn", "timeout", tally.timeout) +
    chip("s-bad", "error", tally.error) +
    (tally.unknownStatus ? chip("s-unknown", "status unknown", tally.unknownStatus) : "") +
    chip("s-good", "check passed", tally.yes) + chip("s-bad", "check failed", tally.no) +
    chip("s-unknown", "no check", tally.unchecked) + chip("s-bad", "judge failed", tally.judgeFailed) +
    chip("s-unknown", "unjudged", tally.unjudged)
  );
}

// header rows: model and protocol merged over adjacent equal columns, framework per column
function headerHtml(view, width) {
  const stacks = mastif.grid.stacks;
  let html = "";
  for (const facet of ["model", "protocol"]) {
    html += '<div class="hrow"><div class="lab hlab">' + facet + "</div><div class=\"hcells\">";
    let k = 0;
    while (k < view.stacks.length) {
      const value = stacks[view.stacks[k]][facet];
      let j = k;
      while (j < view.stacks.length && stacks[view.stacks[j]][facet] === value) j++;
      html += '<span class="span" style="width:' + (j - k) * width + 'px" title="' + mastif.esc(value) + '">' + mastif.esc(value) + "</span>";
      k = j;
    }
    html += "</div></div>";
  }
  html += '<div class="hrow fw"><div class="lab hlab">framework</div><div class="hcells">';
  for (const s of view.stacks) {
    html += '<span class="vert" style="width:' + width + 'px" title="' + mastif.esc(mastif.stackName(stacks[s])) + '">' + mastif.esc(stacks[s].framework) + "</span>";
  }
  return html + "</div></div>";
}

// each stack's mean of the colouring metric over the runs shown (a rate for a bool metric)
function meanRowHtml(view, width) {
  if (state.colour === "status") return "";
  const metric = metricOf(state.colour);
  const means = meansBy(view, state.colour);
  let html = '<div class="hrow means"><div class="lab hlab">stack mean</div><div class="cells">';
  for (const s of view.stacks) {
    const value = means.stack(s);
    const colour = valueColour(metric, value);
    const label = metric.label + ": " + (value === null ? "unknown" : value.toFixed(3)) + " over " + means.runsIn[s] + " runs";
    html += '<span class="cell mean ' + colour[0] + '" style="width:' + width + "px;" + colour[1] + '" title="' + mastif.esc(label) + '"></span>';
  }
  return html + "</div></div>";
}

// The runs are squares on one canvas, not 10,000 elements: the browser lays out and paints
// a canvas in a few milliseconds, while that many elements took it over a second.
const ROW_H = 14;
const SQUARE = 11;
const PALETTE = { "c-good": "#2da44e", "c-warn": "#d4a72c", "c-bad": "#cf222e" };
let layout = null; // what the canvas shows: the view and the cell width

function labelsHtml(view) {
  const tasks = mastif.grid.tasks;
  return view.tasks
    .map(function (t) {
      const task = tasks[t];
      return '<div class="row"><div class="lab" title="' + mastif.esc(task.text) + '"><b>' + mastif.esc(task.id) + "</b> " + mastif.esc(task.text) + "</div></div>";
    })
    .join("");
}

// a grey hatch: unknown is never drawn as a colour of its own
function unknownPattern(ctx) {
  const tile = document.createElement("canvas");
  tile.width = tile.height = 4;
  const t = tile.getContext("2d");
  t.fillStyle = "#eef0f3";
  t.fillRect(0, 0, 4, 4);
  t.strokeStyle = "#c9ced6";
  t.beginPath();
  t.moveTo(0, 4);
  t.lineTo(4, 0);
  t.stroke();
  return ctx.createPattern(tile, "repeat");
}

// every run's fill under a colouring (computed once per colouring: filters only re-draw)
const fillCache = {};
function fillsOf(colour) {
  if (!fillCache[colour]) {
    const fills = new Array(mastif.grid.n_runs);
    for (let i = 0; i < fills.length; i++) {
      const c = cellColour(colour, i);
      fills[i] = c[1] ? c[1].slice("background:".length) : c[0];
    }
    fillCache[colour] = fills;
  }
  return fillCache[colour];
}

// one path per colour: a few fills instead of a fillStyle change per run
function drawCells(canvas, view, width) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = view.stacks.length * width;
  const cssH = view.tasks.length * ROW_H;
  canvas.width = Math.max(1, Math.round(cssW * dpr));
  canvas.height = Math.max(1, Math.round(cssH * dpr));
  canvas.style.width = cssW + "px";
  canvas.style.height = cssH + "px";
  // opaque: the compositor need not blend a canvas taller than the screen
  const ctx = canvas.getContext("2d", { alpha: false });
  ctx.scale(dpr, dpr);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, cssW, cssH);
  const fills = fillsOf(state.colour);
  const buckets = new Map(); // fill -> [x, y, x, y, ...]
  const outlines = []; // runs the filters hide: an outline where the square would be
  let drawn = 0;
  for (let row = 0; row < view.tasks.length; row++) {
    const t = view.tasks[row];
    const y = row * ROW_H + 1;
    for (let col = 0; col < view.stacks.length; col++) {
      const list = cellRuns(view.stacks[col], t);
      for (let k = 0; k < list.length; k++) {
        const i = list[k];
        const x = col * width + 1 + k * (SQUARE + 1);
        if (!view.passes[i]) {
          outlines.push(x, y);
          continue;
        }
        const fill = fills[i];
        let bucket = buckets.get(fill);
        if (!bucket) buckets.set(fill, (bucket = []));
        bucket.push(x, y);
        drawn++;
      }
    }
  }
  buckets.forEach(function (xy, fill) {
    ctx.fillStyle = fill === "c-unknown" ? unknownPattern(ctx) : PALETTE[fill] || fill;
    ctx.beginPath();
    for (let j = 0; j < xy.length; j += 2) ctx.rect(xy[j], xy[j + 1], SQUARE, ROW_H - 2);
    ctx.fill();
  });
  ctx.strokeStyle = "#e1e4e8";
  ctx.beginPath();
  for (let j = 0; j < outlines.length; j += 2) ctx.rect(outlines[j] + 0.5, outlines[j + 1] + 0.5, SQUARE - 1, ROW_H - 3);
  ctx.stroke();
  canvas.dataset.drawn = String(drawn);
}

// the run under a point of the canvas (CSS pixels from its corner), or null
function runAt(x, y) {
  if (!layout) return null;
  const row = Math.floor(y / ROW_H);
  const col = Math.floor(x / layout.width);
  const k = Math.floor((x - col * layout.width - 1) / (SQUARE + 1));
  const t = layout.view.tasks[row];
  const s = layout.view.stacks[col];
  if (t === undefined || s === undefined || k < 0) return null;
  const i = cellRuns(s, t)[k];
  return i !== undefined && layout.view.passes[i] ? i : null;
}

// where run n's square is in the viewport (tests and the bench click there), or null
mastif.runSquare = function (n) {
  const canvas = document.getElementById("cells");
  if (!layout || !canvas) return null;
  const runs = mastif.grid.runs;
  const row = layout.view.tasks.indexOf(runs.task[n]);
  const col = layout.view.stacks.indexOf(runs.stack[n]);
  const k = cellRuns(runs.stack[n], runs.task[n]).indexOf(n);
  const x = col * layout.width + 1 + k * (SQUARE + 1) + 5;
  const y = row * ROW_H + 6;
  if (row < 0 || col < 0 || runAt(x, y) !== n) return null;
  window.scrollTo(0, Math.max(0, canvas.getBoundingClientRect().top + window.scrollY + y - 200));
  const box = canvas.getBoundingClientRect();
  return { x: box.left + x, y: box.top + y };
};

let labelsKey = null; // the task rows on screen: unchanged rows are not rebuilt

// The grid's parts stay in place between renders: the header (small) is rebuilt, the task
// labels only when the rows change, and the canvas is redrawn, never replaced.
function renderGrid() {
  const started = performance.now();
  const view = visible();
  const width = maxRepeats() * (SQUARE + 1) + 2;
  document.getElementById("counts-bar").innerHTML = countsHtml(view);
  document.getElementById("legend").innerHTML = legendHtml(state.colour);
  const head = document.getElementById("grid-head");
  const body = document.getElementById("grid-body");
  layout = null;
  if (!view.tasks.length) {
    head.innerHTML = '<p class="empty">No run matches the filters.</p>';
    body.hidden = true;
    document.getElementById("cells").dataset.drawn = "0";
  } else {
    head.innerHTML = headerHtml(view, width) + meanRowHtml(view, width);
    body.hidden = false;
    const key = view.tasks.join(",");
    if (key !== labelsKey) {
      document.getElementById("labels").innerHTML = labelsHtml(view);
      labelsKey = key;
    }
    drawCells(document.getElementById("cells"), view, width);
    layout = { view: view, width: width };
  }
  mastif.stats.renders++;
  mastif.stats.lastRenderMs = performance.now() - started;
}

function canvasPoint(e) {
  const box = e.target.getBoundingClientRect();
  return [e.clientX - box.left, e.clientY - box.top];
}

function bindControls() {
  const on = function (id, event, fn) {
    document.getElementById(id).addEventListener(event, fn);
  };
  document.getElementById("colour").value = state.colour;
  document.getElementById("sort").value = state.sort;
  document.getElementById("desc").checked = state.desc;
  document.getElementById("search").value = state.search;
  document.querySelectorAll("input[data-facet]").forEach(function (box) {
    box.checked = isShown(box.dataset.facet, box.value);
  });
  on("colour", "change", (e) => { state.colour = e.target.value; renderGrid(); });
  on("sort", "change", (e) => { state.sort = e.target.value; renderGrid(); });
  on("desc", "change", (e) => { state.desc = e.target.checked; renderGrid(); });
  on("search", "input", (e) => { state.search = e.target.value; renderGrid(); });
  on("reset", "click", function () {
    state.shown = {};
    state.search = "";
    bindControls.refresh();
    renderGrid();
  });
  document.getElementById("controls").addEventListener("change", function (e) {
    const box = e.target;
    if (!box.dataset || !box.dataset.facet) return;
    const facet = box.dataset.facet;
    const boxes = document.querySelectorAll('input[data-facet="' + facet + '"]');
    const chosen = new Set();
    boxes.forEach((b) => b.checked && chosen.add(b.value));
    state.shown[facet] = chosen.size === boxes.length ? undefined : chosen;
    renderGrid();
  });
  const grid = document.getElementById("grid");
  grid.addEventListener("click", function (e) {
    if (e.target.id !== "cells") return;
    const i = runAt.apply(null, canvasPoint(e));
    if (i !== null) location.hash = "#/run/" + i;
  });
  grid.addEventListener("mousemove", showTip);
  grid.addEventListener("mouseleave", () => (document.getElementById("tip").hidden = true));
}
bindControls.refresh = function () {
  document.getElementById("search").value = "";
  document.querySelectorAll("input[data-facet]").forEach((b) => (b.checked = true));
};

function showTip(e) {
  const tip = document.getElementById("tip");
  const i = e.target.id === "cells" ? runAt.apply(null, canvasPoint(e)) : null;
  e.target.style.cursor = i === null ? "" : "pointer";
  if (i === null) {
    tip.hidden = true;
    return;
  }
  const grid = mastif.grid;
  const runs = grid.runs;
  const task = grid.tasks[runs.task[i]];
  tip.innerHTML =
    "<b>" + mastif.esc(mastif.stackName(grid.stacks[runs.stack[i]])) + "</b><br>" +
    mastif.esc(task.id) + " · repeat " + mastif.fmt(runs.repeat[i]) + "<br>status " + mastif.fmt(runs.status[i]) +
    " · check " + mastif.fmt(runs.success[i]) + " · TCR " + mastif.fmt(runs.TCR[i]) +
    "<br>CT " + mastif.fmt(runs.CT[i]) + " s · V " + mastif.fmt(runs.V[i]) + " tokens · judge " + mastif.fmt(runs.judge_status[i]);
  tip.hidden = false;
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 340) + "px";
  tip.style.top = e.clientY + 14 + "px";
}

function showGrid() {
  const app = document.getElementById("app");
  app.innerHTML =
    '<div class="gridpage"><aside id="controls" class="controls">' + controlsHtml() +
    '</aside><section class="gridmain"><div id="counts-bar" class="counts"></div>' +
    '<div id="legend" class="legend"></div><div id="grid" class="grid"><div id="grid-head"></div>' +
    '<div id="grid-body" class="body"><div id="labels" class="labels"></div><canvas id="cells"></canvas></div>' +
    "</div></section></div>";
  labelsKey = null;
  bindControls();
  renderGrid();
}

