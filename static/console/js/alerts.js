// Alerts: the critical-alerts banner on every page and the live rows of /alerts/, from /ws/alerts/ (push, no polling).
(function () {
  "use strict";
  // Looked up on use: a re-list after a reconnect replaces these elements.
  function $(id) { return document.getElementById(id); }
  var STATES = { pending: gettext("Pending"), firing: gettext("Firing"), acknowledged: gettext("Acknowledged"), resolved: gettext("Resolved") };
  var SEVERITIES = { info: gettext("Info"), warning: gettext("Warning"), critical: gettext("Critical") };

  var fmtTime = consoleFormat.time;
  var unitsNode = document.getElementById("metric-units");
  var UNITS = unitsNode ? JSON.parse(unitsNode.textContent) : {};

  // The banner (critical and warning counts, red when any is critical) and the navigation's count.
  function setBanner(count, warnings) {
    var banner = $("alerts-banner");
    if (!banner || typeof count !== "number") { return; }
    warnings = typeof warnings === "number" ? warnings : Number(banner.getAttribute("data-warning") || "0");
    banner.setAttribute("data-count", String(count));
    banner.setAttribute("data-warning", String(warnings));
    $("alerts-banner-count").textContent = String(count);
    $("alerts-banner-warning").textContent = String(warnings);
    $("alerts-banner-critical-part").classList.toggle("hidden", count === 0);
    $("alerts-banner-warning-part").classList.toggle("hidden", warnings === 0);
    banner.classList.toggle("hidden", count === 0 && warnings === 0);
    banner.classList.toggle("is-warning", count === 0);
    var nav = $("nav-alerts-count");
    if (nav) {
      nav.textContent = String(count + warnings);
      nav.classList.toggle("hidden", count + warnings === 0);
      nav.classList.toggle("is-warning", count === 0);
    }
  }

  function cell(text) { var td = document.createElement("td"); td.textContent = text; return td; }

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function buildRow(a) {
    var tr = document.createElement("tr");
    tr.id = "alert-" + a.id;
    var sev = document.createElement("td"), sevBadge = document.createElement("span");
    sevBadge.className = "badge badge-" + a.severity; sevBadge.setAttribute("data-field", "severity");
    sev.appendChild(sevBadge); tr.appendChild(sev);
    var st = document.createElement("td"), stBadge = document.createElement("span");
    stBadge.setAttribute("data-field", "state"); st.appendChild(stBadge); tr.appendChild(st);
    var rule = document.createElement("td"), link = document.createElement("a");
    link.href = "/alerts/" + a.id + "/"; link.textContent = consoleFormat.msg(a.rule); rule.appendChild(link); tr.appendChild(rule);
    tr.appendChild(cell(a.target));
    var v = cell(""); v.setAttribute("data-field", "value"); tr.appendChild(v);
    tr.appendChild(cell(fmtTime(a.fault_onset_at)));
    var f = cell(""); f.setAttribute("data-field", "fired_at"); tr.appendChild(f);
    var ack = cell(""); ack.setAttribute("data-field", "acknowledged_by"); tr.appendChild(ack);
    var actions = document.createElement("td"); actions.className = "actions"; tr.appendChild(actions);
    return tr;
  }

  function fillRow(tr, a) {
    tr.setAttribute("data-state", a.state);
    var sev = tr.querySelector("[data-field=severity]");
    sev.textContent = SEVERITIES[a.severity] || a.severity;
    var st = tr.querySelector("[data-field=state]");
    st.textContent = STATES[a.state] || a.state; st.className = "badge state-" + a.state;
    var resolvedRow = a.state === "resolved";
    // A resolved alert shows how bad it got (its peak), not its last, recovered reading.
    var shown = resolvedRow && a.peak_value !== null && a.peak_value !== undefined ? a.peak_value : a.value;
    tr.querySelector("[data-field=value]").textContent = consoleFormat.value(shown, UNITS[a.metric]);
    tr.querySelector("[data-field=fired_at]").textContent = fmtTime(a.fired_at);
    var last = tr.querySelector("[data-field=acknowledged_by], [data-field=resolved_at]");
    last.setAttribute("data-field", resolvedRow ? "resolved_at" : "acknowledged_by");
    last.textContent = resolvedRow ? fmtTime(a.resolved_at) : (a.acknowledged_by || "");
    var actions = tr.querySelector(".actions");
    if (a.state !== "firing" || a.silenced) {
      var ackBtn = actions.querySelector("[data-action=ack]");
      if (ackBtn && a.state !== "firing") { ackBtn.closest("form").remove(); }
    } else if ($("alerts-active").getAttribute("data-can-ack") === "1" && !actions.querySelector("[data-action=ack]")) {
      var form = document.createElement("form");
      form.method = "post"; form.action = "/alerts/" + a.id + "/ack"; form.className = "inline";
      var token = document.createElement("input");
      token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrfToken();
      var btn = document.createElement("button");
      btn.type = "submit"; btn.setAttribute("data-action", "ack"); btn.textContent = gettext("Acknowledge");
      form.appendChild(token); form.appendChild(btn); actions.insertBefore(form, actions.firstChild);
    }
    if (a.state === "resolved") { actions.textContent = ""; }
  }

  function updateRow(a) {
    var active = $("alerts-active"), resolved = $("alerts-resolved");
    if (!active) { return; }
    var tr = document.getElementById("alert-" + a.id);
    if (!tr) { tr = buildRow(a); }
    fillRow(tr, a);
    var body = (a.state === "resolved" ? resolved : active).querySelector("tbody");
    if (tr.parentNode !== body) { body.insertBefore(tr, body.firstChild); }
    document.getElementById("alerts-none").classList.toggle("hidden", active.querySelector("tbody tr") !== null);
  }

  if (!$("alerts-banner") || !window.consoleLive) { return; }
  var listPage = !!$("alerts-active");
  window.consoleLive.open({
    path: "/ws/alerts/",
    onMessage: function (msg) {
      if (msg.type !== "alert.update") { return; }
      setBanner(msg.firing_critical, msg.firing_warning);
      updateRow(msg.alert);
      // Pages that follow an alert (an incident's page) listen for this instead of opening a socket of their own.
      document.dispatchEvent(new CustomEvent("console:alert-update", { detail: msg.alert }));
    },
    onState: function (state) {
      document.body.setAttribute("data-alerts-socket", state);
      if (listPage) { window.consoleLive.showState($("conn-state"), state); }
    },
    // After a drop: re-read the banner (every page) and the alert tables (this page).
    resync: function () {
      return window.consoleLive.refreshParts("alerts").then(function () {
        document.dispatchEvent(new CustomEvent("console:alert-update", { detail: { id: null } }));
      });
    }
  });
})();
