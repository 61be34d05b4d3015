// dlqdash count: the message list is sent with its rows before their count
// is known when counting takes longer than reading the page; the count's
// paragraph then names where to get it (data-count-src), and this fetches
// it and puts it in place, with the select-all label's words. Loaded as a
// file (the Content-Security-Policy forbids inline script).
(function () {
	"use strict";

	function fill() {
		var p = document.getElementById("matching");
		var src = p && p.getAttribute("data-count-src");
		if (!src) { return; }
		p.removeAttribute("data-count-src"); // once per paragraph
		fetch(src, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
			.then(function (r) { return r.ok ? r.text() : null; })
			.then(function (html) {
				var doc = html && new DOMParser().parseFromString(html, "text/html");
				var fresh = doc && doc.getElementById("matching");
				var now = document.getElementById("matching");
				if (!fresh || !now || now !== p) { return; } // the page was refetched meanwhile
				now.replaceWith(document.importNode(fresh, true));
				var label = document.getElementById("select-matching-text");
				if (label && fresh.getAttribute("data-select")) {
					label.textContent = fresh.getAttribute("data-select");
				}
			})
			.catch(function () {});
	}

	// A page refetched by live.js brings a new paragraph.
	document.addEventListener("live:refetch", fill);
	fill();
})();
