package store

import (
	"bytes"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestCopyTextRoundTrips: a field written with copyText (COPY's text
// format) reads back as it was, the characters the format escapes included.
func TestCopyTextRoundTrips(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	s := OpenFresh(t, "postgres")
	ctx := t.Context()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE copy_text (n bigint, t text)`); err != nil {
		t.Fatal(err)
	}
	values := []string{"plain", `back\slash`, "tab\there", "new\nline", "carriage\rreturn", `\N`, `\\.`, "'quoted' \"too\"", ""}
	var buf bytes.Buffer
	for i, v := range values {
		buf.WriteString(string(rune('0' + i)))
		buf.WriteByte('\t')
		copyText(&buf, v)
		buf.WriteByte('\n')
	}
	tx, ic, err := s.beginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.release()
	defer tx.Rollback()
	if err := ic.withConn(func(c *pgx.Conn) error {
		_, err := c.PgConn().CopyFrom(ctx, &buf, "COPY copy_text (n, t) FROM STDIN")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT t FROM copy_text ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if !slices.Equal(got, values) {
		t.Errorf("read back %q, want %q", got, values)
	}
}
