//go:build scale

package store

import "context"

// WriterExecForTest runs q on the writer's one connection (so that a
// PRAGMA stays in force for the store's writes): the scale harness's
// -scale.writer-sql tries settings without rebuilding.
func WriterExecForTest(ctx context.Context, s *Store, q string) error {
	_, err := s.writer.ExecContext(ctx, q)
	return err
}
