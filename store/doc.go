// Package store holds all of dlqdash's SQL: it opens the SQLite database
// (one writer connection and a read-only pool on the same file), applies the
// embedded numbered migrations, and offers the queries the rest of the
// program needs.
//
// It must not know about HTTP, HTML or Service Bus: callers hand it plain
// values and get plain values back.
package store
