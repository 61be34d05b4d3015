// Package web is dlqdash's HTTP side: the one route table (routes.go),
// handlers that return errors, the one adapter that turns errors into pages
// (errors.go), middleware applied in plain sight, and static files.
//
// Handlers read input, call one domain operation and render a views
// component. They must not run SQL, call the broker, or build HTML strings.
package web
