package dlq

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestNormaliseDescription(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Timeout after 30012 ms", "Timeout after <n> ms"},
		{"Timeout after 29987 ms", "Timeout after <n> ms"},
		{"Order 7c9e6679-7425-40de-944b-e07fc1f90ae7 not found", "Order <guid> not found"},
		{"Order 7C9E6679-7425-40DE-944B-E07FC1F90AE7 not found", "Order <guid> not found"},
		{"failed at 2026-11-22T10:42:07.123Z", "failed at <time>"},
		{"failed at 2026-11-22 10:42:07+01:00", "failed at <time>"},
		{"batch of 2026-11-22 rejected", "batch of <date> rejected"},
		{"at 10:42:07 the lock was lost", "at <time> the lock was lost"},
		{"pointer 0xDEADBEEF invalid", "pointer <hex> invalid"},
		{"trace 4bf92f3577b34da6a3ce929d0e0e4736 failed", "trace <hexid> failed"},
		{"word deadbeef stays a word? no: it has no digit", "word deadbeef stays a word? no: it has no digit"},
		{"amount -12.50 exceeds 1,000.00", "amount <n> exceeds <n>"},
		{"  many \n\t spaces  ", "many spaces"},
		{"", ""},
		{"550 Invalid address <chen@@example> at Send", "<n> Invalid address <<email>> at Send"},
		{"mailbox jo.doe+x@mail.example.com unavailable", "mailbox <email> unavailable"},
		{"user @ sign alone", "user @ sign alone"},
		{"Message could not be consumed after 10 delivery attempts.", "Message could not be consumed after <n> delivery attempts."},
	}
	for _, tt := range tests {
		if got := NormaliseDescription(tt.in); got != tt.want {
			t.Errorf("NormaliseDescription(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := NormaliseDescription(strings.Repeat("é", 1000))
	if len(long) > maxPatternLen+len("…") || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "éé") {
		t.Errorf("long description cut badly: len %d", len(long))
	}
}

func TestGroupOf(t *testing.T) {
	r, d1, d2 := "SqlTimeout", "Timeout after 30012 ms", "Timeout after 29987 ms"
	a, ok1 := GroupOf(&Message{DeadLetterReason: &r, DeadLetterErrorDescription: &d1}, SubQueueDeadLetter)
	b, ok2 := GroupOf(&Message{DeadLetterReason: &r, DeadLetterErrorDescription: &d2}, SubQueueTransferDeadLetter)
	if !ok1 || !ok2 || a.ID != b.ID || a.ID == "" || a.Reason != r || a.DescriptionPattern != "Timeout after <n> ms" {
		t.Errorf("same failure in two groups: %+v %+v", a, b)
	}
	other := "Other"
	c, _ := GroupOf(&Message{DeadLetterReason: &other, DeadLetterErrorDescription: &d1}, SubQueueDeadLetter)
	if c.ID == a.ID {
		t.Error("different reasons share a group")
	}
	if _, ok := GroupOf(&Message{}, SubQueueMain); ok {
		t.Error("a main-entity message has a failure group")
	}
	if g, ok := GroupOf(&Message{}, SubQueueDeadLetter); !ok || g.Reason != "" {
		t.Errorf("a dead letter without reason = %+v, %v; want the empty group", g, ok)
	}
}

type uuidLike [16]byte

type symbolLike string

func TestEncodeProperties(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 42, 7, 123456789, time.FixedZone("x", 3600))
	got := string(EncodeProperties(map[string]any{
		"big":    int64(math.MaxInt64),
		"neg":    int32(-5),
		"u":      uint64(math.MaxUint64),
		"f":      1.5,
		"nan":    math.NaN(),
		"b":      true,
		"s":      "<script>",
		"t":      at,
		"bin":    []byte{0, 1, 2},
		"uuid":   uuidLike{0x7c, 0x9e, 0x66, 0x79, 0x74, 0x25, 0x40, 0xde, 0x94, 0x4b, 0xe0, 0x7f, 0xc1, 0xf9, 0x0a, 0xe7},
		"sym":    symbolLike("x"),
		"nil":    nil,
		"bad":    "\xff",
		"f32":    float32(0.1),
		"i8":     int8(-1),
		"nested": []int{1},
		"map":    map[string]any{"z": int64(1), "a": []byte{9}},
	}))
	want := `{"b":true,"bad":"\ufffd","big":9223372036854775807,"bin":{"base64":"AAEC"},"f":1.5,"f32":0.1,"i8":-1,"map":{"a":{"base64":"CQ=="},"z":1},"nan":"NaN",` +
		`"neg":-5,"nested":[1],"nil":null,"s":"\u003cscript\u003e","sym":"x","t":"2026-11-22T09:42:07.123Z",` +
		`"u":18446744073709551615,"uuid":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}`
	if got != want {
		t.Errorf("EncodeProperties =\n%s\nwant\n%s", got, want)
	}
	if string(EncodeProperties(nil)) != "{}" {
		t.Error("nil properties are not {}")
	}
}
