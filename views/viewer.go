package views

import "context"

// Viewer is whom a page is shown to, for the header: the name and role
// ("local (admin)" when sign-in is off). The zero value shows nothing.
type Viewer struct {
	Name string
	Role string // viewer, operator, admin, or none
	Via  string // none, session, token or proxy
	// SignOut offers a sign-out button (a session's).
	SignOut bool
}

type viewerKey struct{}

// WithViewer records whom the page is for.
func WithViewer(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

func viewer(ctx context.Context) Viewer {
	v, _ := ctx.Value(viewerKey{}).(Viewer)
	return v
}
