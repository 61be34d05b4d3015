// dlqdash property filter: the filter bar's property picker offers the
// application property keys the listed messages have (GET
// /api/v1/messages/properties with the list's filter) and, once a key is
// chosen, its common values; "Add property filter" opens the list with one
// more property=key=value (a chip then shows it). Options are built as DOM
// nodes with textContent: keys and values are the senders' text, never
// markup. Loaded as a file (the Content-Security-Policy forbids inline
// script).
(function () {
	"use strict";

	var cache = {}; // answers by URL: a live refetch redraws the form

	function get(url) {
		if (!cache[url]) {
			cache[url] = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
				.then(function (r) { return r.ok ? r.json() : null; })
				.catch(function () { return null; });
		}
		return cache[url];
	}

	function withParam(url, name, value) {
		return url + (url.indexOf("?") >= 0 ? "&" : "?") + encodeURIComponent(name) + "=" + encodeURIComponent(value);
	}

	function option(value, label) {
		var o = document.createElement("option");
		o.value = value;
		o.textContent = label;
		return o;
	}

	function setup() {
		var picker = document.querySelector("[data-testid=property-picker]");
		if (!picker || picker.getAttribute("data-ready")) { return; }
		picker.setAttribute("data-ready", "1");
		var src = picker.getAttribute("data-keys-src");
		var keySel = picker.querySelector("#property-key");
		var valueIn = picker.querySelector("#property-value");
		var values = picker.querySelector("#property-values");
		var add = picker.querySelector("#property-add");

		get(src).then(function (ans) {
			if (!ans || !ans.keys || ans.keys.length === 0) { return; }
			ans.keys.forEach(function (k) {
				keySel.appendChild(option(k.key, k.key + " (" + k.count + ")"));
			});
			picker.hidden = false;
		});

		function ready() {
			add.disabled = !(keySel.value && valueIn.value !== "");
		}
		keySel.addEventListener("change", function () {
			values.textContent = "";
			valueIn.value = "";
			valueIn.disabled = !keySel.value;
			ready();
			if (!keySel.value) { return; }
			var key = keySel.value;
			get(withParam(src, "key", key)).then(function (ans) {
				if (!ans || ans.key !== keySel.value) { return; }
				ans.values.forEach(function (v) {
					values.appendChild(option(v.value, v.value + " (" + v.count + ")"));
				});
				picker.setAttribute("data-values-for", key);
			});
			valueIn.focus();
		});
		valueIn.addEventListener("input", ready);
		function go() {
			if (add.disabled) { return; }
			location.assign(withParam(picker.getAttribute("data-list-url"), "property", keySel.value + "=" + valueIn.value));
		}
		add.addEventListener("click", go);
		valueIn.addEventListener("keydown", function (e) {
			if (e.key === "Enter") {
				e.preventDefault(); // not the filter form's own submit
				go();
			}
		});
	}

	document.addEventListener("live:refetch", setup);
	setup();
})();
