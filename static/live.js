// Rookery studio live updates: one websocket per page. The server pushes the
// page's live regions as rendered HTML ({"fragments":[{"id","html"}]}), and
// this script swaps each element with that id. Pages work without it; it only
// keeps them current.
(function () {
  "use strict";
  var path = document.body && document.body.getAttribute("data-live");
  var status = document.querySelector("[data-testid=live-status]");
  function setStatus(s) {
    document.body.setAttribute("data-live-state", s);
    if (status) status.textContent = s;
  }
  if (!path || !window.WebSocket) {
    setStatus("static");
    return;
  }
  var delay = 500;
  var updates = 0;
  function keepOpen(el, html) {
    // Keep an open <details> open across a swap (menus, confirmations).
    if (el.tagName === "DETAILS" && el.open) {
      return html.replace(/^<details/, "<details open");
    }
    return html;
  }
  function apply(frag) {
    var el = document.getElementById(frag.id);
    if (!el) return;
    // Don't replace a region while the user is typing in it.
    if (el.contains(document.activeElement) && /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName)) return;
    var ticked = keptChecks(el);
    var opened = openDetails(el);
    el.outerHTML = keepOpen(el, frag.html);
    var now = document.getElementById(frag.id);
    restoreChecks(now, ticked);
    reopen(now, opened);
  }
  // A <details> inside a region (a row's delete confirmation) that the user
  // opened stays open across a swap. It is recognised by its id, or by the
  // row it sits in (data-db, data-id, data-seq or data-key) and its place
  // there.
  function detailsKey(d, root) {
    if (d.id) return "#" + d.id;
    var owner = d.parentElement && d.parentElement.closest("[data-db],[data-id],[data-seq],[data-key]");
    if (!owner || !root.contains(owner)) owner = root;
    var sig = ["data-db", "data-id", "data-seq", "data-key"].map(function (a) {
      return owner.getAttribute(a) || "";
    }).join("|");
    var list = owner.querySelectorAll("details");
    return sig + "#" + Array.prototype.indexOf.call(list, d);
  }
  function openDetails(el) {
    var out = {};
    el.querySelectorAll("details[open]").forEach(function (d) {
      out[detailsKey(d, el)] = true;
    });
    return out;
  }
  function reopen(el, opened) {
    if (!el) return;
    el.querySelectorAll("details").forEach(function (d) {
      if (opened[detailsKey(d, el)]) d.open = true;
    });
  }
  // Checkboxes marked data-keep-checked (a list's selection) stay as the
  // user left them when their region is re-rendered; rows that went away
  // take their tick with them.
  function keptChecks(el) {
    var out = {};
    el.querySelectorAll("input[type=checkbox][data-keep-checked]").forEach(function (c) {
      out[c.name + "\n" + c.value] = c.checked;
    });
    return out;
  }
  function restoreChecks(el, ticked) {
    if (!el) return;
    el.querySelectorAll("input[type=checkbox][data-keep-checked]").forEach(function (c) {
      var k = c.name + "\n" + c.value;
      if (Object.prototype.hasOwnProperty.call(ticked, k)) c.checked = ticked[k];
    });
  }
  function connect() {
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
    var ws = new WebSocket(url);
    setStatus("connecting");
    ws.onopen = function () {
      delay = 500;
      setStatus("live");
    };
    ws.onmessage = function (ev) {
      var msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      (msg.fragments || []).forEach(apply);
      updates++;
      document.body.setAttribute("data-live-updates", String(updates));
    };
    ws.onclose = function () {
      setStatus("reconnecting");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
