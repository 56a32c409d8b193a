// The one socket lifecycle every live page shares (dashboard, cluster, operation, alerts, playground).
//
//   var live = consoleLive.open({ path: "/ws/...", onMessage: fn(msg), onState: fn(state, reconnected),
//                                 resync: fn() -> Promise, resyncFirst: bool });
//   live.send(obj) -> bool      live.state -> "connecting" | "live" | "resyncing" | "reconnecting" | "forbidden" | "gone"
//
// Like a Kubernetes watch: when the socket (re)opens the page first re-lists (resync: fetch the
// state over HTTP and redraw), holding the events that arrive meanwhile, then replays them, so
// nothing that happened while the socket was down is missed and nothing is applied out of order.
// A socket that closes for any reason but "forbidden"/"not found" reconnects with capped,
// jittered exponential backoff (1 s → 30 s); coming back online or to the tab retries at once.
// Never polls.
(function () {
  "use strict";
  var LABELS = {
    connecting: gettext("Connecting…"),
    live: gettext("Live"),
    resyncing: gettext("Catching up…"),
    reconnecting: gettext("Reconnecting…"),
    forbidden: gettext("No access"),
    gone: gettext("Not found")
  };
  var CLOSE_FORBIDDEN = 4403, CLOSE_NOT_FOUND = 4404;
  var MIN_DELAY = 1000, MAX_DELAY = 30000;
  // Counters for soaks and debugging: messages received per type, sockets dropped.
  var STATS = { messages: {}, drops: 0 };

  function Live(opts) {
    this.opts = opts;
    this.state = "connecting";
    this.socket = null;
    this.attempt = 0;
    this.everOpen = false;
    this.buffer = null;  // events held while a resync runs
    this.timer = null;
    this.stopped = false;
    var self = this;
    window.addEventListener("pagehide", function () { self.close(); });
    window.addEventListener("pageshow", function (ev) {  // back/forward cache: the old socket is gone
      if (ev.persisted && self.stopped) { self.stopped = false; self.connect(); }
    });
    window.addEventListener("online", function () { self.retryNow(); });
    document.addEventListener("visibilitychange", function () { if (!document.hidden) { self.retryNow(); } });
    this.connect();
  }

  Live.prototype.setState = function (state) {
    this.state = state;
    if (this.opts.onState) { this.opts.onState(state, this.everOpen); }
  };

  Live.prototype.connect = function () {
    var self = this;
    this.timer = null;
    var proto = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(proto + window.location.host + this.opts.path);
    this.socket = socket;
    this.setState(this.everOpen ? "reconnecting" : "connecting");
    socket.onopen = function () {
      self.attempt = 0;
      var reconnected = self.everOpen;
      self.everOpen = true;
      if (!self.opts.resync || !(reconnected || self.opts.resyncFirst)) { self.setState("live"); return; }
      self.buffer = [];
      self.setState("resyncing");
      var done = function () {
        var held = self.buffer || [];
        self.buffer = null;
        if (self.socket !== socket) { return; }  // closed again meanwhile; the next open re-lists
        held.forEach(function (msg) { self.opts.onMessage(msg); });
        self.setState("live");
      };
      Promise.resolve().then(function () { return self.opts.resync(reconnected); }).then(done, done);
    };
    socket.onmessage = function (ev) {
      var msg = JSON.parse(ev.data);
      STATS.messages[msg.type] = (STATS.messages[msg.type] || 0) + 1;
      if (self.buffer) { self.buffer.push(msg); } else { self.opts.onMessage(msg); }
    };
    socket.onclose = function (ev) {
      if (self.socket !== socket) { return; }
      self.socket = null;
      self.buffer = null;
      if (self.stopped) { return; }
      if (ev.code === CLOSE_FORBIDDEN) { self.setState("forbidden"); return; }
      if (ev.code === CLOSE_NOT_FOUND) { self.setState("gone"); return; }
      self.setState("reconnecting");
      STATS.drops += 1;
      if (self.opts.onDown) { self.opts.onDown(ev); }
      var delay = Math.min(MAX_DELAY, MIN_DELAY * Math.pow(2, self.attempt));
      self.attempt += 1;
      self.timer = setTimeout(function () { self.connect(); }, delay * (0.75 + Math.random() / 4));
    };
  };

  // Skip the rest of a backoff wait (the network or the tab came back).
  Live.prototype.retryNow = function () {
    if (this.timer === null || this.stopped) { return; }
    clearTimeout(this.timer);
    this.connect();
  };

  Live.prototype.send = function (obj) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) { return false; }
    this.socket.send(JSON.stringify(obj));
    return true;
  };

  Live.prototype.isOpen = function () {
    return !!this.socket && this.socket.readyState === WebSocket.OPEN;
  };

  Live.prototype.close = function () {
    this.stopped = true;
    if (this.timer !== null) { clearTimeout(this.timer); }
    if (this.socket) { this.socket.close(); }
  };

  // Show a connection state on an element: text, class "live" only while live, data-state always.
  function showState(el, state) {
    if (!el) { return; }
    el.textContent = LABELS[state] || state;
    el.setAttribute("data-state", state);
    el.classList.toggle("live", state === "live");
    el.classList.toggle("down", state === "reconnecting" || state === "forbidden" || state === "gone");
  }

  // Re-list for server-rendered pages: fetch this page again and swap every element whose
  // data-live-part names `group` (matched by id) for the fresh copy. Resolves to the parsed document.
  function refreshParts(group, url) {
    return fetch(url || window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live-part~='" + group + "']").forEach(function (el) {
          var fresh = el.id ? doc.getElementById(el.id) : null;
          if (fresh) { el.replaceWith(document.importNode(fresh, true)); }
        });
        document.dispatchEvent(new CustomEvent("console:refreshed", { detail: { group: group, doc: doc } }));
        return doc;
      });
  }

  window.consoleLive = {
    LABELS: LABELS,
    stats: STATS,
    open: function (opts) { return new Live(opts); },
    showState: showState,
    refreshParts: refreshParts
  };

  // The older three-argument form some pages use.
  window.consoleSocket = function (path, onMessage, onState, resync) {
    return new Live({ path: path, onMessage: onMessage, onState: onState, resync: resync });
  };
})();
