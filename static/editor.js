// Rookery studio: the JSON editor. Every textarea[data-editor=json] gets a
// CodeMirror 6 editor (static/vendor/codemirror, the global RookeryCM) in
// its place: highlighting, line numbers, bracket matching, folding, search,
// and JSON errors at line and column as you type. The textarea stays in the
// form, hidden, and always holds the editor's text, so the form posts the
// same field as without JavaScript.
//
// On the document page it also marks the strings that are ids of other
// documents (the server lists them under "References") with a link, and
// watches the live fragment #doc-server: when the stored version's change
// vector differs from the one the editor's text is based on, it says so in
// the #doc-changed live region, without touching the text, and offers to
// reload or to compare the two.
(function () {
  "use strict";
  var CM = window.RookeryCM;
  if (!CM) return;

  // ---- JSON checking: the first error with its place -------------------

  var MAX_DEPTH = 1000;

  // jsonError returns null for a JSON object, or {pos, msg} for the first
  // place where text stops being one.
  function jsonError(text) {
    var i = 0;
    var n = text.length;
    function fail(msg, at) {
      throw { pos: at === undefined ? i : at, msg: msg };
    }
    function ws() {
      while (i < n) {
        var c = text.charCodeAt(i);
        if (c === 32 || c === 9 || c === 10 || c === 13) i++;
        else break;
      }
    }
    function str() {
      var start = i;
      i++;
      for (;;) {
        if (i >= n) fail("This string is not closed (a \" is missing)", start);
        var c = text.charCodeAt(i);
        if (c === 34) {
          i++;
          return;
        }
        if (c === 92) {
          var e = text.charAt(i + 1);
          if (e === "u") {
            if (!/^[0-9a-fA-F]{4}$/.test(text.substr(i + 2, 4))) fail("\\u must be followed by four hexadecimal digits");
            i += 6;
            continue;
          }
          if ('"\\/bfnrt'.indexOf(e) < 0 || e === "") fail("Invalid escape \\" + e + " (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
          i += 2;
          continue;
        }
        if (c < 32) fail("A line break or control character inside a string (write \\n for a line break)");
        i++;
      }
    }
    var num = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    function value(depth) {
      if (depth > MAX_DEPTH) fail("Nested more than " + MAX_DEPTH + " levels deep");
      ws();
      if (i >= n) fail("The text ends where a value should be");
      var ch = text.charAt(i);
      if (ch === "{") {
        i++;
        ws();
        if (text.charAt(i) === "}") {
          i++;
          return;
        }
        for (;;) {
          ws();
          if (text.charAt(i) === "}") fail("A comma before '}' (remove the trailing comma)");
          if (text.charAt(i) !== '"') fail(i >= n ? "The text ends inside an object (a '}' is missing)" : "Expected a member name in double quotes");
          str();
          ws();
          if (text.charAt(i) !== ":") fail("Expected ':' after the member name");
          i++;
          value(depth + 1);
          ws();
          if (text.charAt(i) === ",") {
            i++;
            continue;
          }
          if (text.charAt(i) === "}") {
            i++;
            return;
          }
          fail(i >= n ? "The text ends inside an object (a '}' is missing)" : "Expected ',' or '}' after the member's value");
        }
      }
      if (ch === "[") {
        i++;
        ws();
        if (text.charAt(i) === "]") {
          i++;
          return;
        }
        for (;;) {
          ws();
          if (text.charAt(i) === "]") fail("A comma before ']' (remove the trailing comma)");
          value(depth + 1);
          ws();
          if (text.charAt(i) === ",") {
            i++;
            continue;
          }
          if (text.charAt(i) === "]") {
            i++;
            return;
          }
          fail(i >= n ? "The text ends inside an array (a ']' is missing)" : "Expected ',' or ']' after the array element");
        }
      }
      if (ch === '"') return str();
      var words = ["true", "false", "null"];
      for (var w = 0; w < words.length; w++) {
        if (text.startsWith(words[w], i)) {
          i += words[w].length;
          return;
        }
      }
      if (ch === "-" || (ch >= "0" && ch <= "9")) {
        num.lastIndex = i;
        var m = num.exec(text);
        if (!m) fail("Invalid number");
        i += m[0].length;
        return;
      }
      if (ch === "'") fail("Strings take double quotes, not single quotes");
      fail("Unexpected " + JSON.stringify(ch) + " where a value should be");
    }
    try {
      ws();
      if (i >= n) fail("The document is empty; write a JSON object, e.g. {}");
      if (text.charAt(i) !== "{") fail("A document must be a JSON object, starting with '{'");
      value(1);
      ws();
      if (i < n) fail("Unexpected text after the end of the document");
    } catch (e) {
      if (e && typeof e.pos === "number") return e;
      throw e;
    }
    return null;
  }

  function place(doc, pos) {
    var line = doc.lineAt(Math.min(pos, doc.length));
    return { line: line.number, col: pos - line.from + 1 };
  }

  // ---- references: strings that are ids of stored documents ------------

  function refMap() {
    var out = {};
    document.querySelectorAll("[data-testid=doc-ref][data-ref-id]").forEach(function (a) {
      out[a.getAttribute("data-ref-id").toLowerCase()] = a.getAttribute("href");
    });
    return out;
  }

  class RefLink extends CM.WidgetType {
    constructor(href, id) {
      super();
      this.href = href;
      this.id = id;
    }
    eq(o) {
      return o.href === this.href;
    }
    toDOM() {
      var a = document.createElement("a");
      a.href = this.href;
      a.className = "cm-ref-link";
      a.textContent = "↗";
      a.title = "Open " + this.id;
      a.setAttribute("aria-label", "Open document " + this.id);
      a.setAttribute("data-testid", "editor-ref-link");
      a.setAttribute("data-ref-id", this.id);
      return a;
    }
    ignoreEvent() {
      return true; // the browser follows the link
    }
  }

  function refDecorations(view, refs) {
    var b = new CM.RangeSetBuilder();
    var tree = CM.syntaxTree(view.state);
    view.visibleRanges.forEach(function (r) {
      tree.iterate({
        from: r.from,
        to: r.to,
        enter: function (node) {
          if (node.name !== "String") return;
          var raw = view.state.doc.sliceString(node.from, node.to);
          var v;
          try {
            v = JSON.parse(raw);
          } catch (e) {
            return;
          }
          if (typeof v !== "string") return;
          var href = refs[v.toLowerCase()];
          if (!href) return;
          b.add(node.from, node.to, CM.Decoration.mark({ class: "cm-doc-ref", attributes: { title: v + " is a document: follow ↗ to open it" } }));
          b.add(node.to, node.to, CM.Decoration.widget({ widget: new RefLink(href, v), side: 1 }));
        },
      });
    });
    return b.finish();
  }

  function refPlugin(refs) {
    return CM.ViewPlugin.define(
      function (view) {
        return {
          decorations: refDecorations(view, refs),
          update: function (u) {
            if (u.docChanged || u.viewportChanged || CM.syntaxTree(u.startState) !== CM.syntaxTree(u.state)) {
              this.decorations = refDecorations(u.view, refs);
            }
          },
        };
      },
      {
        decorations: function (p) {
          return p.decorations;
        },
      }
    );
  }

  // ---- the editor -------------------------------------------------------

  var theme = CM.EditorView.theme({
    "&": { border: "1px solid var(--border, var(--line, #c8c8c8))", borderRadius: "4px", backgroundColor: "var(--panel, #fff)", color: "var(--fg, var(--ink, #1b1b1b))" },
    "&.cm-focused": { outline: "3px solid #ffb000", outlineOffset: "1px" },
    ".cm-scroller": {
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
      fontSize: "13px",
      lineHeight: "1.5",
      minHeight: "16em",
      maxHeight: "70vh",
    },
    ".cm-gutters": { backgroundColor: "var(--bg, #f6f6f6)", color: "var(--muted, #666)", borderRight: "1px solid var(--border, var(--line, #ddd))" },
    ".cm-content": { caretColor: "var(--fg, var(--ink, #1b1b1b))" },
    ".cm-doc-ref": { textDecoration: "underline dotted", textUnderlineOffset: "2px" },
    ".cm-ref-link": { marginLeft: "2px", padding: "0 3px", borderRadius: "3px", textDecoration: "none", color: "var(--accent, #0b5cad)", fontFamily: "system-ui, sans-serif" },
    ".cm-ref-link:hover, .cm-ref-link:focus-visible": { outline: "1px solid var(--accent, #0b5cad)" },
  });

  // shadowHost puts a CodeMirror view inside a shadow root. CodeMirror
  // styles itself with generated rules; in a document it would add them in
  // a <style> element, which the studio's CSP (style-src 'self') refuses,
  // while in a shadow root it adopts a constructed style sheet, which the
  // CSP allows. Custom properties (the theme's colours) inherit inside.
  function shadowHost(className, testid) {
    var host = document.createElement("div");
    host.className = className;
    host.setAttribute("data-testid", testid);
    var root = host.attachShadow({ mode: "open" });
    return { host: host, root: root };
  }

  function enhance(ta) {
    var form = ta.form;
    var status = form && form.querySelector("[data-testid=editor-status]");
    var label = ta.id && document.querySelector('label[for="' + ta.id + '"]');
    var sh = shadowHost("json-editor", "json-editor");
    var host = sh.host;
    ta.parentNode.insertBefore(host, ta);
    ta.hidden = true;

    function setStatus(err, doc) {
      if (!status) return;
      if (!err) {
        status.textContent = "";
        status.removeAttribute("data-line");
        status.classList.remove("editor-status-error");
        return;
      }
      var p = place(doc, err.pos);
      status.textContent = "Line " + p.line + ", column " + p.col + ": " + err.msg;
      status.setAttribute("data-line", String(p.line));
      status.setAttribute("data-col", String(p.col));
      status.classList.add("editor-status-error");
    }

    var lint = CM.linter(
      function (view) {
        var doc = view.state.doc;
        var err = jsonError(doc.toString());
        setStatus(err, doc);
        if (!err) return [];
        var from = Math.min(err.pos, doc.length);
        var p = place(doc, from);
        return [{ from: from, to: Math.min(from + 1, doc.length), severity: "error", message: "Line " + p.line + ", column " + p.col + ": " + err.msg }];
      },
      { delay: 250 }
    );

    // Inside the shadow root, ids of the page cannot be referred to: the
    // editor is named and described by text.
    var attrs = { "data-testid": "json-editor-content" };
    if (label) attrs["aria-label"] = label.textContent.trim();
    var help = ta.getAttribute("aria-describedby") && document.getElementById(ta.getAttribute("aria-describedby"));
    if (help) attrs["aria-description"] = help.textContent.replace(/\s+/g, " ").trim();

    var exts = [
      CM.basicSetup,
      CM.json(),
      lint,
      CM.lintGutter(),
      theme,
      CM.EditorView.lineWrapping,
      CM.EditorView.contentAttributes.of(attrs),
      CM.EditorView.updateListener.of(function (u) {
        if (u.docChanged) {
          ta.value = u.state.doc.toString();
          host.setAttribute("data-dirty", "true");
        }
      }),
    ];
    var refs = refMap();
    if (Object.keys(refs).length) exts.push(refPlugin(refs));

    var view = new CM.EditorView({
      state: CM.EditorState.create({ doc: ta.value, extensions: exts }),
      parent: sh.root,
      root: sh.root,
    });
    if (label) {
      // The label's text now names the editor; a click on it focuses the
      // editor instead of the hidden textarea.
      label.removeAttribute("for");
      label.addEventListener("click", function () {
        view.focus();
      });
    }
    // The server refused the text for a syntax error: put the cursor there.
    var refused = document.querySelector("[data-testid=doc-error][data-line]");
    if (refused && refused.getAttribute("data-line")) {
      var ln = Math.min(parseInt(refused.getAttribute("data-line"), 10) || 1, view.state.doc.lines);
      var line = view.state.doc.line(ln);
      var col = parseInt(refused.getAttribute("data-col"), 10) || 1;
      var pos = Math.min(line.from + col - 1, line.to);
      view.dispatch({ selection: { anchor: pos }, effects: CM.EditorView.scrollIntoView(pos, { y: "center" }) });
    }
    var initial = jsonError(ta.value);
    setStatus(initial, view.state.doc);
    return { view: view, form: form, host: host };
  }

  // ---- a concurrent change on the server ---------------------------------

  function watchServer(ed) {
    var region = document.getElementById("doc-changed");
    var first = document.getElementById("doc-server");
    if (!region || !first) return;
    var form = ed && ed.form && ed.form.hasAttribute("data-loaded-cv") ? ed.form : null;
    // The version the page stands on: the editor's base, or (a page
    // without the form) what the page showed when it loaded.
    var base = form ? "stored|" + form.getAttribute("data-loaded-cv") : first.getAttribute("data-state") + "|" + (first.getAttribute("data-cv") || "");
    var shown = "";

    function el(tag, text, attrs) {
      var e = document.createElement(tag);
      if (text) e.textContent = text;
      for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
      return e;
    }
    function dirty() {
      return ed && ed.host.getAttribute("data-dirty") === "true";
    }
    function reloadLink(url) {
      var a = el("a", "Reload", { href: url, "data-testid": "doc-changed-reload" });
      a.addEventListener("click", function (ev) {
        if (dirty() && !window.confirm("Reload the stored version? Your text in the editor is not saved and will be lost.")) ev.preventDefault();
      });
      return a;
    }
    function check() {
      var s = document.getElementById("doc-server");
      if (!s) return;
      var state = s.getAttribute("data-state");
      var cv = s.getAttribute("data-cv") || "";
      var key = state + "|" + cv;
      if (key === base) key = "";
      if (key === shown) return;
      shown = key;
      region.textContent = "";
      region.classList.remove("doc-changed-on");
      if (!key) return;
      region.classList.add("doc-changed-on");
      var docURL = (form && form.getAttribute("data-doc-url")) || location.pathname + location.search;
      var p = el("p");
      var mine = ed ? " Your text in the editor is untouched" : "";
      if (state === "stored" && base.indexOf("conflict|") === 0) {
        p.append(el("strong", "The conflict was resolved on the server."), " ", reloadLink(docURL));
      } else if (state === "stored") {
        p.append(el("strong", "This document was changed on the server"), " at " + (s.getAttribute("data-modified") || "an unknown time") + " (change vector ", el("code", cv), ")." + (mine ? mine + "; saving it now would be refused." : ""), " ");
        p.append(reloadLink(docURL));
        if (ed && form) {
          p.append(" · ");
          var b = el("button", "Compare", { type: "button", "data-testid": "doc-changed-compare" });
          b.addEventListener("click", function () {
            compare(ed);
          });
          p.append(b);
        }
      } else if (state === "gone") {
        p.append(el("strong", "This document was deleted on the server."), mine ? mine + "; copy what you need, saving it would be refused." : "");
      } else {
        var c = el("a", "Resolve the conflict", { href: docURL.replace("/doc?", "/conflicts/doc?"), "data-testid": "doc-changed-conflict" });
        p.append(el("strong", "This document went into conflict on the server."), (mine ? mine + "." : "") + " ", c);
      }
      region.append(p);
    }
    // The live script replaces #doc-server (whole, or morphed in place):
    // any change under body is a reason to look again; the check is cheap.
    new MutationObserver(check).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-cv", "data-state"] });
    check();

    // compare shows the stored version next to the editor's text (read
    // only). "Keep my text" bases the text on that version: the next save
    // replaces it, knowingly.
    function compare(ed) {
      var panel = document.getElementById("doc-compare");
      if (panel) panel.remove();
      panel = el("section", "", { id: "doc-compare", class: "card doc-compare", "data-testid": "doc-compare", "aria-labelledby": "doc-compare-title" });
      panel.append(el("h2", "The server's version (left) and your text (right)", { id: "doc-compare-title" }));
      var note = el("p", "Loading the server's version…", { class: "muted", "data-testid": "doc-compare-note" });
      panel.append(note);
      ed.host.closest("section").after(panel);
      fetch(form.getAttribute("data-api"), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("the server answered " + r.status);
          return r.json();
        })
        .then(function (body) {
          var doc = body && body.Results && body.Results[0];
          if (!doc) throw new Error("the document is not stored any more");
          var meta = doc["@metadata"] || {};
          var cv = meta["@change-vector"] || "";
          ["@id", "@change-vector", "@last-modified", "@flags"].forEach(function (k) {
            delete meta[k];
          });
          var theirs = JSON.stringify(doc, null, 2);
          note.textContent = "Change vector " + cv + ". Differences are highlighted; neither side can be edited here.";
          var sh = shadowHost("doc-merge", "doc-merge");
          panel.append(sh.host);
          var ro = [CM.basicSetup, CM.json(), theme, CM.EditorView.lineWrapping, CM.EditorState.readOnly.of(true), CM.EditorView.editable.of(false)];
          new CM.MergeView({ a: { doc: theirs, extensions: ro }, b: { doc: ed.view.state.doc.toString(), extensions: ro }, parent: sh.root, root: sh.root, collapseUnchanged: { margin: 3, minSize: 6 } });
          var row = el("p", "", { class: "row-form" });
          var keep = el("button", "Keep my text (the next save replaces this version)", { type: "button", "data-testid": "doc-compare-keep" });
          keep.addEventListener("click", function () {
            form.querySelector("input[name=changeVector]").value = cv;
            form.setAttribute("data-loaded-cv", cv);
            base = "stored|" + cv;
            shown = "?";
            check();
            panel.remove();
            ed.view.focus();
          });
          var close = el("button", "Close", { type: "button", "data-testid": "doc-compare-close" });
          close.addEventListener("click", function () {
            panel.remove();
          });
          row.append(keep, " ", close);
          panel.append(row);
        })
        .catch(function (e) {
          note.textContent = "The server's version could not be loaded: " + e.message + ".";
        });
    }
  }

  var editors = [];
  document.querySelectorAll("textarea[data-editor=json]").forEach(function (ta) {
    editors.push(enhance(ta));
  });
  watchServer(editors[0]);
})();
