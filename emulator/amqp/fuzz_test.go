package amqp

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// seedFrames are real-shaped frames of a Service Bus session, used as the
// committed fuzz corpus (testdata/fuzz/FuzzParseFrame) and as f.Add seeds.
func seedFrames(tb testing.TB) map[string][]byte {
	tb.Helper()
	msg := &goamqp.Message{
		Header:                &goamqp.MessageHeader{Durable: true},
		Annotations:           goamqp.Annotations{"x-opt-partition-key": "pk"},
		Properties:            &goamqp.MessageProperties{MessageID: "m-1"},
		ApplicationProperties: map[string]any{"n": int64(1)},
		Data:                  [][]byte{[]byte("hello")},
	}
	payload, err := msg.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	frames := map[string]Frame{
		"keepalive":       {},
		"sasl-mechanisms": {Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "MSSBCBS"}}},
		"sasl-init":       {Type: FrameTypeSASL, Body: &SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous"), Hostname: "127.0.0.1"}},
		"sasl-outcome":    {Type: FrameTypeSASL, Body: &SASLOutcome{Code: 0}},
		"open": {Body: &Open{ContainerID: "0123456789abcdef0123456789abcdef01234567", Hostname: "127.0.0.1:5672",
			MaxFrameSize: 65536, ChannelMax: 65535, IdleTimeout: 30 * time.Second,
			Properties: map[Symbol]any{"product": "MSGolangClient", "version": "v1.11.0", "platform": "linux",
				"framework": "go1.26", "user-agent": "azsdk-go-azservicebus/v1.11.0 (go1.26; linux)"}}},
		"begin": {Channel: 1, Body: &Begin{RemoteChannel: ptr(uint16(0)), NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 1000, HandleMax: 4294967295}},
		"attach-session-filter": {Channel: 1, Body: &Attach{Name: "receiver-link", Handle: 0, Role: RoleReceiver,
			SndSettleMode: ptr(SenderSettleModeUnsettled), RcvSettleMode: ptr(ReceiverSettleModeSecond),
			Source: &Source{Address: "queue1", ExpiryPolicy: "link-detach",
				Filter: map[Symbol]any{"com.microsoft:session-filter": &Described{Descriptor: uint64(0x000001370000000c), Value: "session-1"}}},
			Target:     &Target{Address: "receiver-link-target", ExpiryPolicy: "session-end"},
			Properties: map[Symbol]any{"com.microsoft:receiver-settle-mode": uint8(1)}}},
		"flow": {Channel: 1, Body: &Flow{NextIncomingID: ptr(uint32(0)), IncomingWindow: 5000, NextOutgoingID: 0, OutgoingWindow: 1000,
			Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(0)), LinkCredit: ptr(uint32(300)), Drain: true}},
		"transfer": {Channel: 1, Body: &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
			MessageFormat: ptr(uint32(0)), Settled: ptr(false), Payload: payload}},
		"disposition-rejected": {Channel: 1, Body: &Disposition{Role: RoleReceiver, First: 0, Last: ptr(uint32(2)), Settled: true,
			State: &Rejected{Error: &Error{Condition: "com.microsoft:message-lock-lost", Description: "The lock supplied is invalid.",
				Info: map[Symbol]any{"DeadLetterReason": "r"}}}}},
		"detach-error": {Channel: 1, Body: &Detach{Handle: 0, Closed: true, Error: &Error{Condition: "amqp:not-found", Description: "no entity"}}},
		"close":        {Body: &Close{Error: &Error{Condition: "amqp:connection:forced"}}},
	}
	out := map[string][]byte{}
	for name, f := range frames {
		b, err := AppendFrame(nil, f)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzParseFrame when
// AMQP_WRITE_FUZZ_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("AMQP_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set AMQP_WRITE_FUZZ_CORPUS=1 to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseFrame")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seedFrames(t) {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
	}
	for _, tt := range testFrames() {
		b, err := AppendFrame(nil, tt.in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseFrame error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		enc, err := AppendFrame(nil, fr)
		if err != nil {
			t.Fatalf("AppendFrame of a parsed frame: %v\nframe %#v", err, fr.Body)
		}
		fr2, err := ParseFrame(enc)
		if err != nil {
			t.Fatalf("ParseFrame of a re-encoded frame: %v\ninput % x\nre-encoded % x", err, b, enc)
		}
		// The encoding is canonical up to map iteration order, so a second
		// round must produce the same number of bytes.
		enc2, err := AppendFrame(nil, fr2)
		if err != nil {
			t.Fatalf("AppendFrame, second round: %v", err)
		}
		if len(enc2) != len(enc) {
			t.Fatalf("re-encoding is not stable: %d then %d bytes\n% x\n% x", len(enc), len(enc2), enc, enc2)
		}
		if c1, c2 := canonicalFrame(t, enc), canonicalFrame(t, enc2); !bytes.Equal(c1, c2) {
			t.Fatalf("decode/encode is not idempotent:\n% x\n% x", enc, enc2)
		}
		// Reading the same bytes through a FrameReader agrees with ParseFrame.
		if len(b) <= int(DefaultMaxFrameSize) {
			if _, err := NewFrameReader(bytesReader(b)).ReadFrame(); err != nil {
				t.Fatalf("ReadFrame fails where ParseFrame succeeds: %v", err)
			}
		}
	})
}

type sliceReader struct{ b []byte }

func bytesReader(b []byte) *sliceReader { return &sliceReader{b} }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errors.New("eof")
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// FuzzUnmarshal checks that Unmarshal never panics, that its errors wrap
// ErrMalformed, and that what it decodes encodes again.
func FuzzUnmarshal(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b[8:])
	}
	f.Add([]byte{0xc1, 0x05, 0x02, 0xa3, 0x01, 0x61, 0x40})
	f.Add([]byte{0xe0, 0x04, 0x02, 0x56, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("Unmarshal consumed %d of %d bytes", n, len(b))
		}
		enc, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal of a decoded value %#v: %v", v, err)
		}
		if _, _, err := Unmarshal(enc); err != nil {
			t.Fatalf("Unmarshal of a re-encoded value: %v\n% x", err, enc)
		}
	})
}

// canonicalFrame decodes the body of an encoded frame as generic values and
// serialises them with maps in a fixed order, so that two encodings that
// differ only in map iteration order compare equal.
func canonicalFrame(t *testing.T, frame []byte) []byte {
	t.Helper()
	out := append([]byte(nil), frame[:8]...)
	b := frame[8:]
	for len(b) > 0 {
		v, n, err := Unmarshal(b)
		if err != nil {
			// A transfer payload need not be AMQP: keep its bytes.
			return append(out, b...)
		}
		out = appendCanonical(out, v)
		b = b[n:]
	}
	return out
}

func appendCanonical(dst []byte, v any) []byte {
	switch v := v.(type) {
	case []any:
		dst = append(dst, 'L', byte(len(v)))
		for _, e := range v {
			dst = appendCanonical(dst, e)
		}
		return append(dst, 'l')
	case Array:
		dst = append(dst, 'A', byte(len(v)))
		for _, e := range v {
			dst = appendCanonical(dst, e)
		}
		return append(dst, 'a')
	case *Described:
		dst = append(dst, 'D')
		dst = appendCanonical(dst, v.Descriptor)
		return appendCanonical(dst, v.Value)
	case map[any]any:
		type kv struct{ k, v []byte }
		var pairs []kv
		for k, e := range v {
			pairs = append(pairs, kv{appendCanonical(nil, k), appendCanonical(nil, e)})
		}
		slices.SortFunc(pairs, func(a, b kv) int { return cmp.Or(bytes.Compare(a.k, b.k), bytes.Compare(a.v, b.v)) })
		dst = append(dst, 'M', byte(len(v)))
		for _, p := range pairs {
			dst = append(append(dst, p.k...), p.v...)
		}
		return append(dst, 'm')
	}
	b, err := Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(append(dst, 'V'), b...)
}
