package dlq

import "time"

// StaleAfter and PollDeadline expose the defaults Config takes, for tests.
func (in *Ingester) StaleAfter() time.Duration   { return in.cfg.Stale }
func (in *Ingester) PollDeadline() time.Duration { return in.cfg.PollTimeout }

// NextFreshnessCheck exposes how long the freshness timer waits.
var NextFreshnessCheck = nextFreshnessCheck
