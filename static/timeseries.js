// Rookery studio: the chart of one time series on a document's time-series
// page. The <figure data-ts-chart data-src="…/timeseries/points?…"> gets the
// range's points once (sampled to at most ~1500 on the server) and draws
// one line per value with uPlot: time (UTC) on x, the values on y, the
// values under the pointer in the legend. The figure's data-* attributes
// say what was drawn, for tests and assistive technology.
(function () {
  "use strict";
  if (!window.uPlot || !window.fetch) return;

  var palette = ["#2f6fb3", "#c0392b", "#2e8b57", "#b8860b", "#7b4fa8", "#d35400", "#008b8b", "#8b4513"];

  function cssVar(el, name, fallback) {
    var v = getComputedStyle(el).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }

  function fmt(v) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (Number.isInteger(v)) return String(v);
    return v.toFixed(a >= 10 ? 1 : 3);
  }

  function draw(el, d) {
    var plotEl = el.querySelector("[data-chart-plot]") || el;
    var note = el.querySelector("[data-chart-note]");
    var times = (d.Times || []).map(function (t) {
      return t / 1000;
    });
    el.setAttribute("data-points", String(times.length));
    el.setAttribute("data-series", String((d.Series || []).length));
    el.setAttribute("data-total", String(d.Total || 0));
    if (!times.length) {
      if (note) note.textContent = "No entries in this range.";
      return;
    }
    if (note) {
      note.textContent = d.Sampled
        ? "Showing " + times.length + " of " + d.Total + " entries (the first of each equal slice of the range)."
        : "Showing all " + times.length + " entries of the range.";
    }
    var fg = cssVar(el, "--fg", "#1b1f23");
    var grid = cssVar(el, "--border", "#d5d8dc");
    var axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    var series = [{ label: "Time (UTC)" }];
    var cols = [times];
    (d.Series || []).forEach(function (s, i) {
      series.push({
        label: s.Label,
        stroke: palette[i % palette.length],
        width: 1.5,
        points: { show: times.length < 60 },
        value: function (u, v) {
          return fmt(v);
        },
      });
      cols.push(s.Values);
    });
    var plot = new uPlot({
      width: Math.max(240, Math.floor(plotEl.clientWidth || el.clientWidth || 600)),
      height: 260,
      tzDate: function (ts) {
        return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC");
      },
      series: series,
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [
        Object.assign({ label: "time (UTC)", labelSize: 18 }, axis),
        Object.assign({ label: "value", labelSize: 18, size: 60, values: function (u, vals) {
          return vals.map(fmt);
        } }, axis),
      ],
    }, cols, plotEl);
    el.setAttribute("data-drawn", "true");
    plotEl.setAttribute("role", "img");
    plotEl.setAttribute("aria-label", "Time on x, values on y: " + times.length + " points from " +
      new Date(times[0] * 1000).toISOString() + " to " + new Date(times[times.length - 1] * 1000).toISOString() + ".");
    window.addEventListener("resize", function () {
      plot.setSize({ width: Math.max(240, Math.floor(plotEl.clientWidth || 600)), height: 260 });
    });
  }

  function start() {
    document.querySelectorAll("[data-ts-chart]").forEach(function (el) {
      fetch(el.getAttribute("data-src"), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("status " + r.status);
          return r.json();
        })
        .then(function (d) {
          draw(el, d);
        })
        .catch(function (e) {
          var note = el.querySelector("[data-chart-note]");
          if (note) note.textContent = "Could not load the points (" + e.message + ").";
          el.setAttribute("data-error", e.message);
        });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
