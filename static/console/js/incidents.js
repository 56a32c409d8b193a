// Incidents page: histogram of detection time and time to recovery (uPlot bars), from the page's JSON.
(function () {
  "use strict";
  var holder = document.getElementById("incident-histogram");
  var node = document.getElementById("incident-stats-data");
  if (!holder || !node || !window.uPlot) { return; }
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
}());
