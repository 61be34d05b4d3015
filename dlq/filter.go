package dlq

import "time"

// Filter selects cataloged messages. The zero value matches every present
// message. It is the message list's query, export's, a live message list's
// subscription and (frozen) a replay selection's. Its outside forms (a query
// string, a form, JSON, command-line flags) are all read and written by
// filter_forms.go from one table of its keys (filter_keys.go): a new key is
// a field here and a line there.
type Filter struct {
	Namespace   string   // exact namespace name, as configured; empty for any
	Entity      string   // exact entity path (in every namespace, unless Namespace says which)
	SubQueue    SubQueue // empty for any
	State       State    // empty for any
	Reason      string   // exact dead-letter reason
	Group       string   // failure group id
	Query       string   // full-text search over body text, reason, description and properties
	Properties  []PropertyMatch
	Since       *time.Time // enqueued_at >= Since
	Until       *time.Time // enqueued_at < Until
	IncludeGone bool
	// All says outright that the filter means every message: a job's
	// filter without any other condition must (Unconditional), so that an
	// empty filter ({}) never replays or discards the whole catalog by
	// mistake. It adds no condition.
	All bool

	// Namespaces, when not nil, keeps the selection to the messages of
	// these namespaces (none when empty): the reader's scope, the
	// namespaces its access rules let it view. Like QueryNotBodies it is
	// the reader's, never part of an outside form.
	Namespaces []string

	// QueryNotBodies keeps Query out of body text: for someone who may not
	// read bodies, whom a search would otherwise tell what they contain.
	// Never part of an outside form: it is the reader's, not the filter's.
	QueryNotBodies bool
}

// Unconditional reports whether f selects every message: it sets no key
// that narrows the selection (include_gone and all widen or say so; the
// reader's QueryNotBodies is no condition of the filter's).
func (f Filter) Unconditional() bool {
	return f.Namespace == "" && f.Entity == "" && f.SubQueue == "" && f.State == "" && f.Reason == "" && f.Group == "" &&
		f.Query == "" && len(f.Properties) == 0 && f.Since == nil && f.Until == nil
}

// PropertyMatch is one application property = value condition. Value is
// compared with the property's text (a number's digits, a boolean's
// true/false, a string's characters).
type PropertyMatch struct {
	Key, Value string
}

// MaxPropertyMatches bounds the property conditions of one filter.
const MaxPropertyMatches = 16

// FilterError is a filter value that cannot be used. Param names the
// parameter as the form it came in names it (subqueue, --subqueue).
type FilterError struct {
	Param, Msg string
}

func (e *FilterError) Error() string { return e.Msg }

// InvalidParameter names the parameter (the API's invalid_argument).
func (e *FilterError) InvalidParameter() string { return e.Param }

// UnknownEntityError is a filter naming an entity the catalog has never
// seen (a typo, most likely): an error, not an empty answer, so that
// nobody reads "no messages" into a name that matches nothing (the API's
// not_found, export's exit 1).
type UnknownEntityError struct {
	Entity string
}

func (e *UnknownEntityError) Error() string {
	return "no entity '" + e.Entity + "' in the catalog"
}
