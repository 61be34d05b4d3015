// live.js keeps a page current over the dashboard's websocket (the wire
// format is documented in web/hub.go). The page names its subscription in
// <main data-live="page=...">; pages without it get no connection.
//
// Each frame is one op: replace swaps the element with that id for the
// server-rendered HTML, prepend inserts rows at the start of the element with
// that id (rows already on the page are not repeated), resync refetches the
// page. Unknown ids are ignored: a fragment for a row this page does not
// show is not an error. After every reconnect, on resync, and when the page
// comes back after a while hidden or offline, the page refetches itself and
// replaces <main>'s content, so an update missed while disconnected (or
// dropped by the server for being slow) is never lost; what the person did
// to the page and did not submit (boxes ticked, fields typed in, sections
// opened, the field they are in) is put back on the fresh copy. A connection refused
// because too many live pages are open (close code 4429) shows the server's
// reason in the status line and is tried again every 30 s.
//
// "Pause live updates" holds every update (and any refetch) while someone
// reads or selects, so no row moves under the cursor; the line beside it
// counts the new rows waiting, and "Resume live updates" applies them.
//
// Stable lists: a list with a new-rows bar (<button data-list="<tbody id>">,
// the message list) takes new rows live only while nobody has a row ticked
// (or "select all matching") and the page is scrolled to its top. Otherwise
// they wait behind the bar ("3 new messages"), as does a refetch, and a
// click on it puts them in. New rows go where the list's order puts them
// (data-sort, newest first, then data-id): a row older than the page's last
// belongs to a later page and is left out when there is one (data-more).
// recount asks for the list's count again (count.js, "live:recount"); a
// prepend counts as one. On a page with live parts (data-live-part, a
// failure group's counts and chart) recount fetches the page and swaps in
// those parts only.
(function () {
	"use strict";
	var main = document.getElementById("main");
	var sub = main && main.getAttribute("data-live");
	if (!sub || !window.WebSocket || !window.fetch) {
		return;
	}
	var status = document.querySelector("[data-testid=live-status]");
	var ws = null;
	var delay = 1000; // next reconnect wait: 1 s doubling to 30 s, with jitter
	var timer = 0;
	var opened = false; // a connection opened before: catch up on the next
	var hiddenAt = 0;
	var fetching = false;
	var again = false;
	var pauseBtn = document.querySelector("[data-testid=live-pause]");
	var waitingEl = document.querySelector("[data-testid=live-waiting]");
	var paused = false;
	var held = []; // ops that arrived while paused, in order
	var heldIDs = {}; // ids of the new rows among them
	var heldRows = {}; // new rows waiting, by the list they go to
	var heldRefetch = false; // a refetch was asked for while paused
	// Stable lists: the new rows waiting behind a list's bar (by row id,
	// in arrival order), and whether a refetch waits there too.
	var waiting = {}; // list id -> {order: [row ids], rows: {row id: element}}
	var waitingRefetch = false;

	function setStatus(state, text) {
		if (status) {
			status.setAttribute("data-state", state);
			status.textContent = text;
		}
	}

	function fragment(html) {
		var t = document.createElement("template");
		t.innerHTML = html;
		return t.content;
	}

	// rowWords names what a list's rows are, for the waiting line.
	function rowWords(id, n) {
		var one = id === "job-rows" ? " new job" : id === "message-rows" ? " new message" : " new row";
		return n + one + (n === 1 ? "" : "s");
	}

	function showWaiting() {
		if (!waitingEl) {
			return;
		}
		var parts = [];
		Object.keys(heldRows).forEach(function (id) {
			parts.push(rowWords(id, heldRows[id]));
		});
		if (!paused) {
			waitingEl.textContent = "";
		} else if (parts.length > 0) {
			waitingEl.textContent = "paused: " + parts.join(", ") + " waiting";
		} else if (held.length > 0 || heldRefetch) {
			waitingEl.textContent = "paused: updates waiting";
		} else {
			waitingEl.textContent = "paused";
		}
	}

	function hold(op) {
		if (op.op === "resync") {
			heldRefetch = true;
		} else {
			held.push(op);
			if (op.op === "prepend" && op.id) {
				Array.prototype.slice.call(fragment(op.html || "").children).forEach(function (c) {
					if (c.id && !heldIDs[c.id] && !document.getElementById(c.id)) {
						heldIDs[c.id] = true;
						heldRows[op.id] = (heldRows[op.id] || 0) + 1;
					}
				});
			}
		}
		showWaiting();
	}

	function setPaused(p) {
		paused = p;
		if (pauseBtn) {
			pauseBtn.textContent = p ? "Resume live updates" : "Pause live updates";
		}
		if (!p) {
			var ops = held;
			var stale = heldRefetch;
			held = [];
			heldIDs = {};
			heldRows = {};
			heldRefetch = false;
			if (stale) {
				refetch(); // the page as it is now has every held update
			} else {
				ops.forEach(apply);
			}
		}
		showWaiting();
	}

	if (pauseBtn) {
		pauseBtn.hidden = false;
		pauseBtn.addEventListener("click", function () {
			setPaused(!paused);
		});
	}

	function apply(op) {
		if (paused) {
			hold(op);
			return;
		}
		if (op.op === "resync") {
			refetch();
			return;
		}
		if (op.op === "recount") {
			recount();
			refreshParts();
			return;
		}
		if (op.op === "replace" && op.id && updateWaiting(op)) {
			return;
		}
		var el = op.id && document.getElementById(op.id);
		if (!el) {
			return;
		}
		var f = fragment(op.html || "");
		if (op.op === "replace") {
			el.replaceWith(f);
		} else if (op.op === "prepend") {
			var rows = Array.prototype.slice.call(f.children).filter(function (c) {
				return !(c.id && document.getElementById(c.id));
			});
			var bar = barFor(op.id);
			if (!bar) {
				Array.prototype.slice.call(f.children).forEach(function (c) {
					if (rows.indexOf(c) < 0) {
						c.remove(); // already on the page
					}
				});
				el.insertBefore(f, el.firstChild);
			} else {
				recount();
				rows = rows.filter(function (c) {
					return onThisPage(el, c);
				});
				if (rows.length === 0) {
					return;
				}
				if (holding()) {
					wait(op.id, rows);
					return;
				}
				insertSorted(el, rows.concat(takeWaiting(op.id)));
				showBar(op.id);
			}
		} else {
			return;
		}
		main.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
	}

	// recount tells count.js that the list's count changed.
	function recount() {
		main.dispatchEvent(new CustomEvent("live:recount", { bubbles: true }));
	}

	// refreshParts fetches the page again and swaps in its live parts
	// (elements with an id and data-live-part: a group page's counts and
	// chart), leaving the rest (a form being filled in) as it is; at most
	// once every partsEvery, the last change of a burst always fetched.
	var partsEvery = 2000;
	var partsAt = 0;
	var partsTimer = 0; // set from the request until its answer is in
	var partsAgain = false; // a change came meanwhile: fetch once more
	function refreshParts() {
		if (!main.querySelector("[data-live-part][id]")) {
			return;
		}
		if (partsTimer) {
			partsAgain = true;
			return;
		}
		partsTimer = setTimeout(function () {
			partsAt = Date.now();
			fetch(location.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
				.then(function (r) {
					return r.ok ? r.text() : null;
				})
				.then(function (html) {
					var doc = html && new DOMParser().parseFromString(html, "text/html");
					if (!doc || paused) {
						return; // paused: the resume refetches anyway
					}
					main.querySelectorAll("[data-live-part][id]").forEach(function (el) {
						var fresh = doc.getElementById(el.id);
						if (fresh) {
							el.replaceWith(document.importNode(fresh, true));
						}
					});
					main.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
				})
				.catch(function () {})
				.then(function () {
					partsTimer = 0;
					if (partsAgain) {
						partsAgain = false;
						refreshParts();
					}
				});
		}, Math.max(0, partsAt + partsEvery - Date.now()));
	}

	// barFor is the new-rows bar of the list with that id, if it has one.
	function barFor(id) {
		var b = main.querySelector("button[data-list]");
		return b && b.getAttribute("data-list") === id ? b : null;
	}

	// holding: someone has a row ticked, every match selected, or the
	// page scrolled down; new rows then wait behind the bar.
	function holding() {
		return !!main.querySelector("input.select-row:checked, #select-matching:checked") || window.scrollY > 2;
	}

	// wait puts new rows behind their list's bar (each once).
	function wait(id, rows) {
		var w = waiting[id] || (waiting[id] = { order: [], rows: {} });
		rows.forEach(function (c) {
			if (!c.id) {
				return;
			}
			if (!w.rows[c.id]) {
				w.order.push(c.id);
			}
			w.rows[c.id] = c;
		});
		showBar(id);
	}

	// takeWaiting empties a list's waiting rows and returns them.
	function takeWaiting(id) {
		var w = waiting[id];
		delete waiting[id];
		return w ? w.order.map(function (k) { return w.rows[k]; }) : [];
	}

	// updateWaiting keeps a waiting row current (a message that left the
	// broker meanwhile); true if op was for one.
	function updateWaiting(op) {
		var found = false;
		Object.keys(waiting).forEach(function (id) {
			var w = waiting[id];
			if (w.rows[op.id]) {
				var c = fragment(op.html || "").firstElementChild;
				if (c) {
					w.rows[op.id] = c;
				}
				found = true;
			}
		});
		return found;
	}

	// showBar shows how many new rows wait behind the bar (or that the
	// list itself waits to be fetched again), or hides it.
	function showBar(id) {
		var bar = barFor(id) || main.querySelector("button[data-list]");
		if (!bar) {
			return;
		}
		var n = waiting[bar.getAttribute("data-list")] ? waiting[bar.getAttribute("data-list")].order.length : 0;
		if (waitingRefetch) {
			// The page is fetched again on click: it may hold more than
			// the rows counted, or (after a reconnect) nothing new.
			bar.textContent = n > 0 ? rowWords(bar.getAttribute("data-list"), n) : "The list changed: show it";
		} else if (n > 0) {
			bar.textContent = rowWords(bar.getAttribute("data-list"), n);
		}
		bar.hidden = !waitingRefetch && n === 0;
	}

	// sortKey reads a row's place in its list: [enqueued ms, id], or null
	// for rows without one (they go first, as a prepend).
	function sortKey(r) {
		var s = r.getAttribute && r.getAttribute("data-sort");
		return s === null || s === undefined ? null : [Number(s), Number(r.getAttribute("data-id"))];
	}

	function before(a, b) { // a comes before b, newest first
		return a[0] !== b[0] ? a[0] > b[0] : a[1] > b[1];
	}

	// onThisPage: a new row belongs on this page of the list, not on a
	// later one (it is not older than the page's last row, or there is no
	// later page).
	function onThisPage(list, c) {
		var k = sortKey(c);
		var last = list.lastElementChild;
		var lk = last && sortKey(last);
		return k === null || !lk || list.getAttribute("data-more") !== "true" || before(k, lk);
	}

	// insertSorted puts rows where the list's order puts them, marks them
	// new, and returns those it placed.
	function insertSorted(list, rows) {
		var placed = [];
		rows.forEach(function (c) {
			if (c.id && document.getElementById(c.id)) {
				return;
			}
			var k = sortKey(c);
			var at = null;
			if (k === null) {
				at = list.firstElementChild;
			} else {
				for (var r = list.firstElementChild; r; r = r.nextElementSibling) {
					var rk = sortKey(r);
					if (rk && before(k, rk)) {
						at = r;
						break;
					}
				}
				if (!at && !onThisPage(list, c)) {
					return; // older than this page's last row: a later page's
				}
			}
			c.classList.add("row-new");
			list.insertBefore(c, at);
			placed.push(c);
		});
		return placed;
	}

	// showWaitingRows puts the rows waiting behind a list's bar in (or
	// refetches the page, if that waits too), then brings the first of
	// them into view without moving the page more than that.
	function showWaitingRows(bar) {
		var id = bar.getAttribute("data-list");
		if (waitingRefetch) {
			waitingRefetch = false;
			delete waiting[id];
			bar.hidden = true;
			refetch(true);
			return;
		}
		var list = document.getElementById(id);
		var placed = list ? insertSorted(list, takeWaiting(id)) : [];
		bar.hidden = true;
		main.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
		if (placed.length > 0) {
			var first = placed.reduce(function (a, c) {
				return a.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_PRECEDING ? c : a;
			});
			first.scrollIntoView({ block: "nearest" });
			var link = first.querySelector("a");
			if (link) {
				link.focus({ preventScroll: true });
			}
		}
	}

	main.addEventListener("click", function (e) {
		var bar = e.target && e.target.closest && e.target.closest("button[data-list]");
		if (bar && main.contains(bar)) {
			showWaitingRows(bar);
		}
	});

	// fieldKeys names main's form fields so that a fresh copy of the page
	// finds the same ones: tag and name, and a box's value or else the
	// field's place among those of its name (a filter's several
	// "property" fields). Fields without a name (a script's own) are left
	// out.
	function fieldKeys() {
		var keys = [];
		var seen = {};
		main.querySelectorAll("input[name], textarea[name], select[name]").forEach(function (el) {
			var k = el.tagName + " " + el.name;
			if (el.type === "checkbox" || el.type === "radio") {
				k += "=" + el.value;
			} else {
				seen[k] = (seen[k] || 0) + 1;
				k += "#" + seen[k];
			}
			keys.push([k, el]);
		});
		return keys;
	}

	// edits is what the person did to the page that a fresh copy of it
	// would undo: boxes ticked (or unticked), fields typed in or chosen but
	// not submitted (their value unlike the page's own), sections opened
	// or closed (<details>), and the field they are in. Another replica's
	// changes refetch the page whenever it ingests (HubConfig.Remote), and
	// reconnects do too: neither may lose what is being typed.
	function edits() {
		var fields = {};
		fieldKeys().forEach(function (kv) {
			var el = kv[1];
			if (el.type === "hidden" || el.type === "submit" || el.type === "button") {
				return;
			}
			if (el.type === "checkbox" || el.type === "radio") {
				if (el.checked || el.checked !== el.defaultChecked) {
					fields[kv[0]] = { checked: el.checked };
				}
			} else if (el.tagName === "SELECT") {
				var changed = Array.prototype.some.call(el.options, function (o) {
					return o.selected !== o.defaultSelected;
				});
				if (changed) {
					fields[kv[0]] = { value: el.value };
				}
			} else if (el.value !== el.defaultValue) {
				fields[kv[0]] = { value: el.value };
			}
		});
		var a = document.activeElement;
		var focused = null;
		fieldKeys().forEach(function (kv) {
			if (kv[1] === a) {
				focused = kv[0];
			}
		});
		var open = Array.prototype.map.call(main.querySelectorAll("details"), function (d) {
			return d.open;
		});
		return { fields: fields, focused: focused, open: open };
	}

	// restore puts edits back on the page's fresh copy.
	function restore(e) {
		var details = main.querySelectorAll("details");
		if (details.length === e.open.length) {
			details.forEach(function (d, i) {
				d.open = e.open[i];
			});
		}
		fieldKeys().forEach(function (kv) {
			var f = e.fields[kv[0]];
			if (f && "checked" in f) {
				kv[1].checked = f.checked;
			} else if (f) {
				kv[1].value = f.value;
			}
			if (kv[0] === e.focused) {
				kv[1].focus();
			}
		});
	}

	// refetch replaces <main>'s content with a fresh copy of the page,
	// keeping what the person did to it (edits).
	function refetch(asked) {
		if (paused) {
			heldRefetch = true;
			showWaiting();
			return;
		}
		if (!asked && main.querySelector("button[data-list]") && holding()) {
			// A stable list: the refetched page would move the rows.
			waitingRefetch = true;
			showBar();
			return;
		}
		if (fetching) {
			again = true;
			return;
		}
		fetching = true;
		fetch(location.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
			.then(function (r) {
				return r.status >= 500 ? null : r.text();
			})
			.then(function (html) {
				var m = html && new DOMParser().parseFromString(html, "text/html").getElementById("main");
				if (!m) {
					return;
				}
				var kept = edits();
				main.replaceChildren.apply(main, Array.prototype.slice.call(m.childNodes));
				waiting = {}; // the page as it is now has them
				waitingRefetch = false;
				restore(kept);
				main.dispatchEvent(new CustomEvent("live:refetch", { bubbles: true }));
			})
			.catch(function () {})
			.then(function () {
				fetching = false;
				if (again) {
					again = false;
					refetch();
				}
			});
	}

	function connect() {
		clearTimeout(timer);
		if (ws) {
			return;
		}
		// The first connection tells the hub which changes the page already
		// has (data-live-seq); later ones refetch the page on open anyway.
		var seq = !opened && main.getAttribute("data-live-seq");
		var s = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/live?" + sub + (seq ? "&seq=" + seq : ""));
		ws = s;
		s.onopen = function () {
			delay = 1000;
			setStatus("live", "live");
			if (opened) {
				refetch();
			}
			opened = true;
		};
		s.onmessage = function (e) {
			var op;
			try {
				op = JSON.parse(e.data);
			} catch (err) {
				return;
			}
			apply(op);
		};
		s.onclose = function (e) {
			if (ws !== s) {
				return;
			}
			ws = null;
			if (e.code === 4429) {
				// Refused: too many live pages are open (the server's
				// words say whose). The page still works; it tries again
				// at the longest interval.
				setStatus("refused", e.reason || "live updates are off: too many live pages are open");
				delay = 30000;
				timer = setTimeout(connect, delay * (0.5 + Math.random() / 2));
				return;
			}
			setStatus("reconnecting", "reconnecting…");
			timer = setTimeout(connect, delay * (0.5 + Math.random() / 2));
			delay = Math.min(delay * 2, 30000);
		};
	}

	// Back from sleep or a long time hidden: a socket that looks open may be
	// dead, and the page may have missed updates.
	function wake() {
		if (!ws) {
			delay = 1000;
			connect();
		} else if (Date.now() - hiddenAt > 30000) {
			refetch();
		}
	}
	document.addEventListener("visibilitychange", function () {
		if (document.hidden) {
			hiddenAt = Date.now();
		} else {
			wake();
		}
	});
	window.addEventListener("online", function () {
		hiddenAt = 0;
		wake();
	});
	connect();
})();
