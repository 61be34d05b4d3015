// Package highlight finds a search's matches in texts with FTS5 itself, so
// that what a page marks is exactly what the catalog's search matches. It
// uses SQLite (an in-memory database of its own): the catalog (package
// store) offers it to the dashboard, which touches no SQLite.
package highlight

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/internal/search"
	_ "modernc.org/sqlite" // the highlighter's own in-memory FTS5 index
)

// Highlighter finds a query's matches in texts with FTS5 itself: the texts
// go into an in-memory FTS5 table with the catalog's tokenizer, for the
// length of one transaction, and FTS5's highlight() marks what matches. So
// case, diacritics, prefixes and phrases match exactly as the search does.
// (The catalog's index is contentless: it cannot highlight.)
type Highlighter struct{ db *sql.DB }

// New opens the highlighter's in-memory database (one per
// connection of its small pool).
func New() (*Highlighter, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("open highlighter: %w", err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(0)
	return &Highlighter{db: db}, nil
}

// Close closes the in-memory database.
func (h *Highlighter) Close() error { return h.db.Close() }

// Markers highlight() puts around a match: control characters, which the
// tokenizer treats as separators; Spans replaces them (and NUL) in the
// texts by spaces first, which keeps every offset.
const (
	openMark  = "\x01"
	closeMark = "\x02"
)

// Spans returns the matches of any of q's phrases in each text, in order
// (nil for a text without one). A text that is not valid UTF-8 gets none.
func (h *Highlighter) Spans(ctx context.Context, q search.Query, texts []string) ([][]search.Span, error) {
	out := make([][]search.Span, len(texts))
	clean := make([]string, len(texts))
	any := false
	for i, t := range texts {
		if t == "" || !utf8.ValidString(t) {
			continue
		}
		clean[i] = strings.Map(func(r rune) rune {
			if r == 0 || r == 1 || r == 2 {
				return ' '
			}
			return r
		}, t)
		any = true
	}
	if !any || len(q.Phrases) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	conn, err := h.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE VIRTUAL TABLE IF NOT EXISTS hl USING fts5 (t, tokenize = '`+search.Tokenize+`')`); err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	defer tx.Rollback() // the texts never stay
	if _, err := tx.ExecContext(ctx, `INSERT INTO hl (rowid, t) SELECT key + 1, value FROM json_each(?) WHERE value <> ''`, string(arr)); err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT rowid - 1, highlight(hl, 0, char(1), char(2)) FROM hl WHERE hl MATCH ?`, q.Any())
	if err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var marked string
		if err := rows.Scan(&i, &marked); err != nil {
			return nil, fmt.Errorf("highlight: %w", err)
		}
		if i >= 0 && i < len(out) {
			out[i] = spansOf(marked)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	return out, nil
}

// spansOf reads highlight()'s output: the text with the markers, whose
// offsets are the text's once the markers are taken out.
func spansOf(marked string) []search.Span {
	var out []search.Span
	pos, start := 0, -1
	for i := 0; i < len(marked); i++ {
		switch marked[i] {
		case openMark[0]:
			start = pos
		case closeMark[0]:
			if start >= 0 && pos > start {
				if n := len(out); n > 0 && out[n-1].End == start {
					out[n-1].End = pos // adjacent tokens of one phrase
				} else {
					out = append(out, search.Span{Start: start, End: pos})
				}
			}
			start = -1
		default:
			pos++
		}
	}
	return out
}
