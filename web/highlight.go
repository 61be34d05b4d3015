package web

import (
	"context"
	"log/slog"
	"strings"

	"github.com/dlqdash/dlqdash/internal/search"
	"github.com/dlqdash/dlqdash/views"
)

// maxHighlightBytes bounds the text of a message's body the page marks
// matches in (today all it shows, bodyShown): FTS5 marks 64 KiB of JSON
// with a match every 50 bytes in 4 ms, but 256 KiB in 80 ms
// (BenchmarkHighlight), so a page that shows more marks its start only.
const maxHighlightBytes = 64 << 10

// marks are the matches of the search q in each text, as package search
// finds them (FTS5's own rules: case, diacritics, prefixes, phrases); nil
// for none. Highlighting is an aid: a search it cannot parse, or a failure,
// marks nothing (the list reports a bad q itself) and is logged.
func (s *Server) marks(ctx context.Context, q string, texts []string) [][]views.Mark {
	return marksOf(ctx, s.catalog, s.logger, q, texts)
}

// matchFinder is a catalog that finds a search's matches in texts by its
// search index's own rules (*store.Store; the dashboard touches no
// SQLite).
type matchFinder interface {
	SearchMatches(ctx context.Context, q search.Query, texts []string) ([][]search.Span, error)
}

// marksOf asks catalog (when it is a matchFinder) for the marks.
func marksOf(ctx context.Context, catalog Catalog, log *slog.Logger, q string, texts []string) [][]views.Mark {
	mf, ok := catalog.(matchFinder)
	if !ok || strings.TrimSpace(q) == "" || len(texts) == 0 {
		return nil
	}
	pq, err := search.Parse(q)
	if err != nil {
		return nil
	}
	spans, err := mf.SearchMatches(ctx, pq, texts)
	if err != nil {
		log.Warn("cannot highlight the search's matches", "error", err.Error())
		return nil
	}
	out := make([][]views.Mark, len(spans))
	for i, ss := range spans {
		for _, sp := range ss {
			out[i] = append(out[i], views.Mark{Start: sp.Start, End: sp.End})
		}
	}
	return out
}

// markPreviews marks the search q's matches in the rows' previews and
// makes each row's link carry the search to the message's page.
func (s *Server) markPreviews(ctx context.Context, q string, items []views.MessageItem) {
	markItems(ctx, s.catalog, s.logger, q, items)
}

// markItems is markPreviews for the server and the live hub.
func markItems(ctx context.Context, catalog Catalog, log *slog.Logger, q string, items []views.MessageItem) {
	if strings.TrimSpace(q) == "" {
		return
	}
	texts := make([]string, len(items))
	for i := range items {
		items[i].Search = q
		texts[i] = items[i].Preview
	}
	for i, m := range marksOf(ctx, catalog, log, q, texts) {
		items[i].PreviewMarks = m
	}
}

// markBody marks the search q's matches in the body a message's page
// shows (its first maxHighlightBytes).
func (s *Server) markBody(ctx context.Context, q string, d *views.MessageDetail) {
	if strings.TrimSpace(q) == "" {
		return
	}
	switch d.Body.Kind {
	case views.BodyJSON, views.BodyXML, views.BodyText:
	default:
		return
	}
	d.Search = q
	text := d.Body.Text
	if len(text) > maxHighlightBytes {
		cut := maxHighlightBytes
		for cut > 0 && !isRuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		d.BodyMarksCut = true
	}
	if m := s.marks(ctx, q, []string{text}); len(m) == 1 {
		d.BodyMarks = m[0]
	}
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
