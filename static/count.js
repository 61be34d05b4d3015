// dlqdash count: the message list is sent with its rows before their count
// is known when counting takes longer than reading the page; the count's
// paragraph then names where to get it (data-count-src), and this fetches
// it and puts it in place, with the select-all label's words. Loaded as a
// file (the Content-Security-Policy forbids inline script).
//
// The count is live: when the live script says the list's count changed
// ("live:recount": new rows matched it, or messages left the broker) it is
// fetched again from the same address, at most once every recountEvery
// (the last change of a burst is always counted), with the page's
// dead-letter chart when it has one.
(function () {
	"use strict";

	var recountEvery = 2000;
	var src = ""; // this page's count address
	var asked = 0; // requests made; only the latest one's answer is used
	var lastAt = 0;
	var timer = 0;

	// load fetches the count from url (src, perhaps with the chart) and
	// puts it in place if it is still this page's latest.
	function load(url, from, mine) {
		fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
			.then(function (r) { return r.ok ? r.text() : null; })
			.then(function (html) {
				var doc = html && new DOMParser().parseFromString(html, "text/html");
				var fresh = doc && doc.getElementById("matching");
				var now = document.getElementById("matching");
				if (!fresh || !now || mine !== asked || from !== src) { return; } // a newer answer comes, or the page changed
				now.replaceWith(document.importNode(fresh, true));
				var chart = doc.querySelector("[data-testid=dead-letter-chart]");
				var shown = document.querySelector("[data-testid=dead-letter-chart]");
				if (chart && shown) {
					shown.replaceWith(document.importNode(chart, true));
				}
				var label = document.getElementById("select-matching-text");
				if (label && fresh.getAttribute("data-select")) {
					label.textContent = fresh.getAttribute("data-select");
				}
			})
			.catch(function () {});
	}

	function fill() {
		var p = document.getElementById("matching");
		var from = p && p.getAttribute("data-count-src");
		if (!from) { return; }
		p.removeAttribute("data-count-src"); // once per paragraph
		src = from;
		clearTimeout(timer);
		timer = 0;
		lastAt = Date.now();
		load(from, from, ++asked);
	}

	// withChart asks for the page's chart too (in its range) when it has
	// one: its counts change with the list's.
	function withChart(from) {
		if (!document.querySelector("[data-testid=dead-letter-chart]")) { return from; }
		var rng = new URLSearchParams(location.search).get("chart") || "24h";
		return from + (from.indexOf("?") < 0 ? "?" : "&") + "chart=" + encodeURIComponent(rng);
	}

	function recount() {
		if (!src || timer) { return; } // no count here, or one is due
		var wait = Math.max(0, lastAt + recountEvery - Date.now());
		timer = setTimeout(function () {
			timer = 0;
			lastAt = Date.now();
			load(withChart(src), src, ++asked);
		}, wait);
	}

	// A page refetched by live.js brings a new paragraph.
	document.addEventListener("live:refetch", fill);
	document.addEventListener("live:recount", recount);
	fill();
})();
