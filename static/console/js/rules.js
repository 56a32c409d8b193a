// Rule editor: as the metric, comparison, threshold or cluster change, show what the rule
// would match now (an HTML fragment from the server, the same evaluation as the rule engine).
(function () {
  "use strict";
  var form = document.getElementById("rule-form");
  if (!form || !window.fetch) { return; }
  var timer = null;
  function field(name) { var el = form.elements[name]; return el ? el.value : ""; }
  function update() {
    if (!field("metric") || !field("comparison") || field("threshold") === "") { return; }
    var q = new URLSearchParams({ metric: field("metric"), comparison: field("comparison"), threshold: field("threshold"), cluster: field("cluster") });
    fetch(form.getAttribute("data-preview-url") + "?" + q.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("rule-preview-body");
        var mine = document.getElementById("rule-preview-body");
        if (fresh && mine) { mine.replaceWith(document.importNode(fresh, true)); }
      })
      .catch(function () { /* the next change tries again */ });
  }
  ["metric", "comparison", "threshold", "cluster"].forEach(function (name) {
    var el = form.elements[name];
    if (!el) { return; }
    el.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(update, 250); });
    el.addEventListener("change", update);
  });
  update();
})();
