// The identities page: live preview of a forced seed (the next id, and a
// warning when the value lowers the counter). Loaded by views/identities.templ.
(function () {
	"use strict";
	var form = document.querySelector("[data-testid=seed-form]");
	if (!form) return;
	var sep = form.getAttribute("data-sep") || "/";
	var prefix = form.querySelector("[name=prefix]");
	var value = form.querySelector("[name=value]");
	var preview = document.getElementById("seed-preview");
	var warning = document.getElementById("seed-warning");
	function current(name) {
		name = name.toLowerCase();
		if (name.slice(-1) !== "|") name += "|";
		var opts = document.querySelectorAll("#identity-names option");
		for (var i = 0; i < opts.length; i++) {
			if (opts[i].value === name) return Number(opts[i].getAttribute("data-value"));
		}
		return null;
	}
	function update() {
		var p = prefix.value.trim();
		var v = value.value.trim();
		if (!p || !/^\d+$/.test(v)) {
			preview.textContent = "Type a prefix and a value to see the next document id.";
			warning.hidden = true;
			return;
		}
		var base = p.slice(-1) === "|" ? p.slice(0, -1) : p;
		var next;
		try { next = (BigInt(v) + 1n).toString(); } catch (e) { next = String(Number(v) + 1); }
		preview.textContent = "next document: " + base + sep + next;
		var cur = current(p);
		if (cur !== null && Number(v) < cur) {
			warning.textContent = "Lower than the current value " + cur + ": ids already handed out may come up again (taken ones are skipped). Tick the confirmation to lower it.";
			warning.hidden = false;
		} else {
			warning.hidden = true;
		}
	}
	prefix.addEventListener("input", update);
	value.addEventListener("input", update);
})();
