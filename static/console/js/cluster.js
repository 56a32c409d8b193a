// Cluster page: state badge and the active operation update live over /ws/clusters/<id>/.
(function () {
  "use strict";
  var card = document.querySelector("section.cluster[data-cluster-id]");
  if (!card) { return; }
  var id = card.getAttribute("data-cluster-id");
  var conn = card.querySelector("[data-conn-for='" + id + "']");
  var labels = { connecting: gettext("Connecting…"), live: gettext("Live"), reconnecting: gettext("Reconnecting…"), forbidden: gettext("No access") };
  var finished = ["succeeded", "failed", "cancelled", "interrupted"];

  function setButtons(disabled) {
    document.querySelectorAll("#op-form button.op-btn").forEach(function (b) { b.disabled = disabled; });
  }

  window.consoleSocket("/ws/clusters/" + id + "/", function (msg) {
    if (msg.type === "cluster.state") {
      var badge = document.getElementById("cluster-state-" + id);
      badge.textContent = msg.label;
      badge.className = "badge badge-" + msg.color;
    } else if (msg.type === "operation.progress") {
      var box = document.getElementById("active-op");
      var active = finished.indexOf(msg.state) < 0;
      box.classList.toggle("hidden", !active);
      box.innerHTML = "";
      if (active) {
        var a = document.createElement("a");
        a.href = "/operations/" + msg.operation + "/";
        a.id = "active-op-link";
        a.textContent = interpolate(gettext("Operation #%(id)s (%(kind)s) is %(state)s: %(done)s/%(total)s steps"),
          { id: msg.operation, kind: msg.kind, state: msg.state_label, done: msg.progress[0], total: msg.progress[1] }, true);
        box.appendChild(a);
      }
      setButtons(active);
    }
  }, function (state) {
    if (conn) { conn.textContent = labels[state] || state; conn.className = "conn-state" + (state === "live" ? " live" : ""); }
  });
})();
