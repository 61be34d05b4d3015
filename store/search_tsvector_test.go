package store

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// The search document builder (tsBuilder) against the builder it replaced
// (tsvectorBefore, kept here as it was): the same literal for every
// document.

func TestTSVectorAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 2026))
	for i := range 20000 {
		body, reason, desc, props := randomDocument(rng, i)
		checkTSVectorAsBefore(t, body, reason, desc, props)
		if t.Failed() {
			return
		}
	}
}

func FuzzTSVector(f *testing.F) {
	f.Add("Order-123 failed: order é", "Timeout", "", `{"k":"it's"}`)
	f.Add(strings.Repeat("a ", 300), "ÀÉÎ Straße", "x\\y\t'z'", "\U0010FF41\U0010FFFD\U00100000 q")
	f.Add("\xff\xfeabc\x00def", "İıK", "ǅ ᾈ", "١٢٣ ²³")
	f.Fuzz(func(t *testing.T, body, reason, desc, props string) {
		checkTSVectorAsBefore(t, body, reason, desc, props)
	})
}

func checkTSVectorAsBefore(t *testing.T, body, reason, desc, props string) {
	t.Helper()
	want := tsvectorBefore(body, reason, desc, props)
	if got := tsvector(body, reason, desc, props); got != want {
		t.Errorf("tsvector(%q, %q, %q, %q)\n = %s\nwant %s", body, reason, desc, props, got, want)
		return
	}
}

// randomDocument is a document of random words: ASCII, Latin letters with
// diacritics, other scripts, digits, private-use and byte runes, invalid
// UTF-8 and separators; some long enough to reach the position limits.
func randomDocument(rng *rand.Rand, i int) (body, reason, desc, props string) {
	pieces := []string{"order", "Order", "ORDER", "é", "Müller", "straße", "ǅ", "İ", "ı", "Ω", "σς", "日本", "١٢", "²", "½",
		"\ue000", "\U0010FF41", "\U00100001", "\xff", "\x00", "'", "\\", "\t", "\n", " ", "-", ":", ",", "{", "\"", "…",
		"tenant", "t-9", "30012", "x", "Ab", strconv.Itoa(i)}
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			if rng.IntN(3) == 0 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	n := rng.IntN(60)
	switch i % 500 {
	case 0:
		n = 40000 // past 16,383 positions
	case 250: // past 16,383 positions, with distinct lexemes
		var b strings.Builder
		for k := range 17000 {
			b.WriteString("w" + strconv.Itoa(k%9000) + " ")
		}
		return b.String(), "r", "", ""
	case 100: // one lexeme at the last position in two columns
		var b strings.Builder
		for k := range 16390 {
			b.WriteString("p" + strconv.Itoa(k) + " ")
		}
		return "dup dup", "", "", b.String() + "dup dup"
	case 1:
		return strings.Repeat("same ", 400), "r", "d", "{}" // past 256 positions of one lexeme
	case 2:
		return strings.Repeat("é", 1100) + " " + strings.Repeat("a", 2046) + " " + strings.Repeat("b", 2047) + " " + strings.Repeat("é", 1023) + "x", "", "", ""
	}
	body = text(n)
	if !utf8.ValidString(body) && rng.IntN(2) == 0 {
		body = strings.ToValidUTF8(body, "?")
	}
	return body, text(rng.IntN(4)), text(rng.IntN(8)), text(rng.IntN(12))
}
func tsvectorBefore(body, reason, description, properties string) string {
	type lexeme struct {
		pos []byte // "1A,5A"
		n   int
	}
	index := make(map[string]int, 64)
	var lexemes []lexeme
	var order []string
	pos := 0
	var tok []byte
	add := func(weight byte) {
		pos = min(pos+1, maxTSPosition)
		if len(tok) > maxTSLexeme {
			return
		}
		i, ok := index[string(tok)]
		if !ok {
			i = len(lexemes)
			t := string(tok)
			index[t] = i
			order = append(order, t)
			lexemes = append(lexemes, lexeme{})
		}
		l := &lexemes[i]
		if l.n >= maxTSPositions {
			return
		}
		if l.n > 0 {
			l.pos = append(l.pos, ',')
		}
		l.pos = strconv.AppendInt(l.pos, int64(pos), 10)
		l.pos = append(l.pos, weight)
		l.n++
	}
	column := func(text string, weight byte) {
		for _, r := range text {
			if isTokenRune(r) {
				tok = utf8.AppendRune(tok, foldRune(r))
				continue
			}
			if len(tok) > 0 {
				add(weight)
				tok = tok[:0]
			}
		}
		if len(tok) > 0 {
			add(weight)
			tok = tok[:0]
		}
		pos = min(pos+1, maxTSPosition)
	}
	column(reason, 'B')
	column(description, 'C')
	column(properties, 'D')
	column(body, 'A')
	size := 0
	for i, t := range order {
		size += len(t) + len(lexemes[i].pos) + 4
	}
	out := make([]byte, 0, size)
	for i, t := range order {
		if i > 0 {
			out = append(out, ' ')
		}
		out = appendTSQuoted(out, []byte(t))
		out = append(out, ':')
		out = append(out, lexemes[i].pos...)
	}
	return string(out)
}

func BenchmarkTSVectorBefore(b *testing.B) {
	body := strings.Repeat(`{"orderId":"ORD-2026-118","customer":"Müller GmbH","items":[{"sku":"A-17","qty":3}],"note":"pending backorder"} `, 8)
	b.ReportAllocs()
	for b.Loop() {
		tsvectorBefore(body, "MaxDeliveryCountExceeded", "Timeout after 30012 ms", `{"tenant":"t-9","region":"westeurope"}`)
	}
}

func BenchmarkTSVectorBinary(b *testing.B) {
	body := strings.Repeat(`{"orderId":"ORD-2026-118","customer":"Müller GmbH","items":[{"sku":"A-17","qty":3}],"note":"pending backorder"} `, 8)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = appendTSVectorBinary(buf[:0], body, "MaxDeliveryCountExceeded", "Timeout after 30012 ms", `{"tenant":"t-9","region":"westeurope"}`)
	}
}

// The binary search documents the indexer COPYs are, once stored, the
// documents the literals parse into: both into one table, for generated
// documents, compared by the server.
func TestTSVectorBinaryAsLiteral(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, FreshTarget(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE docs (id bigint PRIMARY KEY, literal tsvector, bin tsvector)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(20, 2027))
	const n = 1500
	stream := []byte(pgCopyBinaryHeader)
	for i := range n {
		body, reason, desc, props := randomDocument(rng, i)
		m := storedForIndex{id: int64(-1 - i), body: []byte(body), reason: reason, desc: desc, props: []byte(props)}
		if _, err := conn.Exec(ctx, `INSERT INTO docs (id, literal) VALUES ($1, CAST($2 AS tsvector))`, i,
			encodePGText(m.doc())); err != nil {
			t.Fatal(err)
		}
		stream = m.appendDocRow(stream)
	}
	stream = append(stream, 0xff, 0xff)
	if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(stream), `COPY docs (id, bin) FROM STDIN (FORMAT binary)`); err != nil {
		t.Fatal(err)
	}
	var same, differ int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE a.literal::text = b.bin::text), count(*) FILTER (WHERE a.literal::text <> b.bin::text)
		FROM docs a JOIN docs b ON b.id = -1 - a.id`).Scan(&same, &differ); err != nil {
		t.Fatal(err)
	}
	if same != n {
		var id int64
		var lit, bin string
		conn.QueryRow(ctx, `SELECT a.id, a.literal::text, b.bin::text FROM docs a JOIN docs b ON b.id = -1 - a.id
			WHERE a.literal::text <> b.bin::text LIMIT 1`).Scan(&id, &lit, &bin)
		t.Errorf("%d of %d documents the same, %d differ; document %d:\nliteral %.600s\nbinary  %.600s", same, n, differ, id, lit, bin)
	}
}
