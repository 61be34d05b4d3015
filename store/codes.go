package store

import (
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// The integer codes the messages table stores for subqueues and states
// (0002_catalog.sql). Both directions live here and nowhere else.

func subQueueCode(q dlq.SubQueue) (int, error) {
	switch q {
	case dlq.SubQueueMain:
		return 0, nil
	case dlq.SubQueueDeadLetter:
		return 1, nil
	case dlq.SubQueueTransferDeadLetter:
		return 2, nil
	}
	return 0, fmt.Errorf("unknown subqueue %q", q)
}

func subQueueOf(code int) dlq.SubQueue {
	switch code {
	case 1:
		return dlq.SubQueueDeadLetter
	case 2:
		return dlq.SubQueueTransferDeadLetter
	}
	return dlq.SubQueueMain
}

func stateCode(s dlq.State) (int, error) {
	switch s {
	case dlq.StateActive:
		return 0, nil
	case dlq.StateDeferred:
		return 1, nil
	case dlq.StateScheduled:
		return 2, nil
	}
	return 0, fmt.Errorf("unknown message state %q", s)
}

func stateOf(code int) dlq.State {
	switch code {
	case 1:
		return dlq.StateDeferred
	case 2:
		return dlq.StateScheduled
	}
	return dlq.StateActive
}

// millis converts an optional time to an optional Unix-millisecond value.
func millis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().UnixMilli()
}

// timeOf is the inverse of millis for a nullable column.
func timeOf(ms *int64) *time.Time {
	if ms == nil {
		return nil
	}
	t := time.UnixMilli(*ms).UTC()
	return &t
}
