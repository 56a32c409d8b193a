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
  var NODE_CHARTS = { temp: { unit: "°C", fmt: "°C", threshold: th.temp_c }, hbm: { unit: "%", fmt: "%", threshold: th.hbm_pct },
                      power: { unit: "W", fmt: "W", threshold: null }, chiploss: { unit: "%", fmt: "%", threshold: th.hccs_loss_pct },
                      loss: { unit: "%", fmt: "%", threshold: th.hccs_loss_pct }, roce: { unit: gettext("ports"), fmt: "", threshold: null } };
  // Per-chip series of the node charts: chart id → index in a telemetry chip row / key in node_series.
  var CHIP_CHARTS = { temp: [2, "temp"], hbm: [3, "hbm"], power: [6, "power"], chiploss: [7, "chip_loss"] };
  // Threshold line captions: what crossing the line means (throughput's is a minimum).
  var LINE_LABELS = { queue: gettext("max running"), ttft: gettext("alert"), itl: gettext("alert"), tps: gettext("target ≥"),
                      kv: gettext("alert"), temp: gettext("alert"), hbm: gettext("alert"), chiploss: gettext("alert"), loss: gettext("alert") };
  var redrawMs = 0, redrawTimer = null, absWindow = null;

  // "NPU 3" (the heatmap's name), "NPU 3.1" only on multi-chip cards.
  function chipLabel(key) {
    var p = String(key).split(".");
    return interpolate(gettext("NPU %s"), [p[1] && p[1] !== "0" ? p[0] + "." + p[1] : p[0]]);
  }

  function thresholdPlugin(value, caption) {
    return { hooks: { draw: [function (u) {
      if (value === null || value === undefined) { return; }
      var y = u.valToPos(value, "y", true);
      if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) { return; }
      var ctx = u.ctx, dpr = window.devicePixelRatio || 1;
      ctx.save();
      ctx.strokeStyle = "#dc2626"; ctx.setLineDash([6, 4]); ctx.lineWidth = 1.5 * dpr;
      ctx.beginPath(); ctx.moveTo(u.bbox.left, y); ctx.lineTo(u.bbox.left + u.bbox.width, y); ctx.stroke();
      if (caption) {  // the line says what it is, at its right end
        ctx.setLineDash([]);
        ctx.fillStyle = "#dc2626"; ctx.font = (11 * dpr) + "px system-ui, sans-serif"; ctx.textAlign = "right";
        ctx.fillText(caption, u.bbox.left + u.bbox.width - 4 * dpr, y - 4 * dpr);
      }
      ctx.restore();
    }] } };
  }

  function makeChart(id, seriesLabels, unit, threshold, fmt) {
    var caption = threshold === null || threshold === undefined || !LINE_LABELS[id] ? "" :
      LINE_LABELS[id] + " " + consoleFormat.value(threshold, fmt === undefined ? unit : fmt);
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
        plugins: [thresholdPlugin(threshold, caption)],
        legend: { show: true },
        cursor: { drag: { x: true, y: false } },  // drag across a chart to zoom into that span
        hooks: { setSelect: [function (u) {
          if (u.select.width > 4) { chart.zoomed = true; document.getElementById("zoom-reset").hidden = false; }
        }] }
      };
      chart.plot = new window.uPlot(opts, data, holder);
      chart.fig.setAttribute("data-threshold-label", caption);
    }
    charts[id] = chart;
    return chart;
  }

  // New points are kept at once; drawing follows the refresh interval (every push by default).
  function refresh(chart) {
    if (redrawMs === 0) { draw(chart); } else { chart.dirty = true; }
  }

  // The newest index where some series has a value (a round may carry no value for a chart).
  function lastFilled(data) {
    for (var i = data[0].length - 1; i > 0; i--) {
      for (var k = 1; k < data.length; k++) { if (data[k][i] !== null && data[k][i] !== undefined) { return i; } }
    }
    return data[0].length - 1;
  }

  function draw(chart) {
    chart.dirty = false;
    var xs = chart.data[0];
    var cutoff = absWindow ? absWindow.from : Date.now() / 1000 - rangeS;
    var drop = 0;
    while (drop < xs.length && xs[drop] < cutoff) { drop++; }
    if (drop) { chart.data = chart.data.map(function (col) { return col.slice(drop); }); xs = chart.data[0]; }
    if (chart.plot) {
      chart.plot.setData(chart.data, !chart.zoomed);  // a zoomed chart keeps its span
      // Legends show the latest values, not "--", until the pointer picks another point.
      if (chart.plot.cursor.idx == null && xs.length) { chart.plot.setLegend({ idx: lastFilled(chart.data) }); }
    }
    chart.fig.setAttribute("data-points", String(chart.data[0].length));
    var hasValue = chart.data.slice(1).some(function (col) { return col.some(function (v) { return v !== null && v !== undefined; }); });
    var empty = chart.fig.querySelector(".chart-empty");
    if (hasValue) { empty.textContent = ""; chart.fig.classList.remove("is-empty"); return; }
    chart.fig.classList.add("is-empty");
    var nodeChart = ["chart-temp", "chart-hbm", "chart-power", "chart-chiploss", "chart-loss", "chart-roce"].indexOf(chart.fig.id) >= 0;
    if (nodeChart) {
      var links = chart.fig.id === "chart-loss" || chart.fig.id === "chart-chiploss";
      empty.textContent = links && xs.length ? gettext("no link traffic in this window yet") : gettext("no samples yet");
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
    Object.keys(CHIP_CHARTS).forEach(function (id) {
      makeChart(id, chips.map(chipLabel), NODE_CHARTS[id].unit, NODE_CHARTS[id].threshold, NODE_CHARTS[id].fmt);
      charts[id].chips = chips.slice();
    });
    makeChart("loss", [gettext("worst link")], NODE_CHARTS.loss.unit, NODE_CHARTS.loss.threshold, NODE_CHARTS.loss.fmt);
    makeChart("roce", [gettext("RoCE ports down")], NODE_CHARTS.roce.unit, NODE_CHARTS.roce.threshold, NODE_CHARTS.roce.fmt);
  }

  function loadHistory(since) {
    var win = absWindow ? "from=" + absWindow.from + "&to=" + absWindow.to : "range=" + encodeURIComponent(cfg.range);
    var url = cfg.seriesUrl + "?" + win + (selectedNode ? "&node=" + encodeURIComponent(selectedNode) : "") +
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
        var sets = { loss: [ns.t, ns.loss], roce: [ns.t, ns.roce_down || ns.t.map(function () { return null; })] };
        Object.keys(CHIP_CHARTS).forEach(function (id) {
          var cols = ns[CHIP_CHARTS[id][1]] || ns.chips.map(function () { return ns.t.map(function () { return null; }); });
          sets[id] = [ns.t].concat(cols);
        });
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
    Object.keys(CHIP_CHARTS).forEach(function (id) {
      var chart = charts[id], at = CHIP_CHARTS[id][0];
      chart.data[0].push(ts);
      chart.chips.forEach(function (key, i) { var c = byKey[key]; chart.data[i + 1].push(c && c[at] !== undefined ? c[at] : null); });
      refresh(chart);
    });
    var loss = charts.loss;
    loss.data[0].push(ts); loss.data[1].push(info.hccs_loss_pct);
    refresh(loss);
    var roce = charts.roce;
    roce.data[0].push(ts); roce.data[1].push(info.roce_down === undefined ? null : info.roce_down);
    refresh(roce);
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
    if (info.engine_state !== undefined) { document.getElementById("mon-engine-" + name).textContent = consoleFormat.engine(info.engine_state); }
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

  // Refresh interval: every push (live), or redraw at most every N s, or paused.
  var refreshSelect = document.getElementById("refresh-select");
  refreshSelect.addEventListener("change", function () {
    redrawMs = Number(refreshSelect.value);
    clearInterval(redrawTimer);
    redrawTimer = null;
    if (redrawMs > 0) {
      redrawTimer = setInterval(function () { Object.keys(charts).forEach(function (k) { if (charts[k].dirty) { draw(charts[k]); } }); }, redrawMs);
    } else if (redrawMs === 0) {
      Object.keys(charts).forEach(function (k) { draw(charts[k]); });
    }  // negative: paused, points are kept and drawn when un-paused
  });
  document.getElementById("zoom-reset").addEventListener("click", function () {
    Object.keys(charts).forEach(function (k) { charts[k].zoomed = false; draw(charts[k]); });
    document.getElementById("zoom-reset").hidden = true;
  });
  // Absolute range: local date-times in the user's browser → epoch seconds.
  document.getElementById("abs-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var from = Date.parse(document.getElementById("abs-from").value) / 1000;
    var to = Date.parse(document.getElementById("abs-to").value) / 1000;
    var err = document.getElementById("abs-error");
    if (!(from < to)) { err.hidden = false; err.textContent = gettext("Choose a start before the end."); return; }
    err.hidden = true;
    absWindow = { from: Math.floor(from), to: Math.ceil(to) };
    rangeS = absWindow.to - absWindow.from;
    document.getElementById("abs-live").hidden = false;
    document.getElementById("dashboard-mode").textContent = interpolate(gettext("%s – %s (live updates paused)"),
      [consoleFormat.time(absWindow.from), consoleFormat.time(absWindow.to)]);
    loadHistory(null);
  });
  document.getElementById("abs-live").addEventListener("click", function () {
    absWindow = null;
    rangeS = cfg.ranges[cfg.range];
    document.getElementById("abs-live").hidden = true;
    document.getElementById("dashboard-mode").textContent = "";
    loadHistory(null);
  });

  paintHeatmap();
  buildEngineCharts();
  buildNodeCharts([]);
  loadHistory(null);

  function onMessage(msg) {
    if (msg.type === "cluster.state") {
      cfg.clusterState = msg.state;
      var b = document.getElementById("cluster-state-" + cfg.cluster);
      if (b) { b.textContent = consoleFormat.clusterState(msg.state, msg.label); b.className = "badge badge-" + (msg.color || "grey"); }
      return;
    }
    if (msg.type !== "telemetry.update") { return; }
    Object.keys(msg.nodes || {}).forEach(function (name) { updateNode(name, msg.nodes[name]); });
    if (absWindow) { return; }  // an absolute window in the past does not move
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
