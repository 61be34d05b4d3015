package views

import (
	"context"
	"strconv"
)

type liveSeqKey struct{}

// WithLiveSeq records the live hub's change count at the start of a page's
// request; the layout writes it for static/live.js to send back when it
// connects, so that a change published in between is not lost.
func WithLiveSeq(ctx context.Context, seq int64) context.Context {
	return context.WithValue(ctx, liveSeqKey{}, seq)
}

func liveSeq(ctx context.Context) string {
	if n, ok := ctx.Value(liveSeqKey{}).(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return ""
}
