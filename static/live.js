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
// dropped by the server for being slow) is never lost. A connection refused
// because too many live pages are open (close code 4429) shows the server's
// reason in the status line and is tried again every 30 s.
//
// "Pause live updates" holds every update (and any refetch) while someone
// reads or selects, so no row moves under the cursor; the line beside it
// counts the new rows waiting, and "Resume live updates" applies them.
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
		var el = op.id && document.getElementById(op.id);
		if (!el) {
			return;
		}
		var f = fragment(op.html || "");
		if (op.op === "replace") {
			el.replaceWith(f);
		} else if (op.op === "prepend") {
			Array.prototype.slice.call(f.children).forEach(function (c) {
				if (c.id && document.getElementById(c.id)) {
					c.remove();
				}
			});
			el.insertBefore(f, el.firstChild);
		} else {
			return;
		}
		main.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
	}

	// refetch replaces <main>'s content with a fresh copy of the page,
	// keeping the boxes the user ticked and the field being typed in.
	function refetch() {
		if (paused) {
			heldRefetch = true;
			showWaiting();
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
				var ticked = {};
				main.querySelectorAll("input[type=checkbox]:checked").forEach(function (i) {
					ticked[i.name + "=" + i.value] = true;
				});
				var a = document.activeElement;
				var typing = a && main.contains(a) && a.name && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) ? a : null;
				main.replaceChildren.apply(main, Array.prototype.slice.call(m.childNodes));
				main.querySelectorAll("input[type=checkbox]").forEach(function (i) {
					if (ticked[i.name + "=" + i.value]) {
						i.checked = true;
					}
				});
				if (typing) {
					var same = main.querySelector("[name='" + typing.name.replace(/['\\]/g, "\\$&") + "']");
					if (same && same.tagName === typing.tagName) {
						same.value = typing.value;
						same.focus();
					}
				}
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
