// Package views holds the dashboard's templ components: the layout, the
// pages (named *Page) and, later, the live fragments. Components are pure
// functions of the data they are given.
//
// It must not query the store or the broker, and must never use templ.Raw
// on message data. The generated *_templ.go files are committed; regenerate
// them with `go tool templ generate`.
package views
