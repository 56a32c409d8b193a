// Overview: one socket per cluster card; state badges update when events arrive.
(function () {
  "use strict";
  var labels = { connecting: gettext("Connecting…"), live: gettext("Live"), reconnecting: gettext("Reconnecting…"), forbidden: gettext("No access") };
  var stateLabels = { unknown: gettext("Unknown"), ready: gettext("Ready"), running: gettext("Running"), stale: gettext("Stale"),
                      unreachable: gettext("Unreachable"), out_of_service: gettext("Out of service") };
  function maxOf(chips, index) {
    var best = null;
    (chips || []).forEach(function (c) { if (c[index] !== null && (best === null || c[index] > best)) { best = c[index]; } });
    return best;
  }
  // One node's part of a telemetry.update: state badge, hottest chip, fullest HBM, last seen (ids are stable).
  function updateNodeTelemetry(name, info) {
    var card = document.getElementById("node-" + name);
    if (card) { card.className = "node-card state-" + info.state; }
    var nb = document.getElementById("node-state-" + name);
    if (nb) { nb.textContent = stateLabels[info.state] || info.state; nb.className = "badge badge-" + (info.color || "grey"); }
    var seen = document.getElementById("node-seen-" + name);
    if (seen && info.last_seen) { seen.textContent = new Date(info.last_seen * 1000).toLocaleString(); }
    if (!info.chips) { return; }
    var temp = maxOf(info.chips, 2), hbm = maxOf(info.chips, 3);
    var t = document.getElementById("node-temp-" + name);
    if (t) { t.textContent = temp === null ? "—" : temp.toFixed(0) + " °C"; }
    var h = document.getElementById("node-hbm-" + name);
    if (h) { h.textContent = hbm === null ? "—" : hbm.toFixed(1) + " %"; }
  }
  document.querySelectorAll("section.cluster[data-cluster-id]").forEach(function (card) {
    var id = card.getAttribute("data-cluster-id");
    var conn = card.querySelector("[data-conn-for='" + id + "']");
    window.consoleSocket("/ws/clusters/" + id + "/", function (msg) {
      if (msg.type === "cluster.state") {
        var badge = document.getElementById("cluster-state-" + id);
        if (badge) { badge.textContent = msg.label || msg.state; badge.className = "badge badge-" + (msg.color || "grey"); }
      } else if (msg.type === "telemetry.update" && msg.nodes) {
        Object.keys(msg.nodes).forEach(function (name) { updateNodeTelemetry(name, msg.nodes[name]); });
      } else if (msg.type === "node.state" || (msg.type === "telemetry.update" && msg.node_state)) {
        var nb = document.getElementById("node-state-" + msg.node);
        if (nb) { nb.textContent = msg.label || msg.node_state || msg.state; nb.className = "badge badge-" + (msg.color || "grey"); }
      }
    }, function (state) {
      if (conn) { conn.textContent = labels[state] || state; conn.className = "conn-state" + (state === "live" ? " live" : ""); }
    });
  });
})();
