// The conflicts page's selection: tick every id on the page, none, or
// choose every id the filter matches (the "filter" scope, which covers ids
// on other pages too); the count of ticked ids follows the checkboxes.
// Loaded by views/conflicts.templ. Without it the scope radios do the same.
(function () {
  "use strict";
  var form = document.getElementById("bulk-form");
  if (!form) return;
  var count = document.getElementById("bulk-selected-count");
  var status = document.getElementById("select-status");
  function boxes() {
    return document.querySelectorAll("input[type=checkbox][name=ids][form=bulk-form]");
  }
  function radio(v) {
    return form.querySelector("input[type=radio][name=scope][value=" + v + "]");
  }
  function total() {
    var l = document.getElementById("conflicts-list");
    return l ? Number(l.getAttribute("data-total") || "0") : 0;
  }
  function refresh() {
    var n = 0, all = boxes();
    all.forEach(function (b) { if (b.checked) n++; });
    if (count) count.textContent = String(n);
    var head = document.getElementById("conflict-sel-page");
    if (head) {
      head.checked = all.length > 0 && n === all.length;
      head.indeterminate = n > 0 && n < all.length;
    }
    if (status) {
      var f = radio("filter");
      if (f && f.checked) status.textContent = "All " + total() + " conflicts the filter matches are selected.";
      else status.textContent = n + " ticked";
    }
  }
  function tick(on) {
    boxes().forEach(function (b) { b.checked = on; });
  }
  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-select]") : null;
    if (!t) return;
    var what = t.getAttribute("data-select");
    if (what === "page") {
      tick(true);
      radio("selected").checked = true;
    } else if (what === "scope") {
      tick(true);
      radio("filter").checked = true;
    } else {
      tick(false);
      radio("selected").checked = true;
    }
    refresh();
  });
  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (t.id === "conflict-sel-page") {
      tick(t.checked);
      radio("selected").checked = true;
    } else if (t.name === "ids" && t.checked) {
      radio("selected").checked = true;
    }
    refresh();
  });
  // Live updates re-render the list (ticks are kept by live.js): keep the
  // count and the header box true.
  new MutationObserver(refresh).observe(document.getElementById("conflicts-list") || form, { childList: true, subtree: true });
  refresh();
})();
