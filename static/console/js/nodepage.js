// Node page: state, hottest NPU, fullest HBM and last seen follow the cluster's telemetry.update
// pushes (the same handler as the node cards); the page re-reads itself after a reconnect.
(function () {
  "use strict";
  var page = document.getElementById("node-page");
  var id = page && page.getAttribute("data-cluster-id");
  if (!id) { return; }
  var conn = page.querySelector("[data-conn-for='" + id + "']");
  window.consoleLive.open({
    path: "/ws/clusters/" + id + "/",
    onMessage: function (msg) { window.consoleNodeCards.apply(msg); },
    onState: function (state) { window.consoleLive.showState(conn, state); },
    resync: function () { return window.consoleLive.refreshParts("node"); }
  });
})();
