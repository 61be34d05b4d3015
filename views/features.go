package views

import (
	"context"

	"github.com/a-h/templ"
)

// Features are the parts of the dashboard this server runs: the layout's
// navigation links only to pages that exist.
type Features struct {
	Jobs   bool // a replay engine: the jobs pages
	Audit  bool // an audit trail: the audit page
	Alerts bool // an alert loop: the alerts pages
}

type featuresKey struct{}

// WithFeatures records what the server runs for the layout to read.
func WithFeatures(ctx context.Context, f Features) context.Context {
	return context.WithValue(ctx, featuresKey{}, f)
}

func features(ctx context.Context) Features {
	f, _ := ctx.Value(featuresKey{}).(Features)
	return f
}

// invalid marks an input whose value was refused: aria-invalid="true" (a
// bare aria-invalid reads as false).
func invalid(b bool) templ.Attributes {
	if b {
		return templ.Attributes{"aria-invalid": "true"}
	}
	return nil
}
