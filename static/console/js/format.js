// One formatter for times and one per unit, the twin of console/templatetags/consolefmt.py.
// Times: YYYY-MM-DD HH:MM:SS, 24-hour in every language, in the zone the page was rendered in
// (<html data-tz>, the user's zone: see console/timezones.py), never finer than seconds.
// Also tells the server the browser's zone (cookie console_tz) so the next page uses it.
(function () {
  "use strict";
  var root = document.documentElement;
  var browserTz = "";
  try { browserTz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { browserTz = ""; }
  var tz = root.getAttribute("data-tz") || browserTz || "UTC";
  // IANA names are cookie-safe as they are ("Asia/Shanghai", "Etc/GMT+8"); the server reads them unescaped.
  if (/^[A-Za-z0-9_+\-\/]{1,64}$/.test(browserTz) && document.cookie.indexOf("console_tz=" + browserTz) < 0) {
    document.cookie = "console_tz=" + browserTz + "; path=/; max-age=31536000; SameSite=Lax";
  }

  var parts;
  try {
    parts = new Intl.DateTimeFormat("en-CA", {
      timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit"
    });
  } catch (e) {
    parts = new Intl.DateTimeFormat("en-CA", { hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // epoch seconds, ISO text or a Date → its fields in the page's zone
  function fields(value) {
    var d = value instanceof Date ? value : typeof value === "number" ? new Date(value * 1000) : new Date(value);
    if (isNaN(d.getTime())) { return null; }
    var f = {};
    parts.formatToParts(d).forEach(function (p) { f[p.type] = p.value; });
    if (f.hour === "24") { f.hour = "00"; }
    return f;
  }

  function time(value) {
    if (value === null || value === undefined || value === "") { return "—"; }
    var f = fields(value);
    if (!f) { return String(value); }
    return f.year + "-" + f.month + "-" + f.day + " " + f.hour + ":" + f.minute + ":" + f.second;
  }

  // A chart axis tick: HH:MM (HH:MM:SS under 10 minutes of span), with MM-DD once the span passes a day.
  function axisTime(epoch, spanS) {
    var f = fields(epoch);
    if (!f) { return ""; }
    var clock = f.hour + ":" + f.minute + (spanS < 600 ? ":" + f.second : "");
    return spanS > 86400 ? f.month + "-" + f.day + " " + clock : clock;
  }

  function value(v, unit) {
    if (v === null || v === undefined || v === "" || isNaN(v)) { return "—"; }
    v = Number(v);
    unit = unit || "";
    if (unit === "°C") { return v.toFixed(0) + " °C"; }
    if (unit === "%") { return (Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(1)) + " %"; }  // link loss keeps 2 decimals
    if (unit === "ms") { return Math.abs(v) < 1000 ? v.toFixed(0) + " ms" : (v / 1000).toFixed(2) + " s"; }
    if (unit === "s") { return Math.abs(v) < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(2) + " s"; }
    if (unit === "W") { return v.toFixed(0) + " W"; }
    if (!unit) { return Number.isInteger(v) ? v.toFixed(0) : v.toFixed(2); }
    return v.toFixed(1) + " " + unit;
  }

  // 42 s · 1 min 13 s · 2 h 05 min (consolefmt.format_duration)
  function duration(seconds) {
    if (seconds === null || seconds === undefined || isNaN(seconds)) { return "—"; }
    var total = Math.max(0, Math.round(Number(seconds)));
    if (total < 60) { return total + " s"; }
    if (total < 3600) { return Math.floor(total / 60) + " min " + (total % 60) + " s"; }
    var m = Math.floor((total % 3600) / 60);
    return Math.floor(total / 3600) + " h " + (m < 10 ? "0" : "") + m + " min";
  }

  // Operational content (step names, engine states, operation kinds) in the reader's language,
  // from the page's #ops-catalog (console/opsmessages.py); unknown text stays as it is.
  var ops = null;
  function catalog() {
    if (ops === null) {
      var node = document.getElementById("ops-catalog");
      var raw = node ? JSON.parse(node.textContent) : { messages: [], engine: {}, kinds: {} };
      ops = { checks: raw.checks || {}, engine: raw.engine || {}, kinds: raw.kinds || {}, opStates: raw.op_states || {}, stepStates: raw.step_states || {}, clusterStates: raw.cluster_states || {}, messages: (raw.messages || []).map(function (m) {
        return [new RegExp(m[0].replace(/\(\?P</g, "(?<")), m[1]];
      }), byId: raw.by_id || {}, sentences: (raw.sentences || []).map(function (m) {
        return [new RegExp(m[0].replace(/\(\?P</g, "(?<"), "g"), m[1]];
      }) };
    }
    return ops;
  }
  function fillForm(form, params, each) {
    return form.replace(/\{(\w+)\}/g, function (_, name) { return name in params ? each(params[name]) : "{" + name + "}"; });
  }
  // Known sentences inside longer English prose, as console/opsmessages.prose.
  function prose(text) {
    var changed = text;
    catalog().sentences.forEach(function (s) {
      changed = changed.replace(s[0], function () {
        var groups = arguments[arguments.length - 1];
        return fillForm(s[1], typeof groups === "object" && groups ? groups : {}, String);
      });
    });
    return changed === text ? text : changed.replace(/([\u3001\u3002\uff08\uff09\uff0c\uff1a\uff1b]) /g, "$1");
  }
  // Stored text, a message {id, params} or a join {join, items}: as console/opsmessages.render.
  function msg(text) {
    if (text && typeof text === "object") {
      if ("join" in text) { return (text.items || []).map(msg).join(text.join); }
      var form = catalog().byId[text.id];
      if (form !== undefined) { return fillForm(form, text.params || {}, msg); }
      return "";
    }
    if (typeof text !== "string") { return text == null ? "" : String(text); }
    var list = catalog().messages;
    for (var i = 0; i < list.length; i++) {
      var m = list[i][0].exec(text);
      if (m) {
        var groups = m.groups || {};
        return list[i][1].replace(/\{(\w+)\}/g, function (_, name) { return name in groups ? msg(groups[name]) : "{" + name + "}"; });
      }
    }
    return prose(text);
  }
  // A preflight check's {name, evidence, fix} in the reader's language, by its id and
  // params (console/opschecks.py); a check without a known id keeps its stored text.
  function check(c) {
    var forms = (catalog().checks || {})[c.id];
    if (!forms) { return { name: c.name || "", evidence: c.evidence || "", fix: c.fix || "" }; }
    var params = Object.assign({}, c.params || {});
    Object.keys(c.parts || {}).forEach(function (k) { params[k] = msg(c.parts[k]); });
    function fill(form) {
      return form.replace(/\{(\w+)\}/g, function (_, name) { return name in params ? String(params[name]) : "{" + name + "}"; });
    }
    return { name: fill(forms[0]), evidence: fill(forms[1]), fix: fill(forms[2]) };
  }
  function engine(state) { return state ? (catalog().engine[state] || state) : "—"; }
  function kind(value) { return catalog().kinds[value] || value; }
  // A state code in the reader's language; `fallback` (the publisher's label) when unknown.
  function opState(code, fallback) { return catalog().opStates[code] || fallback || code; }
  function stepState(code, fallback) { return catalog().stepStates[code] || fallback || code; }
  function clusterState(code, fallback) { return catalog().clusterStates[code] || fallback || code; }

  window.consoleFormat = { tz: tz, time: time, axisTime: axisTime, value: value, duration: duration, msg: msg, check: check, engine: engine, kind: kind, opState: opState, stepState: stepState, clusterState: clusterState };
})();
