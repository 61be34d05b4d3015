// dlqdash selection: the message list's checkboxes and the message page's
// copy button. Loaded as a file (the Content-Security-Policy forbids inline
// script); the pages work without it, it only adds convenience.
(function () {
	"use strict";

	function rows() {
		return Array.prototype.slice.call(document.querySelectorAll("input.select-row"));
	}

	function update() {
		var all = document.getElementById("select-matching");
		var out = document.getElementById("selected-count");
		var page = document.getElementById("select-page");
		var boxes = rows();
		var n = boxes.filter(function (b) { return b.checked; }).length;
		if (page) {
			page.checked = boxes.length > 0 && n === boxes.length;
			page.indeterminate = n > 0 && n < boxes.length;
		}
		if (!out) { return; }
		var any = (all && all.checked) || n > 0;
		if (all && all.checked) {
			out.textContent = "every message matching the filter is selected";
		} else {
			out.textContent = n + " selected";
		}
		// Replay… and Discard… need a selection: disabled, with the hint
		// saying so, until there is one. (Without this script the server
		// answers an empty selection with the same words.)
		var hint = document.getElementById("selection-hint");
		document.querySelectorAll("#selection button[name=action]").forEach(function (b) {
			b.disabled = !any;
		});
		if (hint) {
			hint.textContent = hint.getAttribute(any ? "data-ready" : "data-empty");
		}
	}

	document.addEventListener("change", function (ev) {
		var t = ev.target;
		if (!(t instanceof HTMLInputElement)) { return; }
		if (t.id === "select-page") {
			rows().forEach(function (b) { b.checked = t.checked; });
		} else if (t.id === "select-matching") {
			// Selecting every match replaces a choice of rows.
			rows().forEach(function (b) { b.disabled = t.checked; });
		}
		if (t.id === "select-page" || t.id === "select-matching" || t.classList.contains("select-row")) {
			update();
		}
	});

	// Rows the live script prepends start unchecked; keep the counter honest.
	var body = document.getElementById("message-rows");
	if (body && window.MutationObserver) {
		new MutationObserver(update).observe(body, { childList: true });
	}

	// A refetched page (live.js) brings fresh buttons and rows.
	document.addEventListener("live:refetch", update);

	// Copy buttons: shown only where the clipboard can be written.
	document.querySelectorAll("button.copy").forEach(function (btn) {
		if (!navigator.clipboard) { return; }
		btn.hidden = false;
		btn.addEventListener("click", function () {
			var el = document.getElementById(btn.getAttribute("data-copy-target"));
			if (!el) { return; }
			navigator.clipboard.writeText(el.textContent).then(function () {
				btn.textContent = "Copied";
			}, function () {
				btn.textContent = "Copy failed";
			});
		});
	});

	update();
})();
