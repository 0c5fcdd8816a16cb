// Rookery studio: <time data-ago datetime="…"> shows how long ago that time
// was, ticking here in the browser. The server renders the time itself
// ("since 12:04:05"), so a page whose data did not change renders the same
// bytes every second and its live updates send nothing.
(function () {
  "use strict";
  function text(s) {
    if (s < 0) s = 0;
    if (s < 60) return Math.floor(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + "m " + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-ago]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      var v = text((now - t) / 1000);
      if (el.textContent !== v) el.textContent = v;
      if (!el.title) el.title = el.getAttribute("datetime");
    });
  }
  tick();
  setInterval(tick, 1000);
})();
