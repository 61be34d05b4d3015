package dlq

import "strings"

// StatusSource is anything that reports a freshness: an Ingester.
type StatusSource interface {
	Status() Status
}

// StatusSet is the freshness of several namespaces, one ingester each, in
// their configured order. Status is the summary; Namespaces each one's.
type StatusSet []StatusSource

// Namespaces is each namespace's status, in order.
func (s StatusSet) Namespaces() []Status {
	out := make([]Status, len(s))
	for i, src := range s {
		out[i] = src.Status()
	}
	return out
}

// Status is the summary of every namespace's status (Summarize).
func (s StatusSet) Status() Status { return Summarize(s.Namespaces()) }

// Summarize sums up the statuses of several namespaces as one: healthy when
// every one is; the last success is the oldest of theirs (the whole catalog
// is at least that fresh; nil while one has never succeeded); the error
// names each unhealthy namespace with its own error, and the failure began
// when the first of them did. One status is returned as it is.
func Summarize(sts []Status) Status {
	switch len(sts) {
	case 0:
		return Status{Error: "catalog not running"}
	case 1:
		return sts[0]
	}
	out := Status{Healthy: true}
	names := make([]string, len(sts))
	var errs []string
	for i, st := range sts {
		names[i] = st.Namespace
		switch {
		case i == 0 || (out.LastSuccessAt != nil && (st.LastSuccessAt == nil || st.LastSuccessAt.Before(*out.LastSuccessAt))):
			out.LastSuccessAt = st.LastSuccessAt
		}
		if !st.Healthy {
			out.Healthy = false
			errs = append(errs, st.Namespace+": "+st.Error)
			if st.ErrorSince != nil && (out.ErrorSince == nil || st.ErrorSince.Before(*out.ErrorSince)) {
				t := *st.ErrorSince
				out.ErrorSince = &t
			}
		}
	}
	out.Namespace = strings.Join(names, ", ")
	out.Error = strings.Join(errs, "; ")
	if out.LastSuccessAt != nil {
		t := out.LastSuccessAt.UTC()
		out.LastSuccessAt = &t
	}
	return out
}
