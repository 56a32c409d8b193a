// Cluster page: state badge, operation buttons, active operation and node cards update live
// over /ws/clusters/<id>/. The buttons a state allows are decided by the server
// (console/views/controls.py): on a state change or an operation starting or ending the page
// re-reads those parts rather than second-guessing them here.
(function () {
  "use strict";
  var card = document.querySelector("section.cluster[data-cluster-id]");
  if (!card) { return; }
  var id = card.getAttribute("data-cluster-id");
  var conn = card.querySelector("[data-conn-for='" + id + "']");
  var finished = ["succeeded", "failed", "cancelled", "interrupted"];
  var timer = null, activeOp = null;

  function refresh() { return window.consoleLive.refreshParts("cluster"); }
  function refreshSoon() { clearTimeout(timer); timer = setTimeout(refresh, 200); }

  function onMessage(msg) {
    if (msg.type === "cluster.state") {
      var badge = document.getElementById("cluster-state-" + id);
      badge.textContent = consoleFormat.clusterState(msg.state, msg.label);
      badge.className = "badge badge-" + msg.color;
      refreshSoon();
    } else if (msg.type === "operation.progress") {
      var active = finished.indexOf(msg.state) < 0;
      var box = document.getElementById("active-op");
      if (active) {
        box.classList.remove("hidden");
        box.innerHTML = "";
        var a = document.createElement("a");
        a.href = "/operations/" + msg.operation + "/";
        a.id = "active-op-link";
        a.textContent = interpolate(gettext("Operation #%(id)s (%(kind)s) is %(state)s: %(done)s/%(total)s steps"),
          { id: msg.operation, kind: consoleFormat.kind(msg.kind), state: consoleFormat.opState(msg.state, msg.state_label), done: msg.progress[0], total: msg.progress[1] }, true);
        box.appendChild(a);
      }
      var now = active ? msg.operation : null;
      if (now !== activeOp) { activeOp = now; refreshSoon(); }  // buttons, recent operations
    } else {
      window.consoleNodeCards.apply(msg);
    }
  }

  window.consoleLive.open({
    path: "/ws/clusters/" + id + "/",
    onMessage: onMessage,
    onState: function (state) { window.consoleLive.showState(conn, state); },
    resync: refresh
  });
})();
