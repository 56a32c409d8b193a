// Operation page: steps arrive over /ws/operations/<id>/ and update in place (no polling).
(function () {
  "use strict";
  var root = document.getElementById("operation");
  if (!root) { return; }
  var id = root.getAttribute("data-operation-id");
  var conn = document.getElementById("op-conn");

  function text(el, value) { if (el) { el.textContent = value == null ? "" : value; } }

  function stepRow(step) {
    var row = document.getElementById("step-" + step.seq);
    if (row) { return row; }
    row = document.createElement("li");
    row.id = "step-" + step.seq;
    row.setAttribute("data-seq", step.seq);
    row.innerHTML = '<span class="badge step-state"></span> <strong class="step-name"></strong> <span class="step-elapsed muted"></span>' +
      '<div class="step-summary"></div><div class="progress small step-progress" hidden><div class="progress-bar"></div></div>' +
      '<ul class="step-diagnosis"></ul><div class="step-checks" hidden><table class="table preflight small step-problems" hidden><tbody></tbody></table>' +
      '<details class="step-passed" hidden><summary></summary><table class="table preflight small"><tbody></tbody></table></details></div>' +
      '<details class="step-log" hidden><summary></summary><pre></pre></details>';
    text(row.querySelector(".step-log summary"), gettext("Log tail"));
    document.getElementById("steps").appendChild(row);
    return row;
  }

  var BADGES = { pass: "green", warn: "orange", fail: "red" };

  var STATUS = { pass: gettext("Pass"), warn: gettext("Warning"), fail: gettext("Fail") };

  function checkRow(c) {
    var tr = document.createElement("tr");
    tr.className = "check-" + c.status;
    var badge = document.createElement("span");
    badge.className = "badge badge-" + (BADGES[c.status] || "red");
    badge.textContent = STATUS[c.status] || c.status;
    var t = consoleFormat.check(c);
    [t.name, badge, t.evidence, t.fix].forEach(function (v) {
      var td = document.createElement("td");
      if (typeof v === "string" || v == null) { td.textContent = v || ""; } else { td.appendChild(v); }
      tr.appendChild(td);
    });
    return tr;
  }

  // A node's preflight checks, as soon as its agent answers: problems first (fail, then
  // warn) and open, the passes folded under one line (as console/views/progress.check_groups).
  function renderChecks(box, checks) {
    if (!box || !checks || !checks.length) { return; }
    var order = { fail: 0, warn: 1 };
    var problems = checks.filter(function (c) { return c.status !== "pass"; })
      .sort(function (a, b) { return (order[a.status] || 0) - (order[b.status] || 0); });
    var passed = checks.filter(function (c) { return c.status === "pass"; });
    var table = box.querySelector(".step-problems");
    var body = table.querySelector("tbody");
    body.innerHTML = "";
    problems.forEach(function (c) { body.appendChild(checkRow(c)); });
    table.hidden = !problems.length;
    var fold = box.querySelector(".step-passed");
    var passBody = fold.querySelector("tbody");
    passBody.innerHTML = "";
    passed.forEach(function (c) { passBody.appendChild(checkRow(c)); });
    text(fold.querySelector("summary"), interpolate(ngettext("%s check passed", "%s checks passed", passed.length), [passed.length]));
    fold.hidden = !passed.length;
    box.hidden = false;
  }

  // A step's summary in the reader's language, as console/views/operations.py: a failed
  // preflight step names its failing checks; else the stored message (or English text).
  function summaryText(step) {
    var failed = step.state === "failed" ? ((step.data || {}).checks || []).filter(function (c) { return c.status === "fail"; }) : [];
    if (failed.length) {
      return failed.map(function (c) { var t = consoleFormat.check(c); return t.name + ": " + t.evidence; }).join("; ");
    }
    return consoleFormat.msg((step.data || {}).summary_msg || step.summary);
  }

  // The last pushed state of each step: an operation's error names the step that failed.
  var shown = {};
  // "{step}: {summary}" of the failed step in the reader's language (opsmessages.operation_error).
  function errorText(error) {
    var seqs = Object.keys(shown);
    for (var i = 0; i < seqs.length; i++) {
      var st = shown[seqs[i]];
      if (st.state === "failed" && error === st.name + ": " + st.summary) {
        var summary = summaryText(st);  // a placeholder keeps it from being read as a message again
        return consoleFormat.msg({ id: "op.step_error", params: { step: st.name, summary: "\u0000" } }).replace("\u0000", function () { return summary; });
      }
    }
    return consoleFormat.msg(error);
  }

  function renderStep(step) {
    var row = stepRow(step);
    row.className = "step step-" + step.state;
    var badge = row.querySelector(".step-state");
    badge.className = "badge step-state badge-" + step.color;
    text(badge, consoleFormat.stepState(step.state, step.state_label));
    text(row.querySelector(".step-name"), consoleFormat.msg(step.name));
    text(row.querySelector(".step-elapsed"), step.elapsed_s != null ? consoleFormat.duration(step.elapsed_s) : "");
    text(row.querySelector(".step-summary"), summaryText(step));
    var bar = row.querySelector(".step-progress");
    if (step.progress && step.progress[1]) {
      bar.hidden = false;
      bar.firstElementChild.style.width = Math.round(100 * step.progress[0] / step.progress[1]) + "%";
    }
    var diag = row.querySelector(".step-diagnosis");
    diag.innerHTML = "";
    (step.diagnosis || []).forEach(function (d) {
      var li = document.createElement("li");
      var strong = document.createElement("strong");
      strong.textContent = d.cause;
      li.appendChild(strong);
      li.appendChild(document.createTextNode(" → " + d.fix + " "));
      var code = document.createElement("code");
      code.textContent = d.evidence;
      li.appendChild(code);
      diag.appendChild(li);
    });
    renderChecks(row.querySelector(".step-checks"), (step.data || {}).checks);
    shown[step.seq] = step;
    var logEl = row.querySelector(".step-log");
    if (step.log_tail) { logEl.hidden = false; text(logEl.querySelector("pre"), step.log_tail); }
  }

  // --- progress weighted by the last runs' step durations (console/views/progress.py) ---
  var FINISHED = ["succeeded", "failed", "cancelled", "interrupted"];
  var expected = {}, steps = {}, opState = null, startedAt = null, finishedAt = null;

  function readServerState() {  // the page's JSON, after the first render and after every re-list
    var e = document.getElementById("op-expected"), s = document.getElementById("op-steps");
    expected = e ? JSON.parse(e.textContent) : {};
    steps = s ? JSON.parse(s.textContent) : {};
    var d = document.getElementById("op-duration");
    startedAt = d && d.getAttribute("data-started") ? Date.parse(d.getAttribute("data-started")) : null;
    finishedAt = d && d.getAttribute("data-finished") ? Date.parse(d.getAttribute("data-finished")) : null;
  }

  function weighted(now) {
    var names = Object.keys(expected);
    var fallback = names.length ? names.reduce(function (a, n) { return a + expected[n]; }, 0) / names.length : 1;
    var seen = {}, total = 0, done = 0, left = 0;
    Object.keys(steps).forEach(function (seq) {
      var st = steps[seq], w = expected[st.name] !== undefined ? expected[st.name] : fallback;
      seen[st.name] = true;
      total += w;
      if (st.state !== "pending" && st.state !== "running") { done += w; }
      else if (st.state === "running" && st.started_at) {
        var el = (now - Date.parse(st.started_at)) / 1000;
        done += Math.min(el, w * 0.95);
        left += Math.max(w - el, 0);
      } else { left += w; }
    });
    names.forEach(function (n) { if (!seen[n]) { total += expected[n]; left += expected[n]; } });
    return [total ? Math.min(done / total, 1) : 0, names.length ? left : null];
  }

  function drawProgress() {
    var now = Date.now();
    var finished = FINISHED.indexOf(opState) >= 0 || finishedAt !== null;
    var w = weighted(now);
    var pct = finished && opState === "succeeded" ? 100 : Math.round(100 * w[0]);
    var bar = document.getElementById("op-progress");
    if (bar) { bar.style.width = pct + "%"; bar.setAttribute("data-percent", String(pct)); }
    var dur = document.getElementById("op-duration");
    if (dur && startedAt) { text(dur, consoleFormat.duration(((finishedAt || now) - startedAt) / 1000)); }
    var etaPart = document.getElementById("op-eta-part");
    if (etaPart) {
      etaPart.hidden = finished || w[1] === null;
      if (!etaPart.hidden) { text(document.getElementById("op-eta"), consoleFormat.duration(w[1])); }
    }
  }

  function onProgress(msg) {
    if (msg.type !== "operation.progress") { return; }
    var badge = document.getElementById("op-state");
    badge.className = "badge badge-" + msg.color;
    text(badge, consoleFormat.opState(msg.state, msg.state_label));
    if (msg.step) {
      renderStep(msg.step);
      steps[msg.step.seq] = { name: msg.step.name, state: msg.step.state, started_at: msg.step.started_at };
    }
    opState = msg.state;
    var p = msg.progress || [0, 0];
    text(document.getElementById("op-progress-text"), p[0] + "/" + p[1]);
    if (FINISHED.indexOf(msg.state) >= 0 && !finishedAt) {
      finishedAt = startedAt && msg.duration_s != null ? startedAt + msg.duration_s * 1000 : Date.now();
    }
    drawProgress();
    var err = document.getElementById("op-error");
    if (msg.error) { err.hidden = false; text(err, errorText(msg.error)); }
    if (["succeeded", "failed", "cancelled", "interrupted"].indexOf(msg.state) >= 0) {
      var cancel = document.getElementById("cancel-form");
      if (cancel) { cancel.remove(); }
    }
  }

  // Re-list on every (re)connect, the first one included: whatever happened between the
  // page render (or the drop) and the socket opening is read from the server, then the
  // events held meanwhile are replayed on top.
  readServerState();
  drawProgress();
  document.addEventListener("console:refreshed", function (ev) {
    if (ev.detail.group === "operation") { readServerState(); drawProgress(); }
  });
  // The clock only: elapsed and ETA move between events (nothing is fetched).
  setInterval(function () { if (finishedAt === null) { drawProgress(); } }, 1000);

  window.consoleLive.open({
    path: "/ws/operations/" + id + "/",
    onMessage: onProgress,
    onState: function (state) { window.consoleLive.showState(conn, state); },
    resync: function () { return window.consoleLive.refreshParts("operation"); },
    resyncFirst: true
  });
})();
