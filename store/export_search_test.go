package store

import "context"

// SetFetchMaxForTest sets how many hits a list fetches by id at most (the
// "fetch" search strategy), until the returned func runs.
func SetFetchMaxForTest(n int) (restore func()) {
	old := ftsFetchMax
	ftsFetchMax = n
	return func() { ftsFetchMax = old }
}

// AnalyzeForTest refreshes PostgreSQL's statistics (ANALYZE), from which
// its planner estimates a search's hits; SQLite counts them: nothing to do.
func AnalyzeForTest(ctx context.Context, s *Store) error {
	if !s.eng.postgres {
		return nil
	}
	_, err := s.writer.ExecContext(ctx, "ANALYZE")
	return err
}

// SearchKeyBoundForTest is the bound on the sort key (milliseconds of the
// enqueued time) of every message the search q matches (key_bounds.go).
func SearchKeyBoundForTest(ctx context.Context, s *Store, q string) (int64, bool, error) {
	words, err := ftsQuery(q)
	if err != nil {
		return 0, false, err
	}
	return s.searchKeyBound(ctx, match{{cols: allColumns, words: words}})
}
