package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
	return c.PrepareContext(context.Background(), query)
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	st, err := c.Conn.PrepareContext(ctx, pgSQL(query))
	if err != nil {
		return nil, err
	}
	return &pgStmt{Stmt: st.(*stdlib.Stmt)}, nil
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	return c.Conn.ExecContext(ctx, pgSQL(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	rows, err := c.Conn.QueryContext(ctx, pgSQL(query), args)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

// pgStmt is a prepared statement whose rows' text is decoded (pgText).
type pgStmt struct{ *stdlib.Stmt }

func (s *pgStmt) QueryContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	rows, err := s.Stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

// pgRows decodes the text values of each row (pgText).
type pgRows struct{ sqldriver.Rows }

func (r pgRows) Next(dest []sqldriver.Value) error {
	if err := r.Rows.Next(dest); err != nil {
		return err
	}
	for i, v := range dest {
		if s, ok := v.(string); ok && strings.Contains(s, byteRunePrefix) {
			dest[i] = decodePGText(s)
		}
	}
	return nil
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
// stores a bool that way. A string goes as pgText.
func (c *pgConn) CheckNamedValue(nv *sqldriver.NamedValue) error {
	switch v := nv.Value.(type) {
	case bool:
		if v {
			nv.Value = int64(1)
		} else {
			nv.Value = int64(0)
		}
	case string:
		nv.Value = encodePGText(v)
	case *string:
		if v == nil {
			nv.Value = nil
		} else {
			nv.Value = encodePGText(*v)
		}
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
			nv.Value = encodePGText(rv.String()) // a named string type
		}
	}
	return c.Conn.CheckNamedValue(nv)
}

// A SQLite TEXT value holds any bytes, and the catalog keeps a message's
// strings exactly as the broker gave them, invalid UTF-8 and NUL included;
// PostgreSQL's text refuses both. So text goes to PostgreSQL through a
// reversible encoding, and comes back decoded: each byte that is not part
// of valid UTF-8, and each NUL, becomes one of the 256 "byte runes"
// U+10FF00..U+10FFFF (private use), as does each byte of a byte rune that
// was in the string itself; every other character is unchanged. Decoding
// turns each byte rune back into its byte. Valid text without NUL or byte
// runes (all of it in practice) passes unchanged; equal strings encode
// equally, so = and IN compare as on SQLite.
const (
	byteRuneBase = 0x10FF00
	// byteRunePrefix starts the UTF-8 of every byte rune (F4 8F BC..BF).
	byteRunePrefix = "\xf4\x8f"
)

func encodePGText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && !strings.Contains(s, byteRunePrefix) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r == 0:
			b.WriteRune(byteRuneBase + rune(s[i]))
		case r >= byteRuneBase:
			for j := range size {
				b.WriteRune(byteRuneBase + rune(s[i+j]))
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func decodePGText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= byteRuneBase && r <= utf8.MaxRune {
			b.WriteByte(byte(r - byteRuneBase))
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
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
