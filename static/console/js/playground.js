// Playground: chat with a Running cluster over /ws/playground/ (the browser never talks to the engine).
// The conversation lives in sessionStorage until "Clear conversation".
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var root = $("playground");
  if (!root) { return; }
  var STORE = "console.playground";
  var gateway = root.dataset.gateway;
  var keyHint = root.dataset.keyHint || "";  // where CONSOLE_API_KEY comes from, in the reader's language
  var clusters = JSON.parse($("pg-clusters").textContent);
  var state = load();
  var live = null, streaming = null, nextId = 1, clusterOk = false;

  function load() {
    try { return JSON.parse(window.sessionStorage.getItem(STORE)) || { turns: [] }; } catch (e) { return { turns: [] }; }
  }
  function save() { window.sessionStorage.setItem(STORE, JSON.stringify(state)); }

  function settings() {
    var stop = $("pg-stop").value.split("\n").filter(function (s) { return s.length > 0; });
    return {
      cluster: $("pg-cluster").value,
      system: $("pg-system").value,
      temperature: $("pg-temperature").value,
      top_p: $("pg-top-p").value,
      max_tokens: $("pg-max-tokens").value,
      stop: stop,
    };
  }

  function fmt(v, unit) { return v === null || v === undefined ? "—" : v + (unit || ""); }

  function metricsText(m) {
    return [
      interpolate(gettext("TTFT %s"), [fmt(m.ttft_ms, " ms")]),
      interpolate(gettext("inter-token %s"), [fmt(m.itl_ms, " ms")]),
      interpolate(gettext("%s tokens/s"), [fmt(m.tokens_per_s)]),
      interpolate(gettext("prompt %s / completion %s tokens"), [fmt(m.prompt_tokens), fmt(m.completion_tokens)]),
    ];
  }

  function turnNode(turn) {
    var li = document.createElement("li");
    li.className = "pg-turn " + turn.role;
    var text = document.createElement("div");
    text.className = "pg-text";
    text.textContent = turn.content;
    li.appendChild(text);
    if (turn.role === "assistant") {
      var m = document.createElement("div");
      m.className = "pg-metrics";
      li.appendChild(m);
      if (turn.metrics) { renderMetrics(li, turn.metrics); }
      if (turn.interrupted) { markInterrupted(li); }
    }
    return li;
  }

  // An answer cut short by a dropped connection stays on screen, marked, with Retry.
  function markInterrupted(li) {
    li.classList.add("interrupted");
    if (li.querySelector(".pg-interrupted")) { return; }
    var note = document.createElement("div");
    note.className = "pg-interrupted";
    note.setAttribute("role", "status");
    var label = document.createElement("span");
    label.textContent = gettext("Interrupted: the connection to the console dropped before the answer finished.");
    var retry = document.createElement("button");
    retry.type = "button";
    retry.className = "pg-retry";
    retry.textContent = gettext("Retry");
    retry.addEventListener("click", function () { retryLast(li); });
    note.appendChild(label);
    note.appendChild(document.createTextNode(" "));
    note.appendChild(retry);
    li.appendChild(note);
    updateButtons();
  }

  function renderMetrics(li, m) {
    var box = li.querySelector(".pg-metrics");
    box.textContent = "";
    var names = ["pg-ttft", "pg-itl", "pg-tps", "pg-usage"];
    metricsText(m).forEach(function (t, i) {
      var span = document.createElement("span");
      span.className = names[i];
      span.textContent = t;
      box.appendChild(span);
    });
    if (m.stopped) {
      var s = document.createElement("span");
      s.className = "pg-stopped";
      s.textContent = gettext("stopped");
      box.appendChild(s);
    }
  }

  function renderHistory() {
    var ol = $("pg-history");
    ol.textContent = "";
    state.turns.forEach(function (t) { ol.appendChild(turnNode(t)); });
  }

  function showError(msg) {
    $("pg-error").hidden = !msg;
    $("pg-error").textContent = msg || "";
  }

  function canSend() { return !!live && live.state === "live" && clusterOk && !streaming; }

  function updateButtons() {
    var ok = canSend();
    var send = $("pg-send");
    send.disabled = !ok;
    // Why Send is off, on hover (a disabled button says nothing by itself).
    send.title = ok ? "" : !live || live.state !== "live" ? gettext("Waiting for the connection to the console")
      : streaming ? gettext("An answer is streaming; Stop it first") : gettext("The cluster is not serving");
    $("pg-stop-btn").disabled = !streaming;
    document.querySelectorAll("#pg-history .pg-retry").forEach(function (b) { b.disabled = !ok; });
  }

  function showState(msg) {
    clusterOk = !msg.notice;
    $("pg-banner").hidden = clusterOk;
    $("pg-banner").textContent = msg.notice || "";
    $("pg-banner").dataset.state = msg.state || "";
    updateButtons();
  }

  function watch() {
    if (live && $("pg-cluster").value) { live.send({ type: "watch", cluster: $("pg-cluster").value }); }
  }

  function onMessage(msg) {
    if (msg.type === "state") { if (String(msg.cluster) === $("pg-cluster").value) { showState(msg); } return; }
    if (msg.type === "error") {
      showError(msg.message);
      if (streaming && msg.id === streaming.id) {
        if (streaming.turn.content) { interrupt(); } else { finish(null); }
      }
      return;
    }
    if (!streaming || msg.id !== streaming.id) { return; }
    if (msg.type === "token") {
      streaming.turn.content += msg.text;
      streaming.node.querySelector(".pg-text").textContent = streaming.turn.content;
      if (msg.ttft_ms !== undefined) {
        renderMetrics(streaming.node, { ttft_ms: msg.ttft_ms });
      }
    } else if (msg.type === "done") {
      finish(msg);
    } else if (msg.type === "stopped") {
      finish(msg);
    }
  }

  // The connection (or the engine) dropped mid-answer: keep what arrived, mark it, offer Retry.
  function interrupt() {
    var s = streaming;
    streaming = null;
    s.node.classList.remove("streaming");
    s.turn.interrupted = true;
    state.turns.push(s.turn);
    markInterrupted(s.node);
    save();
    updateButtons();
  }

  function retryLast(li) {
    var last = state.turns[state.turns.length - 1];
    if (!canSend() || !last || !last.interrupted || li !== $("pg-history").lastElementChild) { return; }
    state.turns.pop();
    li.remove();
    showError("");
    ask();
  }

  function finish(metrics) {
    var s = streaming;
    streaming = null;
    s.node.classList.remove("streaming");
    if (metrics) {
      s.turn.metrics = metrics;
      renderMetrics(s.node, metrics);
      state.turns.push(s.turn);
    } else {
      s.node.remove();
      state.turns.pop(); // the prompt that failed goes back into the box
      $("pg-history").lastChild && $("pg-history").lastChild.remove();
      $("pg-prompt").value = s.prompt;
    }
    save();
    updateButtons();
  }

  function send(ev) {
    ev.preventDefault();
    var prompt = $("pg-prompt").value;
    if (!prompt.trim() || !canSend()) { return; }
    showError("");
    state.turns.push({ role: "user", content: prompt });
    $("pg-history").appendChild(turnNode(state.turns[state.turns.length - 1]));
    $("pg-prompt").value = "";
    ask(prompt);
  }

  // Stream an answer to the conversation as it stands (its last turn is the user's).
  function ask(prompt) {
    var turn = { role: "assistant", content: "" };
    var node = turnNode(turn);
    node.classList.add("streaming");
    $("pg-history").appendChild(node);
    var last = state.turns[state.turns.length - 1];
    streaming = { id: nextId++, turn: turn, node: node, prompt: prompt || (last ? last.content : "") };
    var messages = state.turns.map(function (t) { return { role: t.role, content: t.content }; });
    live.send(Object.assign({ type: "send", id: streaming.id, messages: messages }, settings()));
    save();
    updateButtons();
  }

  function requestBody() {
    var s = settings();
    var opt = $("pg-cluster").selectedOptions[0];
    var messages = [];
    if (s.system.trim()) { messages.push({ role: "system", content: s.system }); }
    state.turns.forEach(function (t) { messages.push({ role: t.role, content: t.content }); });
    var pending = $("pg-prompt").value;
    messages.push({ role: "user", content: pending || gettext("Hello") });
    var body = {
      model: opt ? opt.dataset.model : "", messages: messages, temperature: Number(s.temperature),
      top_p: Number(s.top_p), max_tokens: Number(s.max_tokens), stream: true,
    };
    if (s.stop.length) { body.stop = s.stop; }
    return body;
  }

  function shellQuote(text) { return "'" + text.replace(/'/g, "'\\''") + "'"; }

  function curlSnippet() {
    return "# " + keyHint + "\n" + "curl -N " + gateway + "/chat/completions \\\n" +
      "  -H 'Content-Type: application/json' \\\n" +
      "  -H \"Authorization: Bearer $CONSOLE_API_KEY\" \\\n" +
      "  -d " + shellQuote(JSON.stringify(requestBody())) + "\n";
  }

  function pythonSnippet() {
    var b = requestBody();
    var extra = b.stop ? ",\n    stop=" + JSON.stringify(b.stop) : "";
    return "# " + keyHint + "\nimport os\n\nfrom openai import OpenAI\n\n" +
      "client = OpenAI(base_url=" + JSON.stringify(gateway) + ", api_key=os.environ[\"CONSOLE_API_KEY\"])\n" +
      "stream = client.chat.completions.create(\n" +
      "    model=" + JSON.stringify(b.model) + ",\n" +
      "    messages=" + JSON.stringify(b.messages, null, 4).replace(/\n/g, "\n    ") + ",\n" +
      "    temperature=" + b.temperature + ",\n    top_p=" + b.top_p + ",\n    max_tokens=" + b.max_tokens + extra + ",\n" +
      "    stream=True,\n)\nfor chunk in stream:\n" +
      "    if chunk.choices and chunk.choices[0].delta.content:\n" +
      "        print(chunk.choices[0].delta.content, end=\"\", flush=True)\n";
  }

  function copy(text) {
    var pre = $("pg-snippet");
    pre.hidden = false;
    pre.textContent = text;
    if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).catch(function () {}); }
  }

  function connect() {
    live = window.consoleLive.open({
      path: "/ws/playground/",
      onMessage: onMessage,
      onState: function (st) {
        var el = $("pg-conn");
        window.consoleLive.showState(el, st);
        el.classList.add("pg-conn");
        if (st === "live") { watch(); }  // the cluster's state comes back at once: the re-list
        updateButtons();
      },
      onDown: function () { if (streaming) { interrupt(); } }
    });
  }

  // Restore the stored conversation and settings.
  if (state.cluster && clusters.some(function (c) { return String(c.id) === state.cluster; })) {
    $("pg-cluster").value = state.cluster;
  }
  if (state.system) { $("pg-system").value = state.system; }
  renderHistory();
  $("pg-cluster").addEventListener("change", function () { state.cluster = $("pg-cluster").value; save(); clusterOk = false; updateButtons(); watch(); });
  $("pg-system").addEventListener("change", function () { state.system = $("pg-system").value; save(); });
  $("pg-form").addEventListener("submit", send);
  $("pg-prompt").addEventListener("keydown", function (ev) { if (ev.key === "Enter" && ev.ctrlKey) { send(ev); } });
  $("pg-stop-btn").addEventListener("click", function () {
    if (streaming) { live.send({ type: "stop", id: streaming.id }); }
  });
  $("pg-clear").addEventListener("click", function () {
    state.turns = [];
    save();
    renderHistory();
    showError("");
  });
  $("pg-copy-curl").addEventListener("click", function () { copy(curlSnippet()); });
  $("pg-copy-python").addEventListener("click", function () { copy(pythonSnippet()); });
  updateButtons();
  connect();
})();
