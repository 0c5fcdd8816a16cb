// The Import/Export page (views/smuggler.templ). Without this script the
// page still works: the options form re-renders the command lines on the
// server, the export form downloads the dump, and the import form posts the
// file with the default options. With it:
//   - the command lines and the download's options follow the export
//     options as they change (the server renders them: one source);
//   - the export and the import get an operation id first, so the page's
//     live region follows exactly that operation;
//   - the import posts the options chosen (importOptions first, then the
//     file, as RavenDB's studio does) without leaving the page;
//   - the Copy buttons copy a command line.
(function () {
  "use strict";
  var options = document.getElementById("export-options");
  var download = document.getElementById("export-download");
  var importForm = document.getElementById("import-form");
  if (!options || !download || !importForm) return;

  function nextOperationURL(action) {
    return action.replace(/\/smuggler\/(export|import)$/, "/operations/next-operation-id");
  }
  function nextOperationId(action) {
    return fetch(nextOperationURL(action), { headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("could not get an operation id (" + r.status + ")");
      return r.json();
    }).then(function (j) { return j.Id; });
  }
  function setStatus(el, text, isError) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("err", !!isError);
    el.classList.toggle("muted", !isError);
  }
  function errorText(r, text) {
    try {
      var j = JSON.parse(text);
      if (j && j.Message) return j.Message;
    } catch (e) {}
    return "HTTP " + r.status + (text ? ": " + text.slice(0, 300) : "");
  }

  // Export: the command box follows the options.
  var apply = options.querySelector(".smug-apply");
  if (apply) apply.hidden = true;
  var commandURL = options.getAttribute("data-command-url");
  var pending = Promise.resolve();
  var timer = null;
  var seq = 0;
  function refreshCommand() {
    var q = new URLSearchParams(new FormData(options));
    var mine = ++seq;
    pending = fetch(commandURL + "&" + q.toString(), { headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (html) {
        if (mine !== seq) return; // a later change is on its way
        var box = document.getElementById("export-command");
        if (box) box.outerHTML = html;
      })
      .catch(function (e) {
        setStatus(document.getElementById("export-status"), "The command could not be updated: " + e.message, true);
      });
    return pending;
  }
  function scheduleRefresh() {
    clearTimeout(timer);
    timer = setTimeout(refreshCommand, 200);
  }
  options.addEventListener("input", scheduleRefresh);
  options.addEventListener("change", scheduleRefresh);
  options.addEventListener("submit", function (ev) {
    ev.preventDefault();
    clearTimeout(timer);
    refreshCommand();
  });

  var exportBase = download.getAttribute("action");
  download.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var status = document.getElementById("export-status");
    clearTimeout(timer);
    refreshCommand().then(function () {
      var box = document.getElementById("export-command");
      if (box && box.getAttribute("data-valid") === "false") {
        var p = box.querySelector("[data-testid=export-problem]");
        setStatus(status, p ? p.textContent : "These options cannot be exported.", true);
        return;
      }
      return nextOperationId(exportBase).then(function (id) {
        download.setAttribute("action", exportBase + "?operationId=" + encodeURIComponent(id));
        download.setAttribute("data-op", String(id));
        setStatus(status, "Export " + id + " started: the download follows; its progress is below.", false);
        download.submit();
      });
    }).catch(function (e) {
      setStatus(status, "The export could not start: " + e.message, true);
    });
  });

  // Copy buttons.
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var ta = document.createElement("textarea");
      ta.value = text;
      ta.setAttribute("readonly", "");
      ta.className = "sr-only";
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) {}
      document.body.removeChild(ta);
      if (ok) resolve(); else reject(new Error("the browser refused"));
    });
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest ? ev.target.closest("[data-copy]") : null;
    if (!b) return;
    var src = document.getElementById(b.getAttribute("data-copy"));
    if (!src) return;
    copyText(src.textContent).then(function () {
      b.textContent = "Copied";
      b.setAttribute("data-copied", "true");
      setTimeout(function () { b.textContent = "Copy"; b.removeAttribute("data-copied"); }, 2000);
    }, function (e) {
      b.textContent = "Select and copy by hand";
      setStatus(document.getElementById("export-status"), "Copy failed: " + e.message, true);
    });
  });

  // Import: the options chosen, then the file, to the API's endpoint.
  var importBase = importForm.getAttribute("action");
  importForm.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var status = document.getElementById("import-status");
    var button = importForm.querySelector("button[type=submit]");
    var input = importForm.querySelector("input[type=file]");
    var file = input && input.files && input.files[0];
    if (!file) {
      setStatus(status, "Choose a dump file first.", true);
      return;
    }
    var types = [];
    importForm.querySelectorAll("input[name=itype]:checked").forEach(function (c) { types.push(c.value); });
    if (types.length === 0) {
      setStatus(status, "Nothing to import: tick at least one item type.", true);
      return;
    }
    var opts = {
      OperateOnTypes: types.join(","),
      IncludeExpired: !!importForm.querySelector("input[name=iexpired]:checked"),
    };
    if (importForm.querySelector("input[name=itransform]:checked")) {
      opts.TransformScript = importForm.querySelector("textarea[name=iscript]").value;
    }
    button.disabled = true;
    nextOperationId(importBase).then(function (id) {
      importForm.setAttribute("data-op", String(id));
      setStatus(status, "Import " + id + " of " + file.name + " running: its progress is below.", false);
      var fd = new FormData();
      fd.append("importOptions", JSON.stringify(opts));
      fd.append("file", file, file.name);
      return fetch(importBase + "?operationId=" + encodeURIComponent(id), { method: "POST", body: fd }).then(function (r) {
        return r.text().then(function (text) {
          if (!r.ok) {
            setStatus(status, "Import " + id + " stopped: " + errorText(r, text), true);
            return;
          }
          var docs = "";
          try { docs = " " + JSON.parse(text).Documents.ReadCount + " documents read."; } catch (e) {}
          setStatus(status, "Import " + id + " finished." + docs, false);
        });
      });
    }).catch(function (e) {
      setStatus(status, "The import could not run: " + e.message, true);
    }).then(function () {
      button.disabled = false;
    });
  });
})();
