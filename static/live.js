// Rookery studio live updates: one websocket per page. The server pushes the
// page's live regions as rendered HTML ({"fragments":[{"id","html"}]}), only
// those whose markup changed, and this script morphs each element with that
// id into its new markup in place (idiomorph, static/vendor/idiomorph), so
// what the user is doing survives the update:
//   - keyboard focus (and, if the focused element really went away, focus
//     moves to its nearest remaining ancestor, never to <body>);
//   - the value and caret of a field being typed in, and any field the user
//     changed;
//   - a text selection: the element holding it is left untouched, and if the
//     update would change the selected text, the region waits until the
//     selection ends, then shows the latest;
//   - scroll positions, open <details>, checkboxes marked data-keep-checked;
//   - rows: in a tbody[data-live-rows] whose rows are tr[data-key], while the
//     pointer is over the table (or its announcement) or focus or a
//     selection is inside it, rows keep their places: rows with new keys are
//     not inserted but announced ("3 new — show"), rows that left the latest
//     render stay, dimmed; existing rows still update in place. The button shows the
//     latest at once; so does the hold ending (pointer, focus and selection
//     gone from the table for a second).
// Pages work without this script; it only keeps them current.
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
  var morph = window.Idiomorph && window.Idiomorph.morph;
  var GRACE = 1000; // ms the pointer, focus and selection must be gone before held rows move
  var delay = 500;
  var updates = 0;
  var latest = {}; // region id -> the newest markup the server sent
  var pending = {}; // region id -> true while the page shows less than latest
  var edited = new WeakSet(); // form controls the user changed

  function remember(e) {
    var t = e.target;
    if (t && /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)) edited.add(t);
  }
  document.addEventListener("input", remember, true);
  document.addEventListener("change", remember, true);

  function isTyping(el) {
    return !!el && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName);
  }
  function activeSelection() {
    var sel = window.getSelection && window.getSelection();
    if (!sel || !sel.rangeCount || sel.isCollapsed) return null;
    if (isTyping(document.activeElement)) return null; // a field's own selection
    return sel;
  }
  function selectionTouches(node) {
    var sel = activeSelection();
    return !!sel && sel.getRangeAt(0).intersectsNode(node);
  }

  // --- rows -----------------------------------------------------------
  function keyedRows(tbody) {
    return Array.prototype.filter.call(tbody.children, function (r) {
      return r.tagName === "TR" && r.hasAttribute("data-key");
    });
  }
  function keyOf(r) {
    return r.getAttribute("data-key");
  }
  // The element around a table that holds it in the page (its scrolling
  // wrapper), below which the announcement sits.
  function wrapperOf(table, root) {
    var w = table.closest(".table-wrap, .docs-scroll");
    return w && root.contains(w) && w !== root ? w : table;
  }
  function busy(el) {
    return !!el && (el.matches(":hover") || el.contains(document.activeElement) || selectionTouches(el));
  }
  // A shown row keeps its element ids while held (ids numbered by place in
  // the server's render would otherwise move between rows).
  var idRefs = ["for", "aria-labelledby", "aria-describedby", "aria-controls"];
  function keepIds(shown, fresh) {
    var a = shown.querySelectorAll("[id]");
    var b = fresh.querySelectorAll("[id]");
    if (a.length !== b.length) return;
    var map = {};
    for (var i = 0; i < a.length; i++) {
      if (a[i].tagName !== b[i].tagName) return;
      if (a[i].id !== b[i].id) map[b[i].id] = a[i].id;
    }
    for (i = 0; i < b.length; i++) {
      if (map[b[i].id]) b[i].id = map[b[i].id];
    }
    fresh.querySelectorAll("[for],[aria-labelledby],[aria-describedby],[aria-controls]").forEach(function (n) {
      idRefs.forEach(function (attr) {
        var v = n.getAttribute(attr);
        if (v == null) return;
        var out = v.split(/\s+/).map(function (x) {
          return map[x] || x;
        }).join(" ");
        if (out !== v) n.setAttribute(attr, out);
      });
    });
  }
  function announcement(id, scope, added, gone) {
    var box = document.createElement("div");
    box.className = "live-new";
    box.id = "live-new:" + scope;
    var b = document.createElement("button");
    b.type = "button";
    b.className = "live-new-show";
    b.setAttribute("data-testid", "live-new-rows");
    b.setAttribute("data-live-show", id);
    b.setAttribute("data-added", String(added));
    b.setAttribute("data-gone", String(gone));
    // Rows that left are often only pushed off the page by new ones: they
    // are mentioned only when nothing is new.
    b.textContent = (added ? added + " new" : gone + " no longer listed") + " \u2014 show";
    box.appendChild(b);
    return box;
  }
  // prepareRows gives every keyed row an id from its key (so the morph
  // matches rows by key, not by place) and, for each busy table unless
  // force, rebuilds the new tbody from the rows shown: same order, fresh
  // content, new keys left out and announced. It returns whether any table
  // is held.
  function prepareRows(id, el, next, force) {
    var olds = el.querySelectorAll("tbody[data-live-rows]");
    var news = next.querySelectorAll("tbody[data-live-rows]");
    var held = false;
    for (var i = 0; i < news.length; i++) {
      var nb = news[i];
      var ob = nb.id ? document.getElementById(nb.id) : olds[i];
      if (ob && !el.contains(ob)) ob = null;
      var scope = id + ":" + (nb.id || i);
      var name = function (r) {
        if (!r.id) r.id = "live-row:" + scope + ":" + keyOf(r);
      };
      keyedRows(nb).forEach(name);
      if (!ob) continue;
      keyedRows(ob).forEach(name);
      var table = ob.closest("table");
      if (force || !table || !(busy(wrapperOf(table, el)) || busy(document.getElementById("live-new:" + scope)))) continue;
      var fresh = {};
      var freshRows = keyedRows(nb);
      freshRows.forEach(function (r) {
        fresh[keyOf(r)] = r;
      });
      var shown = {};
      var merged = [];
      var gone = 0;
      var sameOrder = true;
      var shownRows = keyedRows(ob);
      shownRows.forEach(function (r, j) {
        var k = keyOf(r);
        shown[k] = true;
        var n = fresh[k];
        if (n) {
          keepIds(r, n);
          merged.push(n);
          if (freshRows[j] !== n) sameOrder = false;
        } else {
          var c = r.cloneNode(true);
          c.classList.add("live-gone");
          c.setAttribute("data-live-gone", "");
          merged.push(c);
          gone++;
        }
      });
      var added = freshRows.filter(function (r) {
        return !shown[keyOf(r)];
      }).length;
      if (!added && !gone && sameOrder && freshRows.length === shownRows.length) continue; // nothing would move
      var others = Array.prototype.filter.call(nb.children, function (r) {
        return !(r.tagName === "TR" && r.hasAttribute("data-key"));
      });
      while (nb.firstChild) nb.removeChild(nb.firstChild);
      merged.concat(others).forEach(function (r) {
        nb.appendChild(r);
      });
      held = true;
      if (added || gone) {
        var w = wrapperOf(nb.closest("table"), next);
        w.parentNode.insertBefore(announcement(id, scope, added, gone), w);
      }
    }
    return held;
  }

  // --- focus ------------------------------------------------------------
  // An element given a temporary tabindex to hold focus keeps it through
  // morphs until focus leaves it.
  function holdFocus(el) {
    if (!el.hasAttribute("tabindex")) {
      el.setAttribute("tabindex", "-1");
      el.setAttribute("data-live-focus", "");
      el.addEventListener("blur", function drop() {
        el.removeEventListener("blur", drop);
        if (el.hasAttribute("data-live-focus")) {
          el.removeAttribute("data-live-focus");
          el.removeAttribute("tabindex");
        }
      });
    }
    el.focus({ preventScroll: true });
  }

  // --- selection ----------------------------------------------------------
  // twinOf finds node's counterpart in the new markup: the same element
  // path below its nearest ancestor with an id or a data-key.
  function twinOf(node, root, next) {
    var steps = [];
    var a = node;
    while (a !== root && !a.id && !a.hasAttribute("data-key")) {
      steps.unshift(Array.prototype.indexOf.call(a.parentElement.children, a));
      a = a.parentElement;
    }
    var t;
    if (a === root) t = next;
    else if (a.id) t = next.querySelector('[id="' + CSS.escape(a.id) + '"]');
    else t = next.querySelector('[data-key="' + CSS.escape(keyOf(a)) + '"]');
    for (var i = 0; t && i < steps.length; i++) t = t.children[steps[i]];
    return t && t.tagName === node.tagName ? t : null;
  }

  // --- one region ---------------------------------------------------------
  function applyRegion(id, force) {
    var el = document.getElementById(id);
    var html = latest[id];
    if (!el || html == null) {
      delete pending[id];
      return;
    }
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    var next = tpl.content.firstElementChild;
    if (!next) return;
    if (!morph) {
      swap(el, html); // the vendored library did not load: replace as before
      delete pending[id];
      return;
    }
    var held = prepareRows(id, el, next, force);

    // A selection: the element holding it must come out of the update
    // with the same text, or the region waits.
    var sel = activeSelection();
    var guard = null;
    var mark = null;
    if (sel && sel.getRangeAt(0).intersectsNode(el)) {
      var c = sel.getRangeAt(0).commonAncestorContainer;
      guard = c.nodeType === 1 ? c : c.parentElement;
      if (!el.contains(guard)) guard = el; // the selection runs beyond the region
      var twin = guard === el ? null : twinOf(guard, el, next);
      if (!twin || twin.textContent !== guard.textContent) return hold(id);
      mark = [sel.anchorNode, sel.anchorOffset, sel.focusNode, sel.focusOffset];
    }

    var active = document.activeElement;
    var chain = [];
    if (active && active !== document.body && el.contains(active)) {
      for (var a = active; a && a !== el.parentNode; a = a.parentNode) chain.push(a);
    }
    var ticked = keptChecks(el);
    var opened = openDetails(el);
    var scrolled = [];
    el.querySelectorAll("*").forEach(function (n) {
      if (n.scrollTop || n.scrollLeft) scrolled.push([n, n.scrollTop, n.scrollLeft]);
    });
    var wx = window.scrollX;
    var wy = window.scrollY;

    morph(el, next, {
      morphStyle: "outerHTML",
      ignoreActiveValue: true,
      callbacks: {
        beforeNodeMorphed: function (old) {
          if (old === guard) return false; // the selected text stays as it is
          if (old === document.activeElement && isTyping(old)) return false;
          return true;
        },
        beforeAttributeUpdated: function (attr, node, how) {
          if (attr === "open" && how === "remove" && node.tagName === "DETAILS") return false;
          if (attr === "tabindex" && how === "remove" && node.hasAttribute("data-live-focus")) return false;
          if (attr === "data-live-focus" && how === "remove") return false;
          if ((attr === "value" || attr === "checked") && edited.has(node)) return false;
          if (attr === "selected" && node.parentElement && edited.has(node.closest("select"))) return false;
          return true;
        },
      },
    });

    var now = document.getElementById(id);
    restoreChecks(now, ticked);
    reopen(now, opened);
    scrolled.forEach(function (s) {
      if (s[0].isConnected) {
        if (s[0].scrollTop !== s[1]) s[0].scrollTop = s[1];
        if (s[0].scrollLeft !== s[2]) s[0].scrollLeft = s[2];
      }
    });
    if (!(window.CSS && CSS.supports && CSS.supports("overflow-anchor", "auto")) && (window.scrollX !== wx || window.scrollY !== wy)) {
      window.scrollTo(wx, wy); // no scroll anchoring here: keep the window where it was
    }
    if (mark && mark[0].isConnected && mark[2].isConnected) {
      var s2 = window.getSelection();
      if (s2.anchorNode !== mark[0] || s2.anchorOffset !== mark[1] || s2.focusNode !== mark[2] || s2.focusOffset !== mark[3]) {
        try {
          s2.setBaseAndExtent(mark[0], mark[1], mark[2], mark[3]);
        } catch (e) {
          /* the nodes changed shape: leave it */
        }
      }
    }
    if (chain.length && (!active.isConnected || document.activeElement === document.body || !document.activeElement)) {
      for (var i = 1; i < chain.length; i++) {
        if (chain[i].isConnected && chain[i] !== document.body) {
          holdFocus(chain[i]);
          break;
        }
      }
      if (document.activeElement === document.body && now) holdFocus(now);
    }
    if (held) pending[id] = true;
    else delete pending[id];
    heldCount();
  }
  function hold(id) {
    pending[id] = true;
    heldCount();
  }
  function heldCount() {
    document.body.setAttribute("data-live-held", String(Object.keys(pending).length));
  }
  function swap(el, html) {
    if (el.contains(document.activeElement) && isTyping(document.activeElement)) return;
    var ticked = keptChecks(el);
    var opened = openDetails(el);
    el.outerHTML = html;
    var now = document.getElementById(el.id);
    restoreChecks(now, ticked);
    reopen(now, opened);
  }

  // Regions held back are retried once the pointer, focus or selection
  // moved (after GRACE, so passing from a row to the announcement does not
  // count as leaving).
  var timer = 0;
  function later(ms) {
    if (!Object.keys(pending).length) return;
    clearTimeout(timer);
    timer = setTimeout(function () {
      Object.keys(pending).forEach(function (id) {
        applyRegion(id, false);
      });
    }, ms);
  }
  document.addEventListener("pointerout", function () {
    later(GRACE);
  }, true);
  document.addEventListener("focusout", function () {
    later(GRACE);
  }, true);
  document.addEventListener("selectionchange", function () {
    later(GRACE / 4);
  });
  document.addEventListener("click", function (e) {
    var b = e.target && e.target.closest && e.target.closest("[data-live-show]");
    if (!b) return;
    e.preventDefault();
    var id = b.getAttribute("data-live-show");
    var region = document.getElementById(id);
    if (!region) return;
    var before = {};
    region.querySelectorAll("tr[data-key]").forEach(function (r) {
      before[keyOf(r)] = true;
    });
    applyRegion(id, true);
    region = document.getElementById(id);
    var rows = region ? region.querySelectorAll("tbody[data-live-rows] > tr[data-key]") : [];
    for (var i = 0; i < rows.length; i++) {
      if (!before[keyOf(rows[i])]) {
        // Focus goes to the first new row, where the reader's eyes go.
        var f = rows[i].querySelector("a[href],button,input,select,textarea");
        if (f) f.focus({ preventScroll: true });
        else holdFocus(rows[i]);
        break;
      }
    }
  });

  // A <details> inside a region (a row's delete confirmation) that the user
  // opened stays open across an update. It is recognised by its id, or by
  // the row it sits in (data-db, data-id, data-seq or data-key) and its
  // place there.
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
    if (el.tagName === "DETAILS" && el.open) out["#" + el.id] = true;
    el.querySelectorAll("details[open]").forEach(function (d) {
      out[detailsKey(d, el)] = true;
    });
    return out;
  }
  function reopen(el, opened) {
    if (!el) return;
    if (el.tagName === "DETAILS" && opened["#" + el.id]) el.open = true;
    el.querySelectorAll("details").forEach(function (d) {
      if (opened[detailsKey(d, el)] && !d.open) d.open = true;
    });
  }
  // Checkboxes marked data-keep-checked (a list's selection) stay as the
  // user left them when their region is updated; rows that went away take
  // their tick with them.
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
      if (Object.prototype.hasOwnProperty.call(ticked, k) && c.checked !== ticked[k]) c.checked = ticked[k];
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
      (msg.fragments || []).forEach(function (f) {
        latest[f.id] = f.html;
        applyRegion(f.id, false);
      });
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
