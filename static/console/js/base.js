// Shared helpers for every page: language switch auto-submit, confirmations (the socket lifecycle is live.js).
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
})();

// Buttons and forms with data-confirm ask before they submit (the server checks roles anyway).
document.addEventListener("click", function (ev) {
  var el = ev.target.closest("[data-confirm]");
  if (el && !window.confirm(el.getAttribute("data-confirm"))) { ev.preventDefault(); }
});
