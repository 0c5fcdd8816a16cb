// The studio's frame: the sidebar collapses behind a Menu button on narrow
// screens. Loaded without defer from <head> so the "js" class is on <html>
// before the body is drawn: without JavaScript the sidebar simply stays in
// the page above the content, and nothing is hidden that cannot be reached.
// The CSP allows no inline script, so this lives in its own file.
"use strict";
(function () {
  var root = document.documentElement;
  root.classList.add("js");

  // Must match the max-width of the narrow layout in studio.css.
  var narrow = window.matchMedia("(max-width: 800px)");

  function init() {
    var btn = document.querySelector("[data-testid=menu-toggle]");
    var nav = document.getElementById("sidenav");
    if (!btn || !nav) return;

    function isOpen() {
      return btn.getAttribute("aria-expanded") === "true";
    }

    function set(open) {
      btn.setAttribute("aria-expanded", open ? "true" : "false");
      root.classList.toggle("nav-open", open);
    }

    btn.addEventListener("click", function () {
      var open = !isOpen();
      set(open);
      if (open) {
        var first = nav.querySelector("a[href]");
        if (first) first.focus();
      }
    });

    // Escape closes the open menu and gives the focus back to its button.
    document.addEventListener("keydown", function (e) {
      if (e.key !== "Escape" || !narrow.matches || !isOpen()) return;
      set(false);
      btn.focus();
    });

    // Crossing the breakpoint starts from a closed menu (the wide layout
    // shows the sidebar whatever the button says).
    narrow.addEventListener("change", function () {
      set(false);
    });
    set(false);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
