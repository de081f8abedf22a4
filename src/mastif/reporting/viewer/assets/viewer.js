// mastif trace viewer: the data loader, formatting and the router (grid-page.js draws the
// grid, run.js a run).
// Vanilla JS, no library: the site must open offline, from disk (file://) or served.
"use strict";

const mastif = (window.mastif = window.mastif || {});

// ---- loading data files -------------------------------------------------------------------
// Each data file is a script calling window.__mastif_load(key, data): file:// pages cannot
// fetch() JSON in Chromium, but they can load scripts.
const pending = new Map();
const loaded = new Map();
window.__mastif_load = function (key, data) {
  const waiter = pending.get(key);
  if (waiter) {
    pending.delete(key);
    waiter.resolve(data);
  }
};

mastif.load = function (key, src) {
  if (loaded.has(key)) return loaded.get(key);
  const promise = new Promise(function (resolve, reject) {
    pending.set(key, { resolve: resolve, reject: reject });
    const script = document.createElement("script");
    script.src = src;
    script.onerror = function () {
      pending.delete(key);
      loaded.delete(key);
      reject(new Error("cannot load " + src));
    };
    script.onload = function () {
      script.remove();
      if (pending.has(key)) {
        pending.delete(key);
        reject(new Error(src + " holds no data for " + key));
      }
    };
    document.head.appendChild(script);
  });
  loaded.set(key, promise);
  return promise;
};

mastif.runFile = function (n) {
  return "data/runs/" + Math.floor(n / mastif.grid.runs_per_dir) + "/" + n + ".js";
};

mastif.loadRun = function (n) {
  return mastif.load("run:" + n, mastif.runFile(n));
};

// ---- formatting ---------------------------------------------------------------------------
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
mastif.esc = function (value) {
  return String(value).replace(/[&<>"']/g, function (c) {
    return ESC[c];
  });
};

// null is unknown, never 0: shown as a dash with a title saying so
mastif.UNKNOWN = '<span class="unknown" title="unknown (not recorded)">—</span>';

mastif.fmt = function (value, digits) {
  if (value === null || value === undefined) return mastif.UNKNOWN;
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return value.toLocaleString("en");
    return value.toFixed(digits === undefined ? 3 : digits).replace(/\.?0+$/, "");
  }
  return mastif.esc(value);
};

mastif.stackName = function (stack) {
  return stack.model + " · " + stack.protocol + " · " + stack.framework;
};

// ---- router -------------------------------------------------------------------------------
mastif.stats = { renders: 0, lastRenderMs: null, readyMs: null };

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  document.getElementById("tip").hidden = true;
  if (parts[0] === "run" && parts[1] !== undefined) return mastif.showRun(Number(parts[1]));
  if (parts[0] === "compare" && parts[2] !== undefined)
    return mastif.showCompare(Number(parts[1]), Number(parts[2]));
  showGrid();
}

// The judge gate's verdict above every page: the judge's TU, TA and TCR (colours, sorting,
// the run page's scores) mean what they say only when it reads "validated".
function showGate(gate) {
  const el = document.getElementById("gate");
  const known = gate && typeof gate.text === "string";
  el.textContent = known ? gate.text : "judge not assessable: no judge-validity result in this viewer";
  el.className = "gate " + (known && gate.validated === true ? "gate-ok" : "gate-warn");
  el.dataset.validated = known && gate.validated === true ? "1" : "0";
  el.hidden = false;
}

mastif.start = function () {
  mastif
    .load("grid", "data/grid.js")
    .then(function (grid) {
      mastif.grid = grid;
      document.getElementById("title").textContent = grid.title || "";
      showGate(grid.judge_gate);
      window.addEventListener("hashchange", route);
      route();
      mastif.stats.readyMs = performance.now();
      document.body.dataset.ready = "1";
    })
    .catch(function (err) {
      document.getElementById("app").innerHTML = '<p class="error">' + mastif.esc(err.message) + "</p>";
    });
};
