package replay

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

func TestTransformApply(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tr      Transform
		body    string
		want    string
		wantErr string
	}{
		{"json set keeps order and numbers", Transform{JSONSet: map[string]json.RawMessage{"$.customer.id": json.RawMessage(`"C-42"`)}},
			`{"z":1, "customer": {"name": "Ann <a&b>", "id": "C-1"}, "big": 18446744073709551615, "f": 1.50}`,
			`{"z":1,"customer":{"name":"Ann <a&b>","id":"C-42"},"big":18446744073709551615,"f":1.50}`, ""},
		{"json set creates missing keys", Transform{JSONSet: map[string]json.RawMessage{"$.meta.retry": json.RawMessage(`true`)}},
			`{"a":1}`, `{"a":1,"meta":{"retry":true}}`, ""},
		{"array index and quoted key", Transform{JSONSet: map[string]json.RawMessage{`$.items[1]["sku code"]`: json.RawMessage(`"X"`)}},
			`{"items":[{"sku code":"A"},{"sku code":"B"}]}`, `{"items":[{"sku code":"A"},{"sku code":"X"}]}`, ""},
		{"index past the end", Transform{JSONSet: map[string]json.RawMessage{"$.items[5]": json.RawMessage(`1`)}},
			`{"items":[]}`, "", "past the array's end"},
		{"not JSON", Transform{JSONSet: map[string]json.RawMessage{"$.a": json.RawMessage(`1`)}}, `a=1`, "", "not JSON"},
		{"a key inside a string", Transform{JSONSet: map[string]json.RawMessage{"$.a.b": json.RawMessage(`1`)}}, `{"a":"x"}`, "", "not inside an object"},
		{"replace, in order", Transform{Replace: []Replacement{{"C-1", "C-42"}, {"C-42", "C-43"}}}, `<id>C-1</id><id>C-1</id>`,
			`<id>C-43</id><id>C-43</id>`, ""},
		{"replace then set", Transform{Replace: []Replacement{{"Ann", "Bo"}}, JSONSet: map[string]json.RawMessage{"$.n": json.RawMessage(`2`)}},
			`{"who": "Ann", "n": 1}`, `{"who":"Bo","n":2}`, ""},
		{"replace on binary", Transform{Replace: []Replacement{{"a", "b"}}}, "\xff\xfe", "", "not text"},
	} {
		got, err := tt.tr.Apply([]byte(tt.body))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %s, %v\nwant %s", tt.name, got, err, tt.want)
		}
	}
}

func TestTransformCheck(t *testing.T) {
	for _, tt := range []struct {
		tr    Transform
		param string
	}{
		{Transform{Replace: []Replacement{{"", "x"}}}, "edit.replace"},
		{Transform{JSONSet: map[string]json.RawMessage{"customer.id": json.RawMessage(`1`)}}, "edit.json_set"},
		{Transform{JSONSet: map[string]json.RawMessage{"$": json.RawMessage(`1`)}}, "edit.json_set"},
		{Transform{JSONSet: map[string]json.RawMessage{"$.a[x]": json.RawMessage(`1`)}}, "edit.json_set"},
		{Transform{JSONSet: map[string]json.RawMessage{"$.a": json.RawMessage(`{nope`)}}, "edit.json_set"},
	} {
		err := tt.tr.Check()
		var inv *InvalidError
		if err == nil || !asInvalid(err, &inv) || inv.Param != tt.param {
			t.Errorf("%+v: %v, want an error naming %s", tt.tr, err, tt.param)
		}
	}
	ok := Transform{JSONSet: map[string]json.RawMessage{"$.a.b[2]": json.RawMessage(`"x"`)}, Replace: []Replacement{{"a", ""}}}
	if err := ok.Check(); err != nil {
		t.Errorf("a good transform: %v", err)
	}
}

func asInvalid(err error, target **InvalidError) bool {
	e, ok := err.(*InvalidError)
	*target = e
	return ok
}

// A bulk edit's messages are selected by id, each with its own edit.
func TestBulkEditValidation(t *testing.T) {
	e := &Edit{Body: []byte("x")}
	for _, tt := range []struct {
		name  string
		req   Request
		param string
	}{
		{"a filter", Request{Action: ActionReplay, Selection: Selection{Filter: &dlqFilterEntity, Edits: map[int64]*Edit{1: e}}}, "edit"},
		{"a message without its edit", Request{Action: ActionReplay, Selection: Selection{IDs: []int64{1, 2}, Edits: map[int64]*Edit{1: e}}}, "edit"},
		{"a discard", Request{Action: ActionDiscard, Reason: "r", Selection: Selection{IDs: []int64{1}, Edits: map[int64]*Edit{1: e}}}, "action"},
		{"with a single edit", Request{Action: ActionReplay, Selection: Selection{IDs: []int64{1}, Edit: e, Edits: map[int64]*Edit{1: e}}}, "edit"},
	} {
		err := tt.req.validate(time.Now())
		var inv *InvalidError
		if err == nil || !asInvalid(err, &inv) || inv.Param != tt.param {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.param)
		}
	}
	ok := Request{Action: ActionReplay, Selection: Selection{IDs: []int64{1, 2}, Edits: map[int64]*Edit{1: e, 2: e}}}
	if err := ok.validate(time.Now()); err != nil {
		t.Errorf("a good bulk edit: %v", err)
	}
}

var dlqFilterEntity = dlq.Filter{Entity: "orders"}
