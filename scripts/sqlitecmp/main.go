// Command sqlitecmp runs two of the catalog's write workloads, statement
// for statement, on one SQLite driver: the pure-Go translation dlqdash
// uses (modernc.org/sqlite, -driver sqlite) or the same SQLite compiled
// from C through cgo (github.com/mattn/go-sqlite3, -driver sqlite3), and
// reports the wall and CPU time a message. It measures what the Go
// translation costs on the ingest's statements (issue 18, BENCHMARKS.md).
//
//	rows:   the message rows and bodies with every index of the catalog's
//	        messages table, 1,000 messages a transaction (the ingest);
//	search: the search index, 32,768 messages a transaction (the indexer).
//
// The messages come from a dlqdash catalog (-src), such as the benchmarks'
// cached million. It is its own module, so that the cgo driver is no
// dependency of dlqdash:
//
//	cd scripts/sqlitecmp && CGO_ENABLED=1 go build -tags sqlite_fts5 -o /tmp/sqlitecmp .
//	/tmp/sqlitecmp -driver sqlite -work search -src /tmp/dlqdash-catalog-…-n1000000.db
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3" // SQLite in C, through cgo
	_ "modernc.org/sqlite"          // SQLite translated to Go: dlqdash's
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	driver := flag.String("driver", "sqlite", "sqlite (modernc) or sqlite3 (mattn, cgo)")
	src := flag.String("src", "", "a dlqdash catalog to read messages from")
	n := flag.Int64("n", 300000, "messages")
	work := flag.String("work", "rows", "rows (message rows, bodies, list indexes; 1,000 a transaction) or search (FTS5; 32,768 a transaction)")
	flag.Parse()
	if *src == "" {
		log.Fatal("-src: name a dlqdash catalog to read the messages from")
	}
	if _, err := os.Stat(*src); err != nil {
		log.Fatalf("-src: %v", err)
	}
	dir, err := os.MkdirTemp("", "sqlitecmp-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open(*driver, filepath.Join(dir, "t.db"))
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		if _, err := db.Exec(q, args...); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	var version string
	if err := db.QueryRow(`SELECT sqlite_version()`).Scan(&version); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{`PRAGMA journal_mode = WAL`, `PRAGMA synchronous = NORMAL`, `PRAGMA temp_store = MEMORY`,
		`ATTACH DATABASE '` + *src + `' AS src`} {
		exec(q)
	}
	batch := int64(1000)
	var stmts []string
	switch *work {
	case "rows":
		rows, err := db.Query(`SELECT sql FROM src.sqlite_master WHERE tbl_name IN ('messages', 'bodies') AND type IN ('table', 'index') AND sql IS NOT NULL`)
		if err != nil {
			log.Fatal(err)
		}
		var ddl []string
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				log.Fatal(err)
			}
			ddl = append(ddl, q)
		}
		if err := rows.Close(); err != nil {
			log.Fatal(err)
		}
		for _, q := range ddl {
			exec(q)
		}
		stmts = []string{`INSERT INTO messages SELECT * FROM src.messages WHERE id BETWEEN ? AND ?`,
			`INSERT INTO bodies SELECT * FROM src.bodies WHERE message_id BETWEEN ? AND ?`}
	case "search":
		batch = 32768
		exec(`CREATE VIRTUAL TABLE messages_fts USING fts5 (body, reason, description, properties,
			content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2')`)
		exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 0)`)
		exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('crisismerge', 64)`)
		stmts = []string{`INSERT INTO messages_fts (rowid, body, reason, description, properties)
			SELECT m.id, CAST(b.body AS TEXT), coalesce(m.dead_letter_reason, ''), coalesce(m.dead_letter_description, ''), m.properties
			FROM src.messages m JOIN src.bodies b ON b.message_id = m.id WHERE m.id BETWEEN ? AND ? ORDER BY m.id`}
	default:
		log.Fatalf("unknown work %q", *work)
	}
	start, c0 := time.Now(), cpu()
	for lo := int64(1); lo <= *n; lo += batch {
		hi := min(lo+batch-1, *n)
		tx, err := db.Begin()
		if err != nil {
			log.Fatal(err)
		}
		for _, q := range stmts {
			if _, err := tx.Exec(q, lo, hi); err != nil {
				log.Fatalf("%s: %v", q, err)
			}
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	wall, used := time.Since(start), cpu()-c0
	fmt.Printf("%-8s %-7s SQLite %s: %d messages in %s, %.1f µs of CPU a message\n", *driver, *work, version, *n,
		wall.Round(time.Millisecond), float64(used.Microseconds())/float64(*n))
}
