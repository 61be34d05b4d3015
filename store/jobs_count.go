package store

import (
	"context"
	"fmt"

	"github.com/dlqdash/dlqdash/replay"
)

// CountJobs returns how many jobs are in each status; statuses without a
// job are absent. The jobs table holds one row per job a person created, so
// a full scan per call (a metrics scrape) stays small.
func (s *Store) CountJobs(ctx context.Context) (map[replay.Status]int, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[replay.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[replay.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}
