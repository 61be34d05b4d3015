package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The store's SQL is written once, with SQLite's ? placeholders. On
// PostgreSQL it runs through pgx's database/sql driver behind pgConnector,
// which rewrites each ? to $1, $2, ... (outside string literals, quoted
// identifiers and comments) before pgx sees the statement, so that the
// callers keep their *sql.DB and *sql.Tx and almost every statement is the
// same text on both engines. What differs goes through the engine value
// (engine.go). The store's SQL never uses PostgreSQL's jsonb ? operators.

// pgConnector opens pgx connections whose statements are rewritten.
type pgConnector struct {
	inner sqldriver.Connector
	// readOnly marks the read pool: its read-only transactions are
	// REPEATABLE READ (one snapshot per transaction, as SQLite's).
	readOnly bool
}

func newPGConnector(cfg *pgx.ConnConfig, readOnly bool) *pgConnector {
	return &pgConnector{inner: stdlib.GetConnector(*cfg), readOnly: readOnly}
}

func (c *pgConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{Conn: conn.(*stdlib.Conn)}, nil
}

func (c *pgConnector) Driver() sqldriver.Driver { return c.inner.Driver() }

// pgConn is a pgx connection whose statements are rewritten by pgSQL.
type pgConn struct{ *stdlib.Conn }

var (
	_ sqldriver.ConnPrepareContext = (*pgConn)(nil)
	_ sqldriver.ExecerContext      = (*pgConn)(nil)
	_ sqldriver.QueryerContext     = (*pgConn)(nil)
	_ sqldriver.ConnBeginTx        = (*pgConn)(nil)
	_ sqldriver.NamedValueChecker  = (*pgConn)(nil)
	_ sqldriver.SessionResetter    = (*pgConn)(nil)
	_ sqldriver.Pinger             = (*pgConn)(nil)
)

func (c *pgConn) Prepare(query string) (sqldriver.Stmt, error) {
	return c.Conn.Prepare(pgSQL(query))
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, pgSQL(query))
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	return c.Conn.ExecContext(ctx, pgSQL(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	return c.Conn.QueryContext(ctx, pgSQL(query), args)
}

// BeginTx makes a read-only transaction of the default isolation REPEATABLE
// READ: a read transaction of the store (ListGroups, an export) reads one
// snapshot, as it does on SQLite, where PostgreSQL's default (READ
// COMMITTED) would give each statement its own.
func (c *pgConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	if opts.ReadOnly && sql.IsolationLevel(opts.Isolation) == sql.LevelDefault {
		opts.Isolation = sqldriver.IsolationLevel(sql.LevelRepeatableRead)
	}
	return c.Conn.BeginTx(ctx, opts)
}

// CheckNamedValue passes a bool as 1 or 0: the schema keeps SQLite's INTEGER
// flags on both engines (allow_poison, audited, ...), and SQLite's driver
// stores a bool that way.
func (c *pgConn) CheckNamedValue(nv *sqldriver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		if b {
			nv.Value = int64(1)
		} else {
			nv.Value = int64(0)
		}
	}
	return c.Conn.CheckNamedValue(nv)
}

// rewritten caches pgSQL's results: the store's statements are a bounded
// set of texts (built from constants), each rewritten once.
var rewritten struct {
	sync.Mutex
	m map[string]string
}

// maxRewritten bounds the cache, should a caller ever build unbounded texts.
const maxRewritten = 4096

// pgSQL is query with each ? placeholder outside literals, quoted
// identifiers, $$ bodies and comments replaced by $1, $2, ... in order.
func pgSQL(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	rewritten.Lock()
	if q, ok := rewritten.m[query]; ok {
		rewritten.Unlock()
		return q
	}
	rewritten.Unlock()
	q := rewritePlaceholders(query)
	rewritten.Lock()
	if rewritten.m == nil {
		rewritten.m = map[string]string{}
	}
	if len(rewritten.m) < maxRewritten {
		rewritten.m[query] = q
	}
	rewritten.Unlock()
	return q
}

func rewritePlaceholders(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case ch == '\'' || ch == '"':
			// A literal or quoted identifier; a doubled quote is an
			// escaped one and the scan simply continues through it.
			end := strings.IndexByte(query[i+1:], ch)
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+2])
			i += end + 1
		case ch == '$' && i+1 < len(query) && query[i+1] == '$':
			// A dollar-quoted body (a PL/pgSQL function in a migration).
			end := strings.Index(query[i+2:], "$$")
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+4])
			i += end + 3
		case ch == '-' && i+1 < len(query) && query[i+1] == '-':
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+1])
			i += end
		case ch == '/' && i+1 < len(query) && query[i+1] == '*':
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+4])
			i += end + 3
		case ch == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}
