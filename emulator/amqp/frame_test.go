package amqp

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func ptr[T any](v T) *T { return &v }

// testFrames holds one fully populated and, where it matters, one minimal
// frame per performative, with what decoding yields (want nil = the input).
func testFrames() []struct {
	name string
	in   Frame
	want *Frame
} {
	errFull := &Error{Condition: "amqp:not-found", Description: "The messaging entity could not be found.",
		Info: map[Symbol]any{"tracking-id": "abc", "n": int32(3)}}
	source := &Source{
		Address: "queue1", Durable: 2, ExpiryPolicy: "link-detach", Timeout: 60, Dynamic: true,
		DynamicNodeProperties: map[Symbol]any{"lifetime-policy": &Described{Descriptor: uint64(0x2b), Value: []any{}}},
		DistributionMode:      "move",
		Filter: map[Symbol]any{
			"com.microsoft:session-filter":      &Described{Descriptor: uint64(0x0000_0137_0000_000c), Value: "session-1"},
			"apache.org:selector-filter:string": &Described{Descriptor: Symbol("apache.org:selector-filter:string"), Value: "a = 1"},
			// Not described: what the JavaScript SDK sends, kept as is.
			"plain":   "session-2",
			"nothing": nil,
		},
		DefaultOutcome: &Modified{DeliveryFailed: true},
		Outcomes:       []Symbol{"amqp:accepted:list", "amqp:rejected:list"},
		Capabilities:   []Symbol{"queue"},
	}
	target := &Target{Address: "$cbs", Durable: 1, ExpiryPolicy: "never", Timeout: 5, Dynamic: true,
		DynamicNodeProperties: map[Symbol]any{"x": uint64(1)}, Capabilities: []Symbol{"topic"}}
	props := map[Symbol]any{"com.microsoft:timeout": uint32(60000), "product": "MSGolangClient"}

	type tf = struct {
		name string
		in   Frame
		want *Frame
	}
	return []tf{
		{"keep-alive", Frame{}, nil},
		{"keep-alive on channel 3", Frame{Channel: 3}, nil},
		{"open full", Frame{Body: &Open{
			ContainerID: "container-1", Hostname: "127.0.0.1:5672", MaxFrameSize: 65536, ChannelMax: 4999,
			IdleTimeout: 30 * time.Second, OutgoingLocales: []Symbol{"en-US"}, IncomingLocales: []Symbol{"en-US", "de"},
			OfferedCapabilities: []Symbol{"ANONYMOUS-RELAY"}, DesiredCapabilities: []Symbol{"x"}, Properties: props,
		}}, nil},
		{"open minimal", Frame{Body: &Open{ContainerID: "c", MaxFrameSize: 512, ChannelMax: 0}}, nil},
		{"begin full", Frame{Channel: 7, Body: &Begin{
			RemoteChannel: ptr(uint16(3)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: math.MaxUint32,
			HandleMax: 255, OfferedCapabilities: []Symbol{"a"}, DesiredCapabilities: []Symbol{"b"}, Properties: props,
		}}, nil},
		{"begin minimal", Frame{Body: &Begin{HandleMax: math.MaxUint32}}, nil},
		{"attach full", Frame{Channel: 1, Body: &Attach{
			Name: "link-1", Handle: 42, Role: RoleReceiver, SndSettleMode: ptr(SenderSettleModeMixed),
			RcvSettleMode: ptr(ReceiverSettleModeSecond), Source: source, Target: target,
			Unsettled: map[any]any{"tag": &Described{Descriptor: uint64(0x24), Value: []any{}}}, IncompleteUnsettled: true,
			InitialDeliveryCount: 9, MaxMessageSize: 262144, OfferedCapabilities: []Symbol{"o"}, DesiredCapabilities: []Symbol{"d"},
			Properties: map[Symbol]any{"com.microsoft:entity-type": int32(1)},
		}}, nil},
		{"attach minimal sender", Frame{Body: &Attach{Name: "s", Role: RoleSender, Source: &Source{}, Target: &Target{}}},
			&Frame{Body: &Attach{Name: "s", Role: RoleSender, Source: &Source{ExpiryPolicy: "session-end"}, Target: &Target{ExpiryPolicy: "session-end"}}}},
		{"attach with default outcome described", Frame{Body: &Attach{Name: "s", Source: &Source{ExpiryPolicy: "never",
			DefaultOutcome: &Described{Descriptor: uint64(0x99), Value: nil}}}}, nil},
		{"flow full", Frame{Channel: 2, Body: &Flow{
			NextIncomingID: ptr(uint32(10)), IncomingWindow: 5000, NextOutgoingID: 11, OutgoingWindow: 4000,
			Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(100)), LinkCredit: ptr(uint32(300)), Available: ptr(uint32(2)),
			Drain: true, Echo: true, Properties: map[Symbol]any{"k": "v"},
		}}, nil},
		{"flow session only", Frame{Body: &Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3}}, nil},
		{"transfer full", Frame{Channel: 1, Body: &Transfer{
			Handle: 1, DeliveryID: ptr(uint32(77)), DeliveryTag: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
			MessageFormat: ptr(uint32(0x80013700)), Settled: ptr(false), More: true, RcvSettleMode: ptr(ReceiverSettleModeFirst),
			State: &Received{SectionNumber: 1, SectionOffset: 1 << 40}, Resume: true, Aborted: true, Batchable: true,
			Payload: []byte("payload bytes"),
		}}, nil},
		{"transfer continuation", Frame{Body: &Transfer{Handle: 1, More: true, Payload: []byte{0x00, 0x53}}}, nil},
		{"transfer settled with accepted", Frame{Body: &Transfer{Handle: 1, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{},
			MessageFormat: ptr(uint32(0)), Settled: ptr(true), State: &Accepted{}}}, nil},
		{"disposition rejected", Frame{Channel: 4, Body: &Disposition{
			Role: RoleReceiver, First: 3, Last: ptr(uint32(9)), Settled: true,
			State: &Rejected{Error: errFull}, Batchable: true,
		}}, nil},
		{"disposition released", Frame{Body: &Disposition{Role: RoleSender, First: 1, State: &Released{}}}, nil},
		{"disposition modified", Frame{Body: &Disposition{First: 1, Settled: true, State: &Modified{
			DeliveryFailed: true, UndeliverableHere: true, MessageAnnotations: map[Symbol]any{"x-opt-reason": "why"}}}}, nil},
		{"disposition rejected no error", Frame{Body: &Disposition{First: 1, State: &Rejected{}}}, nil},
		{"detach", Frame{Channel: 9, Body: &Detach{Handle: 5, Closed: true, Error: errFull}}, nil},
		{"detach minimal", Frame{Body: &Detach{}}, nil},
		{"end", Frame{Body: &End{Error: &Error{Condition: "amqp:internal-error"}}}, nil},
		{"end empty", Frame{Body: &End{}}, nil},
		{"close", Frame{Body: &Close{Error: &Error{Condition: "amqp:connection:forced", Description: "bye"}}}, nil},
		{"close empty", Frame{Body: &Close{}}, nil},
		{"sasl-mechanisms", Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "MSSBCBS"}}}, nil},
		{"sasl-mechanisms nil", Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{}},
			&Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{}}}},
		{"sasl-init", Frame{Type: FrameTypeSASL, Body: &SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous"), Hostname: "localhost"}}, nil},
		{"sasl-challenge", Frame{Type: FrameTypeSASL, Body: &SASLChallenge{Challenge: []byte("c")}}, nil},
		{"sasl-challenge nil", Frame{Type: FrameTypeSASL, Body: &SASLChallenge{}}, &Frame{Type: FrameTypeSASL, Body: &SASLChallenge{Challenge: []byte{}}}},
		{"sasl-response", Frame{Type: FrameTypeSASL, Body: &SASLResponse{Response: []byte("r")}}, nil},
		{"sasl-outcome ok", Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: 0}}, nil},
		{"sasl-outcome auth", Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: 1, AdditionalData: []byte("no")}}, nil},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, tt := range testFrames() {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.in
			if tt.want != nil {
				want = *tt.want
			}
			b, err := AppendFrame([]byte("prefix"), tt.in)
			if err != nil {
				t.Fatalf("AppendFrame: %v", err)
			}
			b = b[len("prefix"):]
			got, err := ParseFrame(b)
			if err != nil {
				t.Fatalf("ParseFrame(% x): %v", b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseFrame:\n got %#v\nwant %#v\nbytes % x", got.Body, want.Body, b)
			}
			fr := NewFrameReader(bytes.NewReader(b))
			got, err = fr.ReadFrame()
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ReadFrame:\n got %#v\nwant %#v", got.Body, want.Body)
			}
			if _, err := fr.ReadFrame(); err != io.EOF {
				t.Fatalf("ReadFrame at end = %v, want io.EOF", err)
			}
			// The performative also round-trips through the value API.
			if tt.in.Body != nil {
				v, err := Marshal(tt.in.Body)
				if err != nil {
					t.Fatal(err)
				}
				p, n, err := UnmarshalPerformative(v)
				if err != nil || n != len(v) {
					t.Fatalf("UnmarshalPerformative = %v, %d, %v", p, n, err)
				}
				if tr, ok := p.(*Transfer); ok {
					tr.Payload = want.Body.(*Transfer).Payload
				}
				if !reflect.DeepEqual(p, want.Body) {
					t.Fatalf("UnmarshalPerformative:\n got %#v\nwant %#v", p, want.Body)
				}
			}
		})
	}
}

func TestFrameGolden(t *testing.T) {
	tests := []struct {
		name string
		in   Frame
		want string
	}{
		{"keep-alive", Frame{}, "00000008 02 00 0000"},
		// Every field is written, absent ones as null (40), as Azure does.
		{"sasl-outcome ok", Frame{Type: FrameTypeSASL, Body: &SASLOutcome{}}, "00000011 02 01 0000 00 53 44 c0 04 02 50 00 40"},
		{"sasl-mechanisms anonymous", Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS"}}},
			"0000001c 02 01 0000 00 53 40 c0 0f 01 e0 0c 01 a3 09 414e4f4e594d4f5553"},
		{"open", Frame{Body: &Open{ContainerID: "c", MaxFrameSize: 65536, ChannelMax: 65535}},
			"00000020 02 00 0000 00 53 10 c0 13 0a a1 01 63 40 70 00010000 60 ffff 40 40 40 40 40 40"},
		{"begin", Frame{Channel: 1, Body: &Begin{RemoteChannel: ptr(uint16(0)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 0, HandleMax: math.MaxUint32}},
			"00000021 02 00 0001 00 53 11 c0 14 08 60 0000 52 01 70 00001388 43 70 ffffffff 40 40 40"},
		{"flow keeps trailing nulls", Frame{Body: &Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3}},
			"0000001c 02 00 0000 00 53 13 c0 0f 0b 40 52 01 52 02 52 03 40 40 40 40 40 40 40"},
		{"transfer", Frame{Body: &Transfer{Handle: 0, DeliveryID: ptr(uint32(1)), DeliveryTag: []byte{0xaa}, MessageFormat: ptr(uint32(0)), Settled: ptr(true), Payload: []byte{0x00, 0x53, 0x75}}},
			"0000001f 02 00 0000 00 53 14 c0 0f 0b 43 52 01 a0 01 aa 43 41 40 40 40 40 40 40 005375"},
		{"disposition accepted", Frame{Body: &Disposition{Role: RoleReceiver, First: 5, Settled: true, State: &Accepted{}}},
			"00000018 02 00 0000 00 53 15 c0 0b 06 41 52 05 40 41 00 53 24 45 40"},
		{"close empty", Frame{Body: &Close{}}, "0000000f 02 00 0000 00 53 18 c0 02 01 40"},
		{"rejected error complete", Frame{Body: &Disposition{Role: RoleReceiver, First: 1, Settled: true, State: &Rejected{Error: &Error{Condition: "c"}}}},
			"00000025 02 00 0000 00 53 15 c0 18 06 41 52 01 40 41 00 53 25 c0 0c 01 00 53 1d c0 06 03 a3 01 63 40 40 40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendFrame(nil, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if want := mustHex(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("AppendFrame = % x\n         want % x", got, want)
			}
		})
	}
}

func TestProtocolHeader(t *testing.T) {
	if got, want := ProtocolHeader(ProtoSASL), mustHex(t, "414d5150 03 010000"); !bytes.Equal(got, want) {
		t.Fatalf("ProtocolHeader(SASL) = % x, want % x", got, want)
	}
	if got, want := ProtocolHeader(ProtoAMQP), mustHex(t, "414d5150 00 010000"); !bytes.Equal(got, want) {
		t.Fatalf("ProtocolHeader(AMQP) = % x, want % x", got, want)
	}
	tests := []struct {
		name    string
		in      string
		want    uint8
		wantErr error
	}{
		{"sasl", "414d5150 03 010000", ProtoSASL, nil},
		{"amqp", "414d5150 00 010000", ProtoAMQP, nil},
		{"tls", "414d5150 02 010000", ProtoTLS, nil},
		{"http", "47455420 2f 204854", 0, ErrMalformed},
		{"amqp 0-9-1", "414d5150 00 000901", 0, ErrMalformed},
		{"unknown id", "414d5150 07 010000", 7, ErrMalformed},
		{"short", "414d5150", 0, io.ErrUnexpectedEOF},
		{"empty", "", 0, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustHex(t, tt.in)
			got, err := ReadProtocolHeader(bytes.NewReader(b))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("ReadProtocolHeader err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("ReadProtocolHeader = %d, want %d", got, tt.want)
			}
			got, err = NewFrameReader(bytes.NewReader(b)).ReadProtocolHeader()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || got != tt.want {
				t.Fatalf("FrameReader.ReadProtocolHeader = %d, %v", got, err)
			}
		})
	}
}

// TestFrameReaderHandshake reads a SASL exchange and the AMQP header that a
// client pipelined behind it, through one FrameReader.
func TestFrameReaderHandshake(t *testing.T) {
	var in []byte
	in = append(in, ProtocolHeader(ProtoSASL)...)
	in, _ = AppendFrame(in, Frame{Type: FrameTypeSASL, Body: &SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")}})
	in = append(in, ProtocolHeader(ProtoAMQP)...)
	in, _ = AppendFrame(in, Frame{Body: &Open{ContainerID: "x", MaxFrameSize: 65536, ChannelMax: 65535}})

	fr := NewFrameReader(bytes.NewReader(in))
	if p, err := ReadProtocolHeader(fr); err != nil || p != ProtoSASL {
		t.Fatalf("ReadProtocolHeader(fr) = %d, %v", p, err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if init, ok := f.Body.(*SASLInit); !ok || init.Mechanism != "ANONYMOUS" || string(init.InitialResponse) != "anonymous" {
		t.Fatalf("first frame = %#v", f.Body)
	}
	if p, err := fr.ReadProtocolHeader(); err != nil || p != ProtoAMQP {
		t.Fatalf("ReadProtocolHeader = %d, %v", p, err)
	}
	if f, err = fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Body.(*Open); !ok {
		t.Fatalf("second frame = %#v", f.Body)
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("ReadFrame at end = %v, want io.EOF", err)
	}
}

// TestFrameReaderStream reads many frames through readers that return one
// byte at a time, or data with their error, and checks that payloads are not
// overwritten by later reads.
func TestFrameReaderStream(t *testing.T) {
	var in []byte
	var want []Frame
	for i := 0; i < 200; i++ {
		var f Frame
		switch i % 3 {
		case 0:
			f = Frame{Channel: uint16(i), Body: &Transfer{Handle: uint32(i), DeliveryID: ptr(uint32(i)), DeliveryTag: []byte{byte(i)},
				Payload: bytes.Repeat([]byte{byte(i)}, 1+i*50)}}
		case 1:
			f = Frame{Channel: uint16(i), Body: &Disposition{Role: RoleReceiver, First: uint32(i), Settled: true, State: &Accepted{}}}
		default:
			f = Frame{Channel: uint16(i)}
		}
		want = append(want, f)
		var err error
		if in, err = AppendFrame(in, f); err != nil {
			t.Fatal(err)
		}
	}
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(in) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(in)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(in)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) },
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			fr := NewFrameReader(r())
			var got []Frame
			for {
				f, err := fr.ReadFrame()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("frame %d: %v", len(got), err)
				}
				got = append(got, f)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read %d frames, not equal to the %d written", len(got), len(want))
			}
		})
	}
}

func TestFrameReaderErrors(t *testing.T) {
	big, _ := AppendFrame(nil, Frame{Body: &Transfer{Payload: make([]byte, 70000)}})
	whole, _ := AppendFrame(nil, Frame{Body: &Close{}})
	tests := []struct {
		name    string
		in      []byte
		max     uint32
		wantErr error
	}{
		{"too large", big, 0, ErrFrameTooLarge},
		{"too large for a raised limit", big, 65536, ErrFrameTooLarge},
		{"size below header", mustHex(t, "00000004 02 00 0000"), 0, ErrMalformed},
		{"size 0xffffffff", mustHex(t, "ffffffff 02 00 0000"), 0, ErrFrameTooLarge},
		{"truncated header", mustHex(t, "000000"), 0, io.ErrUnexpectedEOF},
		{"truncated body", whole[:len(whole)-1], 0, io.ErrUnexpectedEOF},
		{"garbage body", mustHex(t, "0000000c 02 00 0000 ffffffff"), 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(tt.in))
			if tt.max != 0 {
				fr.SetMaxFrameSize(tt.max)
			}
			_, err := fr.ReadFrame()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadFrame err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	t.Run("raised limit accepts", func(t *testing.T) {
		fr := NewFrameReader(bytes.NewReader(big))
		fr.SetMaxFrameSize(1 << 20)
		f, err := fr.ReadFrame()
		if err != nil || len(f.Body.(*Transfer).Payload) != 70000 {
			t.Fatalf("ReadFrame = %v, %v", f, err)
		}
	})
	t.Run("io error passes through", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := NewFrameReader(iotest.ErrReader(boom)).ReadFrame()
		if err != boom {
			t.Fatalf("ReadFrame err = %v, want %v", err, boom)
		}
	})
}

func TestParseFrameErrors(t *testing.T) {
	open, _ := AppendFrame(nil, Frame{Body: &Open{ContainerID: "c", MaxFrameSize: 512}})
	withType := func(b []byte, typ byte) []byte { c := bytes.Clone(b); c[5] = typ; return c }
	withExtra := func(b []byte) []byte {
		c := append(bytes.Clone(b), 0x40)
		c[3]++
		return c
	}
	tests := []struct {
		name string
		in   string
		raw  []byte
	}{
		{name: "empty", in: ""},
		{name: "short header", in: "00000008 02 00"},
		{name: "size mismatch", in: "00000009 02 00 0000"},
		{name: "size smaller than input", in: "00000008 02 00 0000 00"},
		{name: "doff too small", in: "00000008 01 00 0000"},
		{name: "doff beyond frame", in: "00000008 03 00 0000"},
		{name: "unknown frame type", in: "00000008 02 05 0000"},
		{name: "unknown descriptor", raw: frameOf(t, 0, "00 53 99 45")},
		{name: "unknown symbolic descriptor", raw: frameOf(t, 0, "00 a3 03 666f6f 45")},
		{name: "not described", raw: frameOf(t, 0, "45")},
		{name: "descriptor on a map", raw: frameOf(t, 0, "00 53 10 c1 01 00")},
		{name: "error as performative", raw: frameOf(t, 0, "00 53 1d 45")},
		{name: "sasl body in amqp frame", raw: frameOf(t, 0, "00 53 44 45")},
		{name: "amqp body in sasl frame", raw: withType(open, FrameTypeSASL)},
		{name: "bytes after open", raw: withExtra(open)},
		{name: "wrong field type", raw: frameOf(t, 0, "00 53 10 c0 02 01 41")},
		{name: "max-frame-size negative int", raw: frameOf(t, 0, "00 53 10 c0 05 03 40 40 54 ff")},
		{name: "channel-max too big", raw: frameOf(t, 0, "00 53 10 c0 09 04 40 40 40 70 00010000")},
		{name: "snd-settle-mode 3", raw: frameOf(t, 0, "00 53 12 c0 08 04 a1 01 61 43 42 50 03")},
		{name: "transfer truncated list", raw: frameOf(t, 0, "00 53 14 c0 05 02 43")},
		{name: "list count beyond size", raw: frameOf(t, 0, "00 53 14 c0 02 02 43 43")},
		{name: "list size shorter than fields", raw: frameOf(t, 0, "00 53 14 c0 01 01 43")},
		{name: "list size longer than fields", raw: frameOf(t, 0, "00 53 16 c0 03 01 43 40")},
		{name: "state not a delivery state", raw: frameOf(t, 0, "00 53 15 c0 09 05 41 43 40 40 00 53 10 45")},
		{name: "source with target descriptor", raw: frameOf(t, 0, "00 53 12 c0 0c 06 a1 01 61 43 42 40 40 00 53 29 45")},
		{name: "filter key not a symbol", raw: frameOf(t, 0, "00 53 12 c0 1c 06 a1 01 61 43 41 40 40 00 53 28 c0 0f 08 40 40 40 40 40 40 40 c1 05 02 a1 01 61 41")},
		{name: "unsettled with list key", raw: frameOf(t, 0, "00 53 12 c0 0f 08 a1 01 61 43 41 40 40 40 40 c1 03 02 45 40")},
		{name: "properties key not a symbol", raw: frameOf(t, 0, "00 53 13 c0 10 0b 40 43 43 43 40 40 40 40 40 40 c1 03 02 43 40")},
		{name: "symbols array of ints", raw: frameOf(t, 1, "00 53 40 c0 06 01 e0 03 01 52 01")},
		{name: "bool byte 2", raw: frameOf(t, 0, "00 53 15 c0 04 02 56 02 43")},
		{name: "decimal in properties", raw: frameOf(t, 0, "00 53 11 c0 13 08 40 43 43 43 43 40 40 c1 09 02 a3 01 61 74 00000000")},
		{name: "error condition not a symbol", raw: frameOf(t, 0, "00 53 18 c0 09 01 00 53 1d c0 03 01 a1 00")},
		{name: "detach error not an error", raw: frameOf(t, 0, "00 53 16 c0 07 03 43 42 00 53 18 45")},
		{name: "sasl-outcome code 256", raw: frameOf(t, 1, "00 53 44 c0 04 01 60 0100")},
		{name: "flow link-credit negative", raw: frameOf(t, 0, "00 53 13 c0 0c 07 40 43 43 43 43 43 71 ffffffff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.raw
			if b == nil {
				b = mustHex(t, tt.in)
			}
			f, err := ParseFrame(b)
			t.Log(err)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseFrame(% x) = %#v, %v; want an error wrapping ErrMalformed", b, f.Body, err)
			}
		})
	}
}

// TestDecodeLenient covers encodings other peers produce that this package
// does not write itself.
func TestDecodeLenient(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want any
	}{
		{"open list0 gets defaults", frameOf(t, 0, "00 53 10 45"), &Open{MaxFrameSize: math.MaxUint32, ChannelMax: 65535}},
		{"open list32 with ulong max-frame-size", frameOf(t, 0, "00 53 10 d0 0000000a 00000003 a1 01 63 40 53 ff"),
			&Open{ContainerID: "c", MaxFrameSize: 255, ChannelMax: 65535}},
		{"symbolic descriptor", frameOf(t, 0, "00 a3 0f 616d71703a636c6f73653a6c697374 45"), &Close{}},
		{"ulong descriptor", frameOf(t, 0, "00 80 0000000000000018 45"), &Close{}},
		{"single symbol for multiple", frameOf(t, 1, "00 53 40 c0 08 01 a3 05 504c41494e"), &SASLMechanisms{Mechanisms: []Symbol{"PLAIN"}}},
		{"handle as smallint", frameOf(t, 0, "00 53 16 c0 03 01 54 05"), &Detach{Handle: 5}},
		{"handle as ushort", frameOf(t, 0, "00 53 16 c0 04 01 60 0005"), &Detach{Handle: 5}},
		{"bool as byte", frameOf(t, 0, "00 53 16 c0 04 02 43 56 01"), &Detach{Closed: true}},
		{"unsettled binary key becomes string", frameOf(t, 0, "00 53 12 c0 15 08 a1 01 61 43 41 40 40 40 40 c1 09 02 a0 02 0102 00 53 24 45"),
			&Attach{Name: "a", Role: RoleReceiver, Unsettled: map[any]any{"\x01\x02": &Described{Descriptor: uint64(0x24), Value: []any{}}}}},
		{"extra fields ignored", frameOf(t, 0, "00 53 16 c0 05 04 43 42 40 41"), &Detach{}},
		{"symbol address", frameOf(t, 0, "00 53 12 c0 13 07 a1 01 61 43 41 40 40 40 00 53 29 c0 05 01 a3 02 7162"),
			&Attach{Name: "a", Role: RoleReceiver, Target: &Target{Address: "qb", ExpiryPolicy: "session-end"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrame(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Body, tt.want) {
				t.Fatalf("ParseFrame = %#v, want %#v", f.Body, tt.want)
			}
		})
	}
}

func TestAppendFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   Frame
	}{
		{"sasl body in amqp frame", Frame{Body: &SASLOutcome{}}},
		{"amqp body in sasl frame", Frame{Type: FrameTypeSASL, Body: &Open{}}},
		{"value body", Frame{Body: Open{}}},
		{"not a performative", Frame{Body: &Error{}}},
		{"unknown type", Frame{Type: 9}},
		{"nil transfer", Frame{Body: (*Transfer)(nil)}},
		{"bad property", Frame{Body: &Open{Properties: map[Symbol]any{"x": struct{}{}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := AppendFrame([]byte{1}, tt.in)
			if err == nil {
				t.Fatalf("AppendFrame = % x, want an error", out)
			}
			if len(out) != 1 {
				t.Fatalf("AppendFrame left %d bytes on error, want dst unchanged", len(out))
			}
		})
	}
}

func TestLargeFieldsUse32BitForms(t *testing.T) {
	name := strings.Repeat("n", 300)
	f := Frame{Body: &Attach{Name: name, Source: &Source{Address: name, ExpiryPolicy: "never"}, Properties: map[Symbol]any{Symbol(name): []string{name}}}}
	b, err := AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Body.(*Attach)
	if a.Name != name || a.Source.Address != name || !reflect.DeepEqual(a.Properties[Symbol(name)], Array{name}) {
		t.Fatalf("round trip lost data: %#v", a)
	}
}

// frameOf builds a frame of type typ around the hex body, computing the size.
func frameOf(tb testing.TB, typ byte, body string) []byte {
	tb.Helper()
	b := mustHex(tb, body)
	h := []byte{0, 0, 0, 0, 2, typ, 0, 0}
	n := len(b) + 8
	h[0], h[1], h[2], h[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return append(h, b...)
}
