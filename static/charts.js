// Rookery studio charts: time-series charts drawn with uPlot (vendored in
// static/vendor/uplot). Each <figure data-chart data-src="/studio/history?…"
// data-unit="…"> fetches its series once, then only the points newer than
// what it has, every sample interval, and draws them with real axes (time on
// x, the unit on y), one y scale for all its lines (rows are compared on
// the same scale, never each scaled to its own peak), and the values under
// the pointer in the legend. Charts sit outside the live regions: live.js
// never replaces them.
(function () {
  "use strict";
  if (!window.uPlot || !window.fetch) return;

  var palette = ["#2f6fb3", "#c0392b", "#2e8b57", "#b8860b", "#7b4fa8", "#d35400", "#008b8b", "#8b4513", "#c71585", "#556b2f"];

  function cssVar(el, name, fallback) {
    var v = getComputedStyle(el).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }

  // fmt prints a value for an axis tick or the legend.
  function fmt(v) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return v.toFixed(a >= 10 ? 1 : 2);
  }

  function Chart(el) {
    this.el = el;
    this.plotEl = el.querySelector("[data-chart-plot]") || el;
    this.note = el.querySelector("[data-chart-note]");
    this.src = el.getAttribute("data-src");
    this.unit = el.getAttribute("data-unit") || "";
    this.interval = Number(el.getAttribute("data-interval")) || 5;
    this.retention = Number(el.getAttribute("data-retention")) || 3600;
    this.series = {}; // key -> {label, values: {time: value}}
    this.order = [];
    this.newest = 0;
    this.plot = null;
    this.shape = "";
  }

  Chart.keyOf = function (s) {
    return [s.Kind, s.Database || "", s.Node || "", s.Peer || "", s.Name || ""].join("|");
  };

  Chart.prototype.url = function () {
    var u = this.src;
    // Ask again for the last two samples: another node's points for them
    // may arrive later than ours.
    if (this.newest) u += (u.indexOf("?") < 0 ? "?" : "&") + "since=" + (this.newest - 2 * this.interval - 1);
    return u;
  };

  Chart.prototype.fetch = function () {
    var self = this;
    return fetch(this.url(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (d) {
        self.merge(d);
        self.draw(d);
      })
      .catch(function (e) {
        self.setNote("Could not load the chart's points (" + e.message + "); retrying.");
      });
  };

  Chart.prototype.merge = function (d) {
    if (d.Interval) this.interval = d.Interval;
    var times = d.Times || [];
    var self = this;
    (d.Series || []).forEach(function (s) {
      var k = Chart.keyOf(s);
      var cur = self.series[k];
      if (!cur) {
        cur = self.series[k] = { label: s.Label || k, values: {} };
        self.order.push(k);
      }
      for (var i = 0; i < times.length; i++) {
        var v = s.Values[i];
        if (v !== null && v !== undefined) cur.values[times[i]] = v;
      }
    });
    for (var i = 0; i < times.length; i++) this.newest = Math.max(this.newest, times[i]);
    // Forget what fell out of the retention, and series left without points.
    var floor = this.newest - this.retention;
    this.order = this.order.filter(function (k) {
      var vals = self.series[k].values;
      var any = false;
      Object.keys(vals).forEach(function (t) {
        if (Number(t) < floor) delete vals[t];
        else any = true;
      });
      if (!any) delete self.series[k];
      return any;
    });
    this.order.sort(function (a, b) {
      return self.series[a].label < self.series[b].label ? -1 : self.series[a].label > self.series[b].label ? 1 : 0;
    });
    this.nodes = d.Nodes || [];
  };

  // data builds uPlot's aligned columns: the union of the series' times,
  // null where a series has no point (a gap, not a zero).
  Chart.prototype.data = function () {
    var self = this;
    var set = {};
    this.order.forEach(function (k) {
      Object.keys(self.series[k].values).forEach(function (t) {
        set[t] = true;
      });
    });
    var xs = Object.keys(set).map(Number).sort(function (a, b) {
      return a - b;
    });
    var cols = [xs];
    this.order.forEach(function (k) {
      var vals = self.series[k].values;
      cols.push(xs.map(function (t) {
        return Object.prototype.hasOwnProperty.call(vals, t) ? vals[t] : null;
      }));
    });
    return cols;
  };

  Chart.prototype.setNote = function (text) {
    if (this.note) this.note.textContent = text;
  };

  Chart.prototype.width = function () {
    return Math.max(240, Math.floor(this.plotEl.clientWidth || this.el.clientWidth || 600));
  };

  Chart.prototype.options = function () {
    var fg = cssVar(this.el, "--fg", cssVar(this.el, "--ink", "#1b1f23"));
    var grid = cssVar(this.el, "--border", cssVar(this.el, "--line", "#d5d8dc"));
    var unit = this.unit;
    var self = this;
    var series = [{ label: "Time" }];
    this.order.forEach(function (k, i) {
      series.push({
        label: self.series[k].label,
        stroke: palette[i % palette.length],
        width: 1.5,
        spanGaps: false,
        points: { show: false },
        value: function (u, v) {
          return v == null ? "–" : fmt(v) + " " + unit;
        },
      });
    });
    var axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    return {
      hooks: {
        draw: [
          function (u) {
            self.drawn(u);
          },
        ],
      },
      width: this.width(),
      height: 200,
      series: series,
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        // One scale for every line, from 0: rows are compared on it.
        y: {
          range: function (u, min, max) {
            return [0, max > 0 ? max * 1.1 : 1];
          },
        },
      },
      axes: [
        Object.assign({ label: "time", labelSize: 18 }, axis),
        Object.assign({ label: unit, labelSize: 18, size: 56, values: function (u, vals) {
          return vals.map(fmt);
        } }, axis),
      ],
    };
  };

  Chart.prototype.draw = function () {
    var cols = this.data();
    var shape = this.order.join("\n");
    var points = cols[0].length;
    this.el.setAttribute("data-series", String(this.order.length));
    this.el.setAttribute("data-points", String(points));
    var missing = (this.nodes || []).filter(function (n) {
      return !n.Reachable;
    });
    var note = "";
    if (missing.length) {
      note = missing.map(function (n) {
        return "Node " + n.Tag + " did not answer (" + (n.Problem || "unreachable") + "): its series are missing, not zero.";
      }).join(" ");
    }
    if (!this.order.length) {
      this.setNote((note ? note + " " : "") + "No points yet: the first come within " + this.interval + " s of a node starting.");
      if (this.plot) {
        this.plot.destroy();
        this.plot = null;
        this.shape = "";
      }
      return;
    }
    this.setNote(note);
    if (this.plot && shape === this.shape) {
      this.plot.setData(cols);
      return;
    }
    if (this.plot) this.plot.destroy();
    this.shape = shape;
    this.plot = new uPlot(this.options(), cols, this.plotEl);
    this.el.setAttribute("data-drawn", "true");
  };

  // drawn says what the canvas shows, for assistive technology and tests:
  // the axes' units and tick labels, and each line's latest value.
  Chart.prototype.drawn = function (u) {
    var unit = this.unit;
    var ticks = function (i) {
      var a = u.axes[i];
      return a && a._values ? a._values.filter(function (v) {
        return v != null && v !== "";
      }) : [];
    };
    var yt = ticks(1);
    this.el.setAttribute("data-x-ticks", String(ticks(0).length));
    this.el.setAttribute("data-y-ticks", yt.join(","));
    this.el.setAttribute("data-y-label", unit);
    var self = this;
    var latest = this.order.map(function (k, i) {
      var col = u.data[i + 1] || [];
      for (var j = col.length - 1; j >= 0; j--) {
        if (col[j] != null) return self.series[k].label + ": " + fmt(col[j]) + " " + unit;
      }
      return self.series[k].label + ": no value";
    });
    this.plotEl.setAttribute("role", "img");
    this.plotEl.setAttribute("aria-label", "Time on x, " + unit + " on y (from 0 to " + (yt[yt.length - 1] || "?") + "). Latest: " + latest.join("; ") + ".");
  };

  Chart.prototype.resize = function () {
    if (this.plot) this.plot.setSize({ width: this.width(), height: 200 });
  };

  function start() {
    var charts = [];
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      charts.push(new Chart(el));
    });
    if (!charts.length) return;
    var busy = false;
    function round() {
      if (busy || document.hidden) return;
      busy = true;
      Promise.all(charts.map(function (c) {
        return c.fetch();
      })).then(function () {
        busy = false;
      });
    }
    round();
    var every = Math.max(1, Math.min.apply(null, charts.map(function (c) {
      return c.interval;
    })));
    setInterval(round, every * 1000);
    document.addEventListener("visibilitychange", round);
    var t;
    window.addEventListener("resize", function () {
      clearTimeout(t);
      t = setTimeout(function () {
        charts.forEach(function (c) {
          c.resize();
        });
      }, 100);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
