package main

func dashboardFlags(f *flagSet) {
	f.str("addr", envAddr, defaultAddr, "address the dashboard listens on (host:port; port 0 picks a free port)")
	f.str("db", envDB, defaultDB, "SQLite database file (created if missing)")
	f.str("poll", envPoll, defaultPoll, "how often entity counts are read (a Go duration: 500ms, 1s, 5s)")
	f.str("retention", envRetention, defaultRetention, "how long messages that left Service Bus stay in the catalog (30d, 72h; 0 keeps them forever)")
	f.str("orphan-after", envOrphanAfter, defaultOrphanAfter, "how long a message may stay deferred before the inventory flags it as a deferred orphan (a Go duration: 24h, 90m)")
	f.str("poison-cap", envPoisonCap, defaultPoisonCap, "how many times a message lineage may be replayed before replays skip it as poison (unless allow_poison)")
	f.str("metrics-addr", envMetricsAddr, "", "address of a listener of its own for GET /metrics (host:port); empty serves /metrics on --addr")
	if f.fs.Name() == "dlqdash serve" {
		f.str("admin-endpoint", envAdminEndpoint, "", "admin (HTTP/ATOM) API base URL (default https://<namespace>/, or http://<endpoint host>:5300 with UseDevelopmentEmulator=true)")
	}
	authFlags(f)
	logFlags(f)
}
