// Benchmarks pages: open a sweep's points on the list; draw a sweep's charts (uPlot) from the
// page's #bench-chart-data (the server's json_script). Numbers through consoleFormat.
(function () {
  "use strict";

  // --- list: a sweep row opens and closes its points ---------------------------------------------
  document.querySelectorAll(".sweep-toggle").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var open = btn.getAttribute("aria-expanded") !== "true";
      btn.setAttribute("aria-expanded", open ? "true" : "false");
      btn.textContent = open ? "▾" : "▸";
      btn.title = open ? gettext("Hide the points of this sweep") : gettext("Show the points of this sweep");
      var body = btn.closest("tbody");
      body.querySelectorAll("tr.sweep-point").forEach(function (tr) { tr.hidden = !open; });
    });
  });

  // --- sweep charts ----------------------------------------------------------------------------
  var node = document.getElementById("bench-chart-data");
  if (!node || !window.uPlot) { return; }
  var data = JSON.parse(node.textContent);
  var P50 = "#2563eb", P99 = "#dc2626", TPS = "#16a34a";
  var byRate = data.x_kind === "rate";
  var xLabel = byRate ? gettext("request rate (req/s)") : gettext("max concurrency");

  function fmtX(v) { return byRate ? consoleFormat.value(v, "req/s") : consoleFormat.value(v, ""); }

  function series(label, color, unit) {
    return {
      label: label, stroke: color, width: 2, points: { show: true, size: 7, fill: color },
      value: function (u, v) { return v === null || v === undefined ? "—" : consoleFormat.value(v, unit); }
    };
  }

  function draw(id, cols, xName, xFmt, ys, yUnit) {
    var fig = document.getElementById(id);
    var holder = fig.querySelector(".plot");
    var points = cols[0].length;
    fig.setAttribute("data-points", String(points));
    var hasValue = cols.slice(1).some(function (col) { return col.some(function (v) { return v !== null && v !== undefined; }); });
    if (!hasValue) {
      fig.classList.add("is-empty");
      fig.querySelector(".chart-empty").textContent = gettext("no points with this figure");
      return;
    }
    var opts = {
      width: Math.max(360, holder.clientWidth || 480),
      height: 260,
      scales: { x: { time: false } },
      series: [{ label: xName, value: function (u, v) { return v === null || v === undefined ? "—" : xFmt(v); } }].concat(ys),
      axes: [
        { label: xName, values: function (u, splits) { return splits.map(xFmt); } },
        // plain ticks in the axis' unit (a close range of ms would round to repeated whole ms)
        { label: yUnit, size: 70, values: function (u, splits) { return splits.map(function (v) { return consoleFormat.value(v, ""); }); } }
      ],
      legend: { show: true },
      cursor: { drag: { x: false, y: false } }
    };
    // the legend shows the highest-load point until the pointer picks another (after the first draw)
    opts.hooks = { ready: [function (u) { u.setLegend({ idx: points - 1 }); }] };
    new window.uPlot(opts, cols, holder);
  }

  var load = data.load;
  [["chart-ttft", "ttft"], ["chart-tpot", "tpot"], ["chart-itl", "itl"]].forEach(function (c) {
    draw(c[0], [load.x, load["p50_" + c[1]], load["p99_" + c[1]]], xLabel, fmtX,
      [series("p50", P50, "ms"), series("p99", P99, "ms")], "ms");
  });
  draw("chart-throughput", [load.x, load.output_throughput], xLabel, fmtX,
    [series(gettext("output tok/s"), TPS, "tok/s")], "tok/s");
  var lat = data.latency;
  draw("chart-tradeoff", [lat.x, lat.output_throughput], gettext("P99 E2E latency"),
    function (v) { return consoleFormat.value(v, "ms"); },
    [series(gettext("output tok/s"), TPS, "tok/s")], "tok/s");
})();
