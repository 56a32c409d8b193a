// Overview: one socket per cluster card; state badges and node cards update when events arrive,
// and each card re-lists (re-reads its part of the page) whenever its socket comes back.
(function () {
  "use strict";
  document.querySelectorAll("section.cluster[data-cluster-id]").forEach(function (card) {
    var id = card.getAttribute("data-cluster-id");
    var conn = card.querySelector("[data-conn-for='" + id + "']");
    window.consoleLive.open({
      path: "/ws/clusters/" + id + "/",
      onMessage: function (msg) {
        if (msg.type === "cluster.state") {
          var badge = document.getElementById("cluster-state-" + id);
          if (badge) { badge.textContent = consoleFormat.clusterState(msg.state, msg.label); badge.className = "badge badge-" + (msg.color || "grey"); }
          return;
        }
        window.consoleNodeCards.apply(msg);
      },
      onState: function (state) { window.consoleLive.showState(conn, state); },
      resync: function () { return window.consoleLive.refreshParts("cluster-" + id); }
    });
  });
})();
