// mastif trace viewer: a run's page and two runs side by side (viewer.js loads the data).
"use strict";

(function () {
  const esc = mastif.esc;
  const fmt = mastif.fmt;

  function section(title, body, extra) {
    return '<section class="card' + (extra ? " " + extra : "") + '"><h2>' + title + "</h2>" + body + "</section>";
  }

  function kv(pairs) {
    return (
      '<dl class="kv">' +
      pairs.map((p) => "<dt>" + esc(p[0]) + "</dt><dd>" + (p[2] ? p[1] : fmt(p[1])) + "</dd>").join("") +
      "</dl>"
    );
  }

  function text(value) {
    if (value === null || value === undefined) return mastif.UNKNOWN;
    return '<pre class="text">' + esc(value) + "</pre>";
  }

  function json(value) {
    if (value === null || value === undefined) return mastif.UNKNOWN;
    return '<pre class="text json">' + esc(typeof value === "string" ? value : JSON.stringify(value, null, 2)) + "</pre>";
  }

  // Arguments as the model produced them; pretty-printed below when they are JSON
  function toolArguments(raw) {
    if (raw === null || raw === undefined) return mastif.UNKNOWN;
    let pretty = null;
    try {
      const parsed = JSON.parse(raw);
      if (parsed !== null && typeof parsed === "object") pretty = JSON.stringify(parsed, null, 2);
    } catch (e) {
      pretty = null; // not JSON: the raw text is all there is
    }
    return '<pre class="text args">' + esc(pretty === null ? raw : pretty) + "</pre>" +
      (pretty === null ? "" : '<details class="raw"><summary>as produced</summary><pre class="text">' + esc(raw) + "</pre></details>");
  }

  function chips(list) {
    if (list === null || list === undefined) return mastif.UNKNOWN;
    if (!list.length) return '<span class="muted">none</span>';
    return list.map((v) => '<span class="chip">' + esc(v) + "</span>").join("");
  }

  function badge(label, value, good) {
    const cls = value === null || value === undefined ? "s-unknown" : good ? "s-good" : "s-bad";
    return '<span class="chip ' + cls + '">' + label + " <b>" + fmt(value) + "</b></span>";
  }

  function statusBadge(status) {
    const cls = { ok: "s-good", timeout: "s-warn", error: "s-bad" }[status] || "s-unknown";
    return '<span class="chip ' + cls + '">status <b>' + fmt(status) + "</b></span>";
  }

  function taskCard(task) {
    const steps = task.reference_steps
      ? "<ol>" + task.reference_steps.map((s) => "<li>" + esc(s) + "</li>").join("") + "</ol>"
      : mastif.UNKNOWN;
    return section(
      "Task",
      text(task.text) +
        kv([["task", task.task_id], ["website", task.website], ["domain", task.domain], ["level", task.level], ["start URL", task.start_url]]) +
        '<h3>Reference steps</h3>' + steps + "<h3>Programmatic check</h3>" + json(task.check)
    );
  }

  function outcomeCard(d) {
    const r = d.run;
    const error = r.error_class || r.error_message
      ? "<h3>Error</h3>" + kv([["class", r.error_class]]) + text(r.error_message)
      : "";
    return section(
      "Outcome",
      "<h3>Final answer</h3>" + text(r.final_answer) +
        (r.raw_final_answer ? "<h3>Raw final answer</h3>" + text(r.raw_final_answer) : "") +
        error +
        "<h3>Check</h3>" +
        kv([["success", d.check.success], ["web", d.check.web]]) + text(d.check.check_detail) +
        "<h3>Sandbox state at the end</h3>" + json(d.check.web_state)
    );
  }

  function nodesCard(d) {
    if (!d.node_outputs.length) return section("Node outputs (0)", '<p class="muted">none recorded</p>');
    const items = d.node_outputs.map(function (o, k) {
      const values = o.is_answer
        ? '<div class="values">final answer · values ' + chips(d.values && d.values.output_values) + "</div>"
        : '<div class="values">values ' + chips(o.values) + "</div>";
      return '<li class="node"><div class="node-head"><span class="idx">' + (k + 1) + "</span><b>" + esc(o.node) +
        "</b> step " + fmt(o.step) + ' · <span class="muted">' + fmt(o.output_key) + "</span></div>" + text(o.text) + values + "</li>";
    });
    return section("Node outputs (" + d.node_outputs.length + ")", '<ol class="nodes">' + items.join("") + "</ol>");
  }

  function llmCard(d) {
    if (!d.llm_calls.length) return section("LLM calls (0)", '<p class="muted">none recorded</p>');
    const head = ["#", "node", "started s", "latency s", "prompt tok", "completion tok", "attempts", "HTTP", "cached", "upstream s", "queue s", "backoff s", "error"];
    const rows = d.llm_calls.map(function (c, k) {
      return "<tr" + (c.error ? ' class="bad"' : "") + "><td>" + (k + 1) + "</td><td>" + fmt(c.node) + "</td><td>" + fmt(c.started_s) +
        "</td><td>" + fmt(c.latency_s) + "</td><td>" + fmt(c.prompt_tokens) + "</td><td>" + fmt(c.completion_tokens) +
        "</td><td>" + fmt(c.attempts) + "</td><td>" + fmt(c.http_status) + "</td><td>" + fmt(c.cached) + "</td><td>" +
        fmt(c.upstream_s) + "</td><td>" + fmt(c.queue_s) + "</td><td>" + fmt(c.backoff_s) + "</td><td>" + (c.error ? esc(c.error) : "") + "</td></tr>";
    });
    return section("LLM calls (" + d.llm_calls.length + ")",
      '<div class="scroll"><table class="table"><thead><tr><th>' + head.join("</th><th>") + "</th></tr></thead><tbody>" + rows.join("") + "</tbody></table></div>");
  }

  function toolsCard(d) {
    if (!d.tool_calls.length) return section("Tool calls (0)", '<p class="muted">none recorded</p>');
    const items = d.tool_calls.map(function (c, k) {
      const ok = c.ok === null || c.ok === undefined ? '<span class="chip s-unknown">outcome unknown</span>'
        : c.ok ? '<span class="chip s-good">ok</span>' : '<span class="chip s-bad">failed</span>';
      return '<li class="tool"><div class="node-head"><span class="idx">' + (k + 1) + '</span><b class="toolname">' + esc(c.name) + "</b> " + ok +
        ' <span class="muted">node ' + fmt(c.node) + " · step " + fmt(c.step) + " · " + fmt(c.duration_s) + " s · started at " + fmt(c.started_s) + " s</span></div>" +
        "<h3>Arguments</h3>" + toolArguments(c.arguments) + "<h3>Output</h3>" + text(c.output) +
        (c.error ? '<h3>Error</h3><pre class="text bad">' + esc(c.error) + "</pre>" : "") + "</li>";
    });
    return section("Tool calls (" + d.tool_calls.length + ")", '<ol class="tools">' + items.join("") + "</ol>");
  }

  function protocolCard(d) {
    const p = d.protocol;
    return section("Protocol", kv([
      ["messages (JSON-RPC, both ways)", p.protocol_messages], ["calls", p.protocol_calls], ["HTTP requests", p.protocol_requests],
      ["bytes sent", p.protocol_bytes_sent], ["bytes received", p.protocol_bytes_received],
      ["exchange s", p.protocol_exchange_seconds], ["peer s", p.protocol_peer_seconds], ["overhead s", p.protocol_seconds],
    ]));
  }

  function judgeCard(d) {
    const j = d.judge;
    if (!j) return section("Judge", '<p class="muted">not judged</p>');
    const score = (name) =>
      '<div class="score"><div class="score-head">' + name + " <b>" + fmt(j[name]) + "</b></div>" + text(j[name + "_rationale"]) + "</div>";
    const panel = j.judge_panel && j.judge_panel.length > 1
      ? '<h3>Panel</h3><table class="table"><thead><tr><th>judge</th><th>repeat</th><th>status</th><th>TU</th><th>TA</th><th>TCR</th></tr></thead><tbody>' +
        j.judge_panel.map((p) => "<tr><td>" + fmt(p.judge_model) + "</td><td>" + fmt(p.repeat) + "</td><td>" + fmt(p.status) + "</td><td>" +
          fmt(p.TU) + "</td><td>" + fmt(p.TA) + "</td><td>" + fmt(p.TCR) + "</td></tr>").join("") + "</tbody></table>"
      : "";
    const gate = mastif.grid.judge_gate;
    const gateLine = '<p class="gate-note">judge gate: ' + esc(gate ? gate.text : "no judge-validity result") + "</p>";
    return section("Judge",
      gateLine +
      kv([["status", j.judge_status], ["judge", j.judge_model], ["attempts", j.judge_attempts], ["texts clipped", j.judge_n_clipped], ["error", j.judge_error]]) +
        score("TU") + score("TA") + score("TCR") + panel +
        '<details class="raw"><summary>raw reply</summary>' + text(j.judge_raw_reply) + "</details>");
  }

  function valuesCard(d) {
    const v = d.values;
    if (!v) return section("Values", '<p class="muted">not tagged</p>');
    return section("Values",
      "<h3>Task prompt</h3>" + chips(v.prompt_values) + "<h3>Final answer</h3>" + chips(v.output_values) +
        '<p class="muted">the values of each reasoning step are under its node output</p>' +
        kv([["IVS", v.IVS], ["IVS prompt → output", v.IVS_prompt_output], ["IVS reasoning", v.IVS_reasoning],
          ["value sets", v.n_value_sets], ["empty value sets", v.n_empty_value_sets]]));
  }

  function runInfoCard(d) {
    const r = d.run;
    return section("Run", kv([
      ["run id", r.run_id], ["experiment", r.experiment], ["started at", r.started_at], ["provider", r.provider], ["served model", r.served_model],
      ["wall s", r.wall_seconds], ["model s", r.wall_model_s], ["queue s", r.wall_queue_s], ["tools s", r.wall_tools_s],
      ["protocol s", r.wall_protocol_s], ["setup s", r.wall_setup_s], ["harness s", r.wall_harness_s],
      ["prompt tokens", r.prompt_tokens], ["completion tokens", r.completion_tokens], ["LLM calls", r.n_llm_calls], ["cached calls", r.n_cached_calls],
      ["temperature", r.temperature], ["max tokens", r.max_tokens], ["max steps", r.max_steps], ["max tool rounds", r.max_tool_rounds],
      ["time-out s", r.timeout_s], ["generation seed", r.generation_seed], ["sampling seed", r.sampling_seed],
      ["workflow", r.workflow_shape], ["origin", r.origin], ["tokens estimated", r.tokens_estimated],
    ]));
  }

  function headline(d, n) {
    const r = d.run;
    const grid = mastif.grid;
    return '<div class="headline"><h1>' + esc(mastif.stackName(grid.stacks[grid.runs.stack[n]])) + "</h1>" +
      '<div class="sub">' + esc(r.task_id) + " · repeat " + fmt(r.repeat) + "</div><div>" + statusBadge(r.status) +
      badge("check", d.check.success, d.check.success === true) +
      badge("TCR", d.judge && d.judge.TCR, d.judge && d.judge.TCR >= 0.7) +
      '<span class="chip">CT <b>' + fmt(r.wall_seconds) + " s</b></span>" +
      '<span class="chip">tokens <b>' + fmt(r.completion_tokens) + "</b></span>" +
      '<span class="chip">tool calls <b>' + d.tool_calls.length + "</b></span>" +
      '<span class="chip">protocol messages <b>' + fmt(d.protocol.protocol_messages) + "</b></span></div></div>";
  }

  function runHtml(d, n) {
    return headline(d, n) + taskCard(d.task) + outcomeCard(d) + nodesCard(d) + toolsCard(d) + llmCard(d) +
      judgeCard(d) + valuesCard(d) + protocolCard(d) + runInfoCard(d);
  }

  // the other runs of the same task (every stack and repeat), for side by side
  function sameTask(n) {
    const runs = mastif.grid.runs;
    const out = [];
    for (let i = 0; i < mastif.grid.n_runs; i++) if (runs.task[i] === runs.task[n] && i !== n) out.push(i);
    return out;
  }

  function compareSelect(n, chosen, id) {
    const grid = mastif.grid;
    const options = sameTask(n).map(function (i) {
      const label = mastif.stackName(grid.stacks[grid.runs.stack[i]]) + " · repeat " + grid.runs.repeat[i] + " · " + grid.runs.status[i];
      return '<option value="' + i + '"' + (i === chosen ? " selected" : "") + ">" + esc(label) + "</option>";
    });
    if (!options.length) return '<span class="muted">no other stack ran this task</span>';
    return '<label class="field inline">Side by side with <select id="' + id + '"><option value="">choose a stack…</option>' + options.join("") + "</select></label>";
  }

  function failed(err) {
    document.getElementById("app").innerHTML = '<p class="error">' + esc(err.message) + '</p><p><a href="#/">back to the grid</a></p>';
  }

  mastif.showRun = function (n) {
    const app = document.getElementById("app");
    app.innerHTML = '<p class="loading">Loading run ' + n + "…</p>";
    mastif.loadRun(n).then(function (d) {
      app.innerHTML = '<nav class="crumbs"><a href="#/">← grid</a>' + compareSelect(n, null, "compare-with") + "</nav>" +
        '<article class="run-page" data-run-id="' + esc(d.run.run_id) + '">' + runHtml(d, n) + "</article>";
      const select = document.getElementById("compare-with");
      if (select) select.addEventListener("change", () => select.value && (location.hash = "#/compare/" + n + "/" + select.value));
      window.scrollTo(0, 0);
    }, failed);
  };

  mastif.showCompare = function (a, b) {
    const app = document.getElementById("app");
    app.innerHTML = '<p class="loading">Loading runs ' + a + " and " + b + "…</p>";
    Promise.all([mastif.loadRun(a), mastif.loadRun(b)]).then(function (pair) {
      app.innerHTML = '<nav class="crumbs"><a href="#/">← grid</a><a href="#/run/' + a + '">left run alone</a>' + compareSelect(a, b, "compare-right") + "</nav>" +
        '<div class="compare"><article class="run-page" data-run-id="' + esc(pair[0].run.run_id) + '">' + runHtml(pair[0], a) +
        '</article><article class="run-page" data-run-id="' + esc(pair[1].run.run_id) + '">' + runHtml(pair[1], b) + "</article></div>";
      const select = document.getElementById("compare-right");
      if (select) select.addEventListener("change", () => select.value && (location.hash = "#/compare/" + a + "/" + select.value));
      window.scrollTo(0, 0);
    }, failed);
  };
})();
