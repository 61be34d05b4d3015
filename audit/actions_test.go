package audit

import (
	"encoding/json"
	"testing"
)

func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    Entry
		want Part
	}{
		{"a batch of a job", Entry{Action: ActionReplay, Actor: "oidc:a", Outcome: OutcomeSucceeded,
			Params: json.RawMessage(`{"job_id":"7","namespace":"prod","destination_namespace":"dr"}`)},
			Part{JobID: "7", Namespace: "prod", DestinationNamespace: "dr", GroupKey: "job:7:replay:succeeded:oidc:a"}},
		{"a failure batch", Entry{Action: ActionMessageFailed, Actor: "dlqdash", Outcome: OutcomeFailed, Params: json.RawMessage(`{"job_id":"7"}`)},
			Part{JobID: "7", GroupKey: "job:7:message_failed:failed:dlqdash"}},
		{"a job's creation is its own action", Entry{Action: ActionReplayJobCreated, Params: json.RawMessage(`{"job_id":"7","namespace":"prod"}`)},
			Part{JobID: "7", Namespace: "prod"}},
		{"a number is not a job id", Entry{Action: ActionReplay, Params: json.RawMessage(`{"job_id":7,"namespace":["x"]}`)}, Part{}},
		{"no job", Entry{Action: ActionDiscard, Params: json.RawMessage(`{"namespace":"prod"}`)}, Part{Namespace: "prod"}},
		{"tampered params", Entry{Action: ActionReplay, Params: json.RawMessage(`{"job_id":"7"`)}, Part{}},
	} {
		if got := Describe(tt.e); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
