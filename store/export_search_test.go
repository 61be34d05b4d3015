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
