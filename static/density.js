// density.js: how tall list rows are, compact (one line each, the default)
// or comfortable (text wraps), remembered in this browser. It is loaded in
// <head> without defer, so the choice applies before the first paint; the
// header's toggle (hidden without this script) switches it.
(function () {
	"use strict";
	var key = "dlqdash.density";
	var root = document.documentElement;

	function stored() {
		try {
			return window.localStorage.getItem(key) === "comfortable" ? "comfortable" : "compact";
		} catch (e) {
			return "compact"; // storage refused (a private window, say)
		}
	}

	root.setAttribute("data-density", stored());

	document.addEventListener("DOMContentLoaded", function () {
		var btn = document.getElementById("density-toggle");
		if (!btn) {
			return;
		}
		function show() {
			btn.setAttribute("aria-pressed", root.getAttribute("data-density") === "compact" ? "true" : "false");
		}
		btn.hidden = false;
		show();
		btn.addEventListener("click", function () {
			var next = root.getAttribute("data-density") === "compact" ? "comfortable" : "compact";
			root.setAttribute("data-density", next);
			try {
				window.localStorage.setItem(key, next);
			} catch (e) {
				// Not remembered; the page still switches.
			}
			show();
		});
	});
})();
