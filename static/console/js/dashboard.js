// Cluster dashboard: stored history from /series, live points from /ws/clusters/<id>/ (push, no polling).
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("dashboard-config").textContent);
  var th = cfg.thresholds;
  var rangeS = cfg.ranges[cfg.range];
  var selectedNode = cfg.nodes[0] || null;
  var lastTs = null;
  var heatMetric = "temp";
  var charts = {};
  var palette = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563",
                 "#65a30d", "#9333ea", "#ea580c", "#0d9488", "#be123c", "#1d4ed8", "#a16207", "#374151"];
  // State names translated in the viewer's language (events carry only the state code).
  var STATE_LABELS = { unknown: gettext("Unknown"), ready: gettext("Ready"), running: gettext("Running"), stale: gettext("Stale"),
                       unreachable: gettext("Unreachable"), out_of_service: gettext("Out of service") };
  var engineSeen = false;

  // --- charts -------------------------------------------------------------------------
  var ENGINE_CHARTS = {
    queue: { series: [["running", gettext("running")], ["waiting", gettext("waiting")]], unit: gettext("requests"), fmt: "", threshold: th.max_running },
    ttft: { series: [["ttft_p50", "p50"], ["ttft_p99", "p99"]], unit: "s", fmt: "s", threshold: th.p99_latency_s },
    itl: { series: [["itl_p50", "p50"], ["itl_p99", "p99"]], unit: "s", fmt: "s", threshold: th.itl_p99_s },
    tps: { series: [["gen_tps", gettext("generation")], ["prompt_tps", gettext("prompt")]], unit: gettext("tokens/s"), fmt: gettext("tokens/s"), threshold: th.min_gen_tps },
    kv: { series: [["kv_cache_pct", gettext("KV cache")]], unit: "%", fmt: "%", threshold: th.kv_cache_pct }
  };
  var NODE_CHARTS = { temp: { unit: "°C", fmt: "°C", threshold: th.temp_c }, hbm: { unit: "%", fmt: "%", threshold: th.hbm_pct }, loss: { unit: "%", fmt: "%", threshold: th.hccs_loss_pct } };

  function thresholdPlugin(value) {
    return { hooks: { draw: [function (u) {
      if (value === null || value === undefined) { return; }
      var y = u.valToPos(value, "y", true);
      if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) { return; }
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "#dc2626"; ctx.setLineDash([6, 4]); ctx.lineWidth = 1.5 * (window.devicePixelRatio || 1);
      ctx.beginPath(); ctx.moveTo(u.bbox.left, y); ctx.lineTo(u.bbox.left + u.bbox.width, y); ctx.stroke();
      ctx.restore();
    }] } };
  }

  function makeChart(id, seriesLabels, unit, threshold, fmt) {
    var fig = document.getElementById("chart-" + id);
    var holder = fig.querySelector(".plot");
    holder.innerHTML = "";
    var data = [[]];
    // x: the one time format (24-hour, the user's zone, seconds at most), labelled in the page's language
    var series = [{ label: gettext("Time"), value: function (u, v) { return v === null || v === undefined ? "" : consoleFormat.time(v); } }];
    seriesLabels.forEach(function (label, i) {
      data.push([]);
      series.push({ label: label, stroke: palette[i % palette.length], width: 1.5, spanGaps: false,
                    value: function (u, v) { return consoleFormat.value(v, fmt === undefined ? unit : fmt); } });
    });
    var chart = { fig: fig, data: data, plot: null, unit: unit };
    if (window.uPlot) {
      var opts = {
        width: Math.max(280, holder.clientWidth || 420), height: 200,
        series: series,
        scales: { x: { time: true }, y: { range: function (u, min, max) {
          var hi = Math.max(max === null ? 1 : max, threshold || 0) * 1.1;
          return [Math.min(0, min === null ? 0 : min), hi || 1];
        } } },
        axes: [
          { values: function (u, splits) {
            var span = (u.scales.x.max || 0) - (u.scales.x.min || 0);
            return splits.map(function (v) { return consoleFormat.axisTime(v, span); });
          } },
          { label: unit, size: 60 }
        ],
        plugins: [thresholdPlugin(threshold)],
        legend: { show: true }
      };
      chart.plot = new window.uPlot(opts, data, holder);
    }
    charts[id] = chart;
    return chart;
  }

  function refresh(chart) {
    var xs = chart.data[0];
    var cutoff = Date.now() / 1000 - rangeS;
    var drop = 0;
    while (drop < xs.length && xs[drop] < cutoff) { drop++; }
    if (drop) { chart.data = chart.data.map(function (col) { return col.slice(drop); }); }
    if (chart.plot) { chart.plot.setData(chart.data); }
    chart.fig.setAttribute("data-points", String(chart.data[0].length));
    var hasValue = chart.data.slice(1).some(function (col) { return col.some(function (v) { return v !== null && v !== undefined; }); });
    var empty = chart.fig.querySelector(".chart-empty");
    if (hasValue) { empty.textContent = ""; chart.fig.classList.remove("is-empty"); return; }
    chart.fig.classList.add("is-empty");
    if (chart.fig.id.indexOf("chart-temp") === 0 || chart.fig.id === "chart-hbm" || chart.fig.id === "chart-loss") {
      empty.textContent = chart.fig.id === "chart-loss" && xs.length ? gettext("no link traffic in this window yet") : gettext("no samples yet");
    } else {
      if (engineSeen) { empty.textContent = gettext("no requests finished in this window"); }
      else { empty.textContent = cfg.clusterState === "stopped" ? gettext("cluster stopped") : gettext("no samples yet"); }
    }
  }

  function buildEngineCharts() {
    Object.keys(ENGINE_CHARTS).forEach(function (id) {
      var spec = ENGINE_CHARTS[id];
      makeChart(id, spec.series.map(function (s) { return s[1]; }), spec.unit, spec.threshold, spec.fmt);
    });
  }

  function buildNodeCharts(chips) {
    ["temp", "hbm"].forEach(function (id) {
      makeChart(id, chips.map(function (c) { return interpolate(gettext("chip %s"), [c]); }), NODE_CHARTS[id].unit, NODE_CHARTS[id].threshold, NODE_CHARTS[id].fmt);
      charts[id].chips = chips.slice();
    });
    makeChart("loss", [gettext("worst link")], NODE_CHARTS.loss.unit, NODE_CHARTS.loss.threshold, NODE_CHARTS.loss.fmt);
  }

  function loadHistory(since) {
    var url = cfg.seriesUrl + "?range=" + encodeURIComponent(cfg.range) + (selectedNode ? "&node=" + encodeURIComponent(selectedNode) : "") +
      (since ? "&since=" + since : "");
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.json();
    }).then(function (win) {
      var eng = win.engine;
      if (eng.running.some(function (v) { return v !== null; })) { engineSeen = true; }
      Object.keys(ENGINE_CHARTS).forEach(function (id) {
        var chart = charts[id];
        var cols = [eng.t].concat(ENGINE_CHARTS[id].series.map(function (s) { return eng[s[0]]; }));
        if (since) { cols.forEach(function (col, i) { chart.data[i] = chart.data[i].concat(col); }); } else { chart.data = cols; }
        refresh(chart);
      });
      var ns = win.node_series;
      if (ns) {
        if (!since || !charts.temp || charts.temp.chips.join() !== ns.chips.join()) {
          if (!since || ns.chips.length) { buildNodeCharts(ns.chips); }
        }
        var sets = { temp: [ns.t].concat(ns.temp), hbm: [ns.t].concat(ns.hbm), loss: [ns.t, ns.loss] };
        Object.keys(sets).forEach(function (id) {
          var chart = charts[id];
          if (since) { sets[id].forEach(function (col, i) { if (chart.data[i]) { chart.data[i] = chart.data[i].concat(col); } }); } else { chart.data = sets[id]; }
          refresh(chart);
        });
      }
      var times = eng.t.concat(ns ? ns.t : []);
      if (times.length) { lastTs = Math.max(lastTs || 0, Math.max.apply(null, times)); }
    }).catch(function (err) {
      document.getElementById("conn-state").textContent = interpolate(gettext("History unavailable: %s"), [err.message]);
    });
  }

  function appendEngine(ts, eng) {
    Object.keys(ENGINE_CHARTS).forEach(function (id) {
      var chart = charts[id];
      chart.data[0].push(ts);
      ENGINE_CHARTS[id].series.forEach(function (s, i) { chart.data[i + 1].push(eng ? eng[s[0]] : null); });
      refresh(chart);
    });
  }

  function appendNode(ts, info) {
    if (!info || !info.chips || !charts.temp) { return; }
    var byKey = {};
    info.chips.forEach(function (c) { byKey[c[0] + "." + c[1]] = c; });
    if (!charts.temp.chips.length && info.chips.length) {
      buildNodeCharts(info.chips.map(function (c) { return c[0] + "." + c[1]; }));
    }
    [["temp", 2], ["hbm", 3]].forEach(function (pair) {
      var chart = charts[pair[0]];
      chart.data[0].push(ts);
      chart.chips.forEach(function (key, i) { var c = byKey[key]; chart.data[i + 1].push(c ? c[pair[1]] : null); });
      refresh(chart);
    });
    var loss = charts.loss;
    loss.data[0].push(ts); loss.data[1].push(info.hccs_loss_pct);
    refresh(loss);
  }

  // --- heatmap and node cards ----------------------------------------------------------------
  function heatClass(metric, value) {
    if (value === null || value === undefined || value === "" || isNaN(value)) { return "heat-na"; }
    var limit = metric === "temp" ? th.temp_c : metric === "hbm" ? th.hbm_pct : null;
    if (limit === null) { return value >= 80 ? "heat-3" : value >= 40 ? "heat-2" : value > 0 ? "heat-1" : "heat-0"; }
    if (value > limit) { return "heat-crit"; }
    if (value >= limit * 0.9) { return "heat-warn"; }
    return value >= limit * 0.6 ? "heat-2" : "heat-1";
  }

  function paintCell(td) {
    var raw = td.getAttribute("data-" + heatMetric);
    var value = raw === "" || raw === null ? null : parseFloat(raw);
    td.className = "heat-cell " + heatClass(heatMetric, value);
    td.textContent = value === null ? "—" : (heatMetric === "temp" ? value.toFixed(0) : value.toFixed(1));
    if (td.getAttribute("data-health") && td.getAttribute("data-health") !== "OK") { td.classList.add("heat-unhealthy"); }
  }

  function paintHeatmap() { document.querySelectorAll("#heatmap td.heat-cell").forEach(paintCell); }

  function updateHeatRow(name, chips) {
    var row = document.getElementById("heat-row-" + name);
    if (!row || !chips) { return; }
    var empty = row.querySelector(".heat-empty");
    if (empty) { empty.remove(); }
    chips.forEach(function (c) {
      var id = "heat-" + name + "-" + c[0] + "-" + c[1];
      var td = document.getElementById(id);
      if (!td) { td = document.createElement("td"); td.id = id; row.appendChild(td); }
      td.setAttribute("data-temp", c[2] === null ? "" : c[2]);
      td.setAttribute("data-hbm", c[3] === null ? "" : c[3]);
      td.setAttribute("data-aicore", c[4] === null ? "" : c[4]);
      td.setAttribute("data-health", c[5] || "");
      paintCell(td);
    });
  }

  function fmtTime(epoch) { return epoch ? consoleFormat.time(epoch) : gettext("never"); }

  function updateNode(name, info) {
    var card = document.getElementById("mon-node-" + name);
    if (!card) { return; }
    var stale = info.state === "stale" || info.state === "unreachable";
    card.className = "node-card state-" + info.state + (stale ? " is-stale" : "");
    var row = document.getElementById("heat-row-" + name);
    if (row) { row.classList.toggle("is-stale", stale); }
    var badge = document.getElementById("mon-state-" + name);
    if (badge) { badge.textContent = STATE_LABELS[info.state] || info.state; badge.className = "badge badge-" + (info.color || "grey"); }
    var seen = document.getElementById("mon-seen-" + name);
    if (seen) { seen.textContent = (stale ? gettext("last seen") + " " : "") + fmtTime(info.last_seen); }
    if (info.engine_state !== undefined) { document.getElementById("mon-engine-" + name).textContent = info.engine_state || "—"; }
    if (info.hccs_loss_pct !== undefined) {
      document.getElementById("mon-loss-" + name).textContent = consoleFormat.value(info.hccs_loss_pct, "%");
    }
    updateHeatRow(name, info.chips);
  }

  // --- wiring ------------------------------------------------------------------------------------
  document.querySelectorAll("[data-heat]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      heatMetric = btn.getAttribute("data-heat");
      document.getElementById("heatmap").setAttribute("data-metric", heatMetric);
      document.querySelectorAll("[data-heat]").forEach(function (b) { b.classList.toggle("active", b === btn); });
      paintHeatmap();
    });
  });
  var rangeSelect = document.getElementById("range-select");
  rangeSelect.addEventListener("change", function () {
    cfg.range = rangeSelect.value; rangeS = cfg.ranges[cfg.range];
    history.replaceState(null, "", "?range=" + encodeURIComponent(cfg.range));
    loadHistory(null);
  });
  var nodeSelect = document.getElementById("node-select");
  if (nodeSelect) {
    nodeSelect.addEventListener("change", function () { selectedNode = nodeSelect.value; loadHistory(null); });
  }

  paintHeatmap();
  buildEngineCharts();
  buildNodeCharts([]);
  loadHistory(null);

  function onMessage(msg) {
    if (msg.type === "cluster.state") {
      cfg.clusterState = msg.state;
      var b = document.getElementById("cluster-state-" + cfg.cluster);
      if (b) { b.textContent = msg.label || msg.state; b.className = "badge badge-" + (msg.color || "grey"); }
      return;
    }
    if (msg.type !== "telemetry.update") { return; }
    Object.keys(msg.nodes || {}).forEach(function (name) { updateNode(name, msg.nodes[name]); });
    if (lastTs !== null && msg.ts <= lastTs) { return; }  // already in the backfilled history
    lastTs = msg.ts;
    if (msg.engine) { engineSeen = true; }
    appendEngine(msg.ts, msg.engine || null);
    if (selectedNode && msg.nodes) { appendNode(msg.ts, msg.nodes[selectedNode]); }
  }

  window.consoleLive.open({
    path: "/ws/clusters/" + cfg.cluster + "/",
    onMessage: onMessage,
    onState: function (state) { window.consoleLive.showState(document.getElementById("conn-state"), state); },
    // Back after a drop: the cluster's state badge, then the points missed meanwhile (live
    // points held during the backfill are replayed after it; older ones are skipped by ts).
    resync: function () {
      return window.consoleLive.refreshParts("dashboard").then(function () { return loadHistory(lastTs); });
    }
  });
})();
