package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/dlqdash/dlqdash/internal/search"
	"github.com/dlqdash/dlqdash/internal/search/highlight"
)

// matchFinder is the catalog's highlighter (package highlight: an
// in-memory FTS5 table of its own, opened at first use), which the
// dashboard asks through SearchMatches: it touches no SQLite itself.
type matchFinder struct {
	once sync.Once
	h    *highlight.Highlighter
	err  error
}

// SearchMatches returns the matches of q in each text, by the search
// index's own rules (case, diacritics, prefixes, phrases), nil for a text
// without one.
func (s *Store) SearchMatches(ctx context.Context, q search.Query, texts []string) ([][]search.Span, error) {
	s.matches.once.Do(func() { s.matches.h, s.matches.err = highlight.New() })
	if s.matches.err != nil {
		return nil, fmt.Errorf("search matches: %w", s.matches.err)
	}
	spans, err := s.matches.h.Spans(ctx, q, texts)
	if err != nil {
		return nil, fmt.Errorf("search matches: %w", err)
	}
	return spans, nil
}

// closeMatches closes the highlighter, if it was opened.
func (s *Store) closeMatches() error {
	var err error
	s.matches.once.Do(func() {}) // none may open after Close
	if s.matches.h != nil {
		err = s.matches.h.Close()
	}
	return err
}
