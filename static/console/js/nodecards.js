// Node cards (overview and cluster page): one node's part of a telemetry.update — state
// badge, hottest chip, fullest HBM, last seen. Ids are stable, so the same code serves both.
(function () {
  "use strict";
  var STATE_LABELS = { unknown: gettext("Unknown"), ready: gettext("Ready"), running: gettext("Running"), stale: gettext("Stale"),
                       unreachable: gettext("Unreachable"), out_of_service: gettext("Out of service") };
  function maxOf(chips, index) {
    var best = null;
    (chips || []).forEach(function (c) { if (c[index] !== null && (best === null || c[index] > best)) { best = c[index]; } });
    return best;
  }
  function update(name, info) {
    var card = document.getElementById("node-" + name);
    if (card) { card.className = "node-card state-" + info.state; }
    var nb = document.getElementById("node-state-" + name);
    if (nb) { nb.textContent = STATE_LABELS[info.state] || info.state; nb.className = "badge badge-" + (info.color || "grey"); }
    var seen = document.getElementById("node-seen-" + name);
    if (seen && info.last_seen) { seen.textContent = window.consoleFormat ? consoleFormat.time(info.last_seen) : new Date(info.last_seen * 1000).toLocaleString(); }
    if (!info.chips) { return; }
    var temp = maxOf(info.chips, 2), hbm = maxOf(info.chips, 3);
    var t = document.getElementById("node-temp-" + name);
    if (t) { t.textContent = temp === null ? "—" : temp.toFixed(0) + " °C"; t.setAttribute("data-value", temp === null ? "" : String(temp)); }
    var h = document.getElementById("node-hbm-" + name);
    if (h) { h.textContent = hbm === null ? "—" : hbm.toFixed(1) + " %"; h.setAttribute("data-value", hbm === null ? "" : String(hbm)); }
  }
  window.consoleNodeCards = {
    STATE_LABELS: STATE_LABELS,
    // Apply a cluster socket message; true when it was about nodes.
    apply: function (msg) {
      if (msg.type === "telemetry.update" && msg.nodes) {
        Object.keys(msg.nodes).forEach(function (name) { update(name, msg.nodes[name]); });
        return true;
      }
      if (msg.type === "node.state") {
        var nb = document.getElementById("node-state-" + msg.node);
        if (nb) { nb.textContent = STATE_LABELS[msg.state] || msg.label || msg.state; nb.className = "badge badge-" + (msg.color || "grey"); }
        return true;
      }
      return false;
    }
  };
})();
