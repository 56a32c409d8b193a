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
      '<ul class="step-diagnosis"></ul><table class="table preflight small step-checks" hidden><tbody></tbody></table><details class="step-log" hidden><summary></summary><pre></pre></details>';
    text(row.querySelector("summary"), gettext("Log tail"));
    document.getElementById("steps").appendChild(row);
    return row;
  }

  var BADGES = { pass: "green", warn: "orange", fail: "red" };

  // A node's preflight checks, as soon as its agent answers (pass / warn / fail, evidence, fix).
  function renderChecks(table, checks) {
    if (!table || !checks || !checks.length) { return; }
    var body = table.querySelector("tbody");
    body.innerHTML = "";
    checks.forEach(function (c) {
      var tr = document.createElement("tr");
      tr.className = "check-" + c.status;
      var badge = document.createElement("span");
      badge.className = "badge badge-" + (BADGES[c.status] || "red");
      badge.textContent = c.status;
      [c.name, badge, c.evidence, c.fix].forEach(function (v) {
        var td = document.createElement("td");
        if (typeof v === "string" || v == null) { td.textContent = v || ""; } else { td.appendChild(v); }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.hidden = false;
  }

  function renderStep(step) {
    var row = stepRow(step);
    row.className = "step step-" + step.state;
    var badge = row.querySelector(".step-state");
    badge.className = "badge step-state badge-" + step.color;
    text(badge, step.state_label);
    text(row.querySelector(".step-name"), step.name);
    text(row.querySelector(".step-elapsed"), step.elapsed_s != null ? step.elapsed_s.toFixed(1) + " s" : "");
    text(row.querySelector(".step-summary"), step.summary);
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
    var logEl = row.querySelector(".step-log");
    if (step.log_tail) { logEl.hidden = false; text(logEl.querySelector("pre"), step.log_tail); }
  }

  function onProgress(msg) {
    if (msg.type !== "operation.progress") { return; }
    var badge = document.getElementById("op-state");
    badge.className = "badge badge-" + msg.color;
    text(badge, msg.state_label);
    if (msg.step) { renderStep(msg.step); }
    var p = msg.progress || [0, 0];
    document.getElementById("op-progress").style.width = (p[1] ? Math.round(100 * p[0] / p[1]) : 0) + "%";
    text(document.getElementById("op-progress-text"), p[0] + "/" + p[1]);
    if (msg.duration_s != null) { text(document.getElementById("op-duration"), msg.duration_s.toFixed(1) + " s"); }
    var err = document.getElementById("op-error");
    if (msg.error) { err.hidden = false; text(err, msg.error); }
    if (["succeeded", "failed", "cancelled", "interrupted"].indexOf(msg.state) >= 0) {
      var cancel = document.getElementById("cancel-form");
      if (cancel) { cancel.remove(); }
    }
  }

  // Re-list on every (re)connect, the first one included: whatever happened between the
  // page render (or the drop) and the socket opening is read from the server, then the
  // events held meanwhile are replayed on top.
  window.consoleLive.open({
    path: "/ws/operations/" + id + "/",
    onMessage: onProgress,
    onState: function (state) { window.consoleLive.showState(conn, state); },
    resync: function () { return window.consoleLive.refreshParts("operation"); },
    resyncFirst: true
  });
})();
