// Shared helpers for every page: language switch auto-submit and a reconnecting WebSocket.
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });

  // Opens a socket to `path`, calls onMessage(data) for each JSON message and
  // onState("connecting" | "live" | "reconnecting") as the connection changes.
  // Reconnects with exponential backoff (1 s → 30 s); never polls.
  window.consoleSocket = function (path, onMessage, onState) {
    var delay = 1000, socket = null, closedByPage = false;
    function open() {
      var proto = window.location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(proto + window.location.host + path);
      onState(delay === 1000 ? "connecting" : "reconnecting");
      socket.onopen = function () { delay = 1000; onState("live"); };
      socket.onmessage = function (ev) { onMessage(JSON.parse(ev.data)); };
      socket.onclose = function (ev) {
        if (closedByPage) { return; }
        if (ev.code === 4403) { onState("forbidden"); return; }
        onState("reconnecting");
        setTimeout(open, delay);
        delay = Math.min(delay * 2, 30000);
      };
    }
    open();
    window.addEventListener("beforeunload", function () { closedByPage = true; if (socket) { socket.close(); } });
  };
})();

// Buttons and forms with data-confirm ask before they submit (the server checks roles anyway).
document.addEventListener("click", function (ev) {
  var el = ev.target.closest("[data-confirm]");
  if (el && !window.confirm(el.getAttribute("data-confirm"))) { ev.preventDefault(); }
});
