// Incidents page: histogram of detection time and time to recovery (uPlot bars), from the page's JSON.
window.consoleIncidentHistogram = function () {
  "use strict";
  var holder = document.getElementById("incident-histogram");
  var node = document.getElementById("incident-stats-data");
  if (!holder || !node || !window.uPlot) { return; }
  holder.textContent = "";  // redrawn after a live refresh
  var stats = JSON.parse(node.textContent);
  var bounds = stats.buckets_s;
  // One x slot per bucket: "≤5 s", "≤10 s", …, "> last".
  var labels = bounds.map(function (b) { return "≤ " + b + " s"; });
  labels.push("> " + bounds[bounds.length - 1] + " s");
  var xs = labels.map(function (_, i) { return i; });
  // Two bars per bucket: detection left of the slot centre, recovery right of it.
  var leftBars = uPlot.paths.bars({ size: [0.35, 48], align: -1 });
  var rightBars = uPlot.paths.bars({ size: [0.35, 48], align: 1 });
  var data = [xs, stats.detection.histogram, stats.mttr.histogram];
  var width = Math.max(320, holder.clientWidth || 720);
  var opts = {
    width: width,
    height: 240,
    scales: { x: { time: false, range: [-0.6, xs.length - 0.4] }, y: { range: function (u, min, max) { return [0, Math.max(1, max + 1)]; } } },
    axes: [
      { values: function (u, splits) { return splits.map(function (v) { return Number.isInteger(v) ? (labels[v] || "") : ""; }); }, incrs: [1] },
      { label: gettext("incidents"), incrs: [1, 2, 5, 10, 20, 50, 100] }
    ],
    series: [
      { label: gettext("duration"), value: function (u, v) { return v === null || v === undefined ? "--" : (labels[v] || ""); } },
      { label: gettext("detection"), fill: "rgba(37, 99, 235, 0.6)", stroke: "#2563eb", paths: leftBars, points: { show: false } },
      { label: gettext("time to recovery"), fill: "rgba(22, 163, 74, 0.6)", stroke: "#16a34a", paths: rightBars, points: { show: false } }
    ]
  };
  new uPlot(opts, data, holder);
};
window.consoleIncidentHistogram();

// Live: the banner's socket re-dispatches every alert.update as "console:alert-update"
// (alerts.js). Remediation writes each decision on its alert, so the incident page
// refetches itself when its alert changes, and the list when any alert does: pushed,
// never polled, and debounced so a burst of updates costs one request.
(function () {
  "use strict";
  var live = document.querySelector("[data-incident-live]");
  if (!live || !window.fetch || !window.DOMParser) { return; }
  var alertId = live.getAttribute("data-alert-id");  // empty on the list: any alert
  var wait = alertId ? 300 : 1000;
  var timer = null, busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live-part]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) { el.innerHTML = fresh.innerHTML; }
        });
        var stats = doc.getElementById("incident-stats-data");
        var mine = document.getElementById("incident-stats-data");
        if (stats && mine && mine.textContent !== stats.textContent) {
          mine.textContent = stats.textContent;
          window.consoleIncidentHistogram();
        }
        live.setAttribute("data-refreshed", String(Number(live.getAttribute("data-refreshed") || "0") + 1));
      })
      .catch(function () { /* the next update tries again */ })
      .then(function () { busy = false; if (again) { again = false; schedule(); } });
  }

  function schedule() { clearTimeout(timer); timer = setTimeout(refresh, wait); }

  document.addEventListener("console:alert-update", function (ev) {
    // id null: the alerts socket came back and re-listed; anything may have changed.
    if (!alertId || ev.detail.id === null || String(ev.detail.id) === alertId) { schedule(); }
  });
}());
