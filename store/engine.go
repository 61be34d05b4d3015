package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// engine is the database behind a Store: SQLite (a file) or PostgreSQL (a
// server), chosen once by Open. The store's behaviour is written once, in
// SQL both engines run (pgdriver.go rewrites the placeholders); the few
// places where their SQL differs ask the engine for their fragment, so
// every such difference is one method here, named for what it means.
type engine struct {
	postgres bool
}

var (
	sqliteEngine   = engine{}
	postgresEngine = engine{postgres: true}
)

// Name is "sqlite" or "postgres".
func (e engine) Name() string {
	if e.postgres {
		return "postgres"
	}
	return "sqlite"
}

// indexedBy makes SQLite walk the named index (INDEXED BY): the list
// planner chooses it from the counter tables (read_filter.go). PostgreSQL
// has no such hint: its planner chooses among the same indexes, which its
// migrations create with the same columns.
func (e engine) indexedBy(index string) string {
	if e.postgres || index == "" {
		return ""
	}
	return "INDEXED BY " + index
}

// notIndexed makes SQLite walk the table by rowid (or look rows up by id)
// instead of an index; nothing on PostgreSQL.
func (e engine) notIndexed() string {
	if e.postgres {
		return ""
	}
	return "NOT INDEXED"
}

// dbClockMillis is the database's clock as Unix ms, in SQL (Store.nowMillis
// is the process's). A time that replicas compare (property_keys.decided_at)
// is taken from it, not from each replica's own clock, which can be skewed.
func (e engine) dbClockMillis() string {
	if e.postgres {
		return "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS bigint)"
	}
	return "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
}

// jsonInts is a subquery of the integers of a JSON array passed as one
// parameter (idList): a list of any length as one argument.
func (e engine) jsonInts() string {
	if e.postgres {
		return "SELECT CAST(value AS bigint) FROM json_array_elements_text(CAST(? AS json)) AS value"
	}
	return "SELECT value FROM json_each(?)"
}

// jsonTexts is jsonInts for a JSON array of strings.
func (e engine) jsonTexts() string {
	if e.postgres {
		return "SELECT value FROM json_array_elements_text(CAST(? AS json)) AS value"
	}
	return "SELECT value FROM json_each(?)"
}

// least and greatest are the smaller and the larger of two values (SQLite's
// two-argument min and max).
func (e engine) least(a, b string) string {
	if e.postgres {
		return "least(" + a + ", " + b + ")"
	}
	return "min(" + a + ", " + b + ")"
}

func (e engine) greatest(a, b string) string {
	if e.postgres {
		return "greatest(" + a + ", " + b + ")"
	}
	return "max(" + a + ", " + b + ")"
}

// searchMatch is the condition "this row of messages_fts matches the
// search passed as the parameter" (searchArg renders the parameter).
func (e engine) searchMatch() string {
	if e.postgres {
		return "messages_fts.doc @@ CAST(? AS tsquery)"
	}
	return "messages_fts MATCH ?"
}

// searchProbe is the condition "message m matches the search passed as the
// parameter", asked of m alone. On PostgreSQL a correlated scalar subquery,
// which its planner cannot turn into a join: an EXISTS became a hash join
// over every hit at a million messages (56 ms of server CPU a page).
func (e engine) searchProbe() string {
	if e.postgres {
		return "(SELECT messages_fts.doc FROM messages_fts WHERE messages_fts.rowid = m.id) @@ CAST(? AS tsquery)"
	}
	return "EXISTS (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = m.id)"
}

// searchArg is m as searchMatch's parameter: an FTS5 expression, or a
// tsquery.
func (e engine) searchArg(m match) string {
	if e.postgres {
		return m.tsquery()
	}
	return m.fts5()
}

// jsonProperty is the text of the top-level property whose key is the
// parameter, in the properties JSON of messages m: a string's characters,
// anything else its JSON text; NULL when the properties are not JSON or
// lack the key. Its parameters: the key as a JSON path (jsonPath) three
// times on SQLite, the key itself once on PostgreSQL (propertyArgs).
func (e engine) jsonProperty() string {
	if e.postgres {
		return "dlqdash_json_text(m.properties, ?)"
	}
	return `CASE WHEN json_valid(m.properties) THEN (CASE json_type(m.properties, ?) WHEN 'text'
			THEN json_extract(m.properties, ?) ELSE m.properties -> ? END) END`
}

func (e engine) jsonPropertyArgs(key string) []any {
	if e.postgres {
		return []any{key}
	}
	path := "$." + jsonString(key)
	return []any{path, path, path}
}

// jsonField is the text of field name of the JSON object in column col,
// NULL when col is not JSON or lacks it (audit params).
func (e engine) jsonField(col, name string) string {
	if e.postgres {
		return "dlqdash_json_text(" + col + ", '" + name + "')"
	}
	return "(CASE WHEN json_valid(" + col + ") THEN json_extract(" + col + ", '$." + name + "') END)"
}

// jobIDOfCopy is the job id a replayed copy's properties (column col)
// carry in dlqdash.job_id, as an integer (SQLite's CAST: 0 when it is not
// one).
func (e engine) jobIDOfCopy(col string) string {
	if e.postgres {
		return "dlqdash_integer(dlqdash_json_text(" + col + ", 'dlqdash.job_id'))"
	}
	return "CAST(json_extract(" + col + `, '$."dlqdash.job_id"') AS INTEGER)`
}

// jobColumns are the columns scanJob reads: the reasons of a job's copies
// come as a JSON array of [reason, count] pairs (json_group_array on
// SQLite, json_agg on PostgreSQL).
func (e engine) jobColumns() string {
	if !e.postgres {
		return jobColumns
	}
	return strings.Replace(jobColumns, jobReasonsSQLite, jobReasonsPG, 1)
}

// uniqueViolation reports whether err is the violation of a unique
// constraint: on SQLite the one on column (table.column), on PostgreSQL
// the constraint named constraint.
func (e engine) uniqueViolation(err error, column, constraint string) bool {
	if e.postgres {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed: "+column)
}

// lockWriter makes tx, a write transaction, the only one running: on
// SQLite it takes the catalog file's write lock (sqliteLockCatalog), on the
// one writer connection; on
// PostgreSQL it takes the store's advisory lock, held until tx ends, so
// that write transactions of every replica on the database run one at a
// time, as they do on one SQLite file. Every read-then-write transaction of
// the store (ApplyPage's present rows, the next message ids, the audit
// chain's head, a job's items) relies on it.
func (e engine) lockWriter(ctx context.Context, tx *sql.Tx) error {
	if !e.postgres {
		return sqliteLockCatalog(ctx, tx)
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, writeLockKey)
	return err
}

// sqliteLockCatalog takes the catalog file's write lock in tx, a deferred
// transaction that has not read yet, as BEGIN IMMEDIATE would, but not the
// attached index file's (BEGIN IMMEDIATE locks every attached file, and the
// indexer writes that one in parallel: index_file.go). A write statement
// that changes no row takes the lock all the same, waiting busy_timeout.
func sqliteLockCatalog(ctx context.Context, tx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) error {
	_, err := tx.ExecContext(ctx, `UPDATE main.schema_migrations SET version = version WHERE 0`)
	return err
}

// writeLockKey is the PostgreSQL advisory lock every write transaction of
// the store holds (engine.lockWriter): an arbitrary constant, "dlqdash
// writer" in ASCII.
const writeLockKey int64 = 0x646c716477726974

// migrateLockKey serialises the migrations of replicas starting together.
const migrateLockKey int64 = 0x646c71646d696772

// IsPostgresURL reports whether target, what Open takes, names a
// PostgreSQL database rather than a SQLite file.
func IsPostgresURL(target string) bool { return isPostgresURL(target) }

func isPostgresURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}
