package amqp

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
)

// checkTable checks one field table against the specification's field count
// and checks that every field's destination has a reader: into on empty input
// must fail for lack of data, not for an unknown destination type.
func checkTable[T any](t *testing.T, code uint64, ft *fieldTable[T]) {
	t.Helper()
	want := specFieldCounts[code]
	if len(ft.fields) != want {
		t.Errorf("%s: %d fields, the specification has %d", ft.name, len(ft.fields), want)
	}
	seen := map[string]bool{}
	for i, f := range ft.fields {
		if f.name == "" || seen[f.name] {
			t.Errorf("%s field %d: empty or repeated name %q", ft.name, i, f.name)
		}
		seen[f.name] = true
		d := decoder{}
		if err := d.into(f.dst(new(T))); err != errShort {
			t.Errorf("%s field %d (%s): into on empty input = %v, want %v", ft.name, i, f.name, err, errShort)
		}
	}
}

func TestFieldTables(t *testing.T) {
	checkTable(t, DescriptorOpen, &openFields)
	checkTable(t, DescriptorBegin, &beginFields)
	checkTable(t, DescriptorAttach, &attachFields)
	checkTable(t, DescriptorFlow, &flowFields)
	checkTable(t, DescriptorTransfer, &transferFields)
	checkTable(t, DescriptorDisposition, &dispositionFields)
	checkTable(t, DescriptorDetach, &detachFields)
	checkTable(t, DescriptorEnd, &endFields)
	checkTable(t, DescriptorClose, &closeFields)
	checkTable(t, DescriptorError, &errorFields)
	checkTable(t, DescriptorSource, &sourceFields)
	checkTable(t, DescriptorTarget, &targetFields)
	checkTable(t, DescriptorReceived, &receivedFields)
	checkTable(t, DescriptorAccepted, &acceptedFields)
	checkTable(t, DescriptorRejected, &rejectedFields)
	checkTable(t, DescriptorReleased, &releasedFields)
	checkTable(t, DescriptorModified, &modifiedFields)
	checkTable(t, DescriptorSASLMechanisms, &saslMechanismsFields)
	checkTable(t, DescriptorSASLInit, &saslInitFields)
	checkTable(t, DescriptorSASLChallenge, &saslChallengeFields)
	checkTable(t, DescriptorSASLResponse, &saslResponseFields)
	checkTable(t, DescriptorSASLOutcome, &saslOutcomeFields)
}

// describedList encodes descriptor code around a list32 of the given
// already-encoded fields.
func describedList(code uint64, count int, fields []byte) []byte {
	b := []byte{codeDescribed, codeSmallUlong, byte(code), codeList32}
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(fields)))
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	return append(b, fields...)
}

// specFieldCounts is the number of fields of each composite in the AMQP 1.0
// specification.
var specFieldCounts = map[uint64]int{
	DescriptorOpen: 10, DescriptorBegin: 8, DescriptorAttach: 14, DescriptorFlow: 11, DescriptorTransfer: 11,
	DescriptorDisposition: 6, DescriptorDetach: 3, DescriptorEnd: 1, DescriptorClose: 1, DescriptorError: 3,
	DescriptorSource: 11, DescriptorTarget: 7, DescriptorReceived: 2, DescriptorAccepted: 0, DescriptorRejected: 1,
	DescriptorReleased: 0, DescriptorModified: 3, DescriptorSASLMechanisms: 1, DescriptorSASLInit: 3,
	DescriptorSASLChallenge: 1, DescriptorSASLResponse: 1, DescriptorSASLOutcome: 2,
}

// TestDecodeNullFieldsKeepDefaults checks, for every composite, that a list
// of nulls as long as its table decodes like an empty list: each field keeps
// its AMQP default, including the mandatory ones (see
// TestDecodeMissingMandatoryFields).
func TestDecodeNullFieldsKeepDefaults(t *testing.T) {
	if len(specFieldCounts) != len(symbolicDescriptors) {
		t.Fatalf("%d composites listed, %d known", len(specFieldCounts), len(symbolicDescriptors))
	}
	for code, n := range specFieldCounts {
		empty, _, err := UnmarshalPerformative([]byte{codeDescribed, codeSmallUlong, byte(code), codeList0})
		if err != nil {
			t.Fatalf("0x%x with no fields: %v", code, err)
		}
		nulls, _, err := UnmarshalPerformative(describedList(code, n, bytes.Repeat([]byte{codeNull}, n)))
		if err != nil {
			t.Fatalf("0x%x with %d null fields: %v", code, n, err)
		}
		if !reflect.DeepEqual(empty, nulls) {
			t.Errorf("0x%x: %d nulls decode as %#v, no fields as %#v", code, n, nulls, empty)
		}
	}
	defaults := map[uint64]any{
		DescriptorOpen:     &Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16},
		DescriptorBegin:    &Begin{HandleMax: math.MaxUint32},
		DescriptorSource:   &Source{ExpiryPolicy: "session-end"},
		DescriptorTarget:   &Target{ExpiryPolicy: "session-end"},
		DescriptorTransfer: &Transfer{}, // Settled stays nil: a continuation frame does not repeat it
		DescriptorFlow:     &Flow{},
	}
	for code, want := range defaults {
		got, _, err := UnmarshalPerformative(describedList(code, specFieldCounts[code], bytes.Repeat([]byte{codeNull}, specFieldCounts[code])))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("0x%x of nulls = %#v, %v; want %#v", code, got, err, want)
		}
	}
}

// TestDecodeMissingMandatoryFields pins down that mandatory fields left out
// or sent as null are not refused: they decode as zero values, as an open
// with no fields always has (TestDecodeLenient).
func TestDecodeMissingMandatoryFields(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want any
	}{
		{"transfer without handle", frameOf(t, 0, "00 53 14 45"), &Transfer{}},
		{"attach with only a name", frameOf(t, 0, "00 53 12 c0 04 01 a1 01 61"), &Attach{Name: "a"}},
		{"flow with null windows", frameOf(t, 0, "00 53 13 c0 05 04 40 40 40 40"), &Flow{}},
		{"error without condition", frameOf(t, 0, "00 53 18 c0 07 01 00 53 1d c0 01 00"), &Close{Error: &Error{}}},
		{"sasl-init without mechanism", frameOf(t, 1, "00 53 41 45"), &SASLInit{}},
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

// withExtraFields re-encodes the described list at the front of b (as
// Marshal writes it: a small-ulong descriptor) as a list32 with extra fields
// appended after the declared ones.
func withExtraFields(t *testing.T, b []byte, extra []byte, k int) []byte {
	t.Helper()
	if len(b) < 4 || b[0] != codeDescribed || b[1] != codeSmallUlong {
		t.Fatalf("not a described list: % x", b)
	}
	code := uint64(b[2])
	var count int
	var fields []byte
	switch b[3] {
	case codeList0:
	case codeList8:
		count, fields = int(b[5]), b[6:5+int(b[4])]
	case codeList32:
		count, fields = int(binary.BigEndian.Uint32(b[8:])), b[12:8+int(binary.BigEndian.Uint32(b[4:]))]
	default:
		t.Fatalf("constructor 0x%02x", b[3])
	}
	// Pad to the declared fields first (the encoder leaves out trailing nulls).
	pad := specFieldCounts[code] - count
	fields = append(append(bytes.Clone(fields), bytes.Repeat([]byte{codeNull}, pad)...), extra...)
	return describedList(code, count+pad+k, fields)
}

// TestDecodeExtraTrailingFields checks that every composite ignores fields
// beyond those it declares (a later protocol version may append some),
// whatever their type, and still reports the whole list as consumed.
func TestDecodeExtraTrailingFields(t *testing.T) {
	// null, smalluint, string, empty list8, described accepted
	extra := mustHex(t, "40 52 07 a1 03 616263 c0 01 00 00 53 24 45")
	values := []any{
		&Source{Address: "q", Filter: map[Symbol]any{"f": "x"}, DefaultOutcome: &Accepted{}},
		&Target{Address: "t"},
		&Error{Condition: "amqp:not-found", Info: map[Symbol]any{"k": "v"}},
		&Accepted{}, &Released{}, &Rejected{Error: &Error{Condition: "c"}}, &Modified{DeliveryFailed: true},
		&Received{SectionNumber: 1, SectionOffset: 2},
	}
	for _, tt := range testFrames() {
		if tt.in.Body == nil {
			continue
		}
		want := tt.in
		if tt.want != nil {
			want = *tt.want
		}
		if tr, ok := want.Body.(*Transfer); ok {
			c := *tr
			c.Payload = nil
			want.Body = &c
		}
		values = append(values, want.Body)
	}
	for _, v := range values {
		b, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", v, err)
		}
		want, _, err := UnmarshalPerformative(b)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		longer := withExtraFields(t, b, extra, 5)
		got, n, err := UnmarshalPerformative(longer)
		if err != nil {
			t.Fatalf("%T with 5 extra fields: %v\n% x", v, err, longer)
		}
		if n != len(longer) || !reflect.DeepEqual(got, want) {
			t.Errorf("%T with 5 extra fields = %#v (%d of %d bytes), want %#v", v, got, n, len(longer), want)
		}
		// A malformed extra field is still an error, named by position.
		bad := withExtraFields(t, b, []byte{0x74}, 1)
		if _, _, err := UnmarshalPerformative(bad); err == nil || !strings.Contains(err.Error(), "unsupported type decimal") {
			t.Errorf("%T with a decimal extra field: err = %v", v, err)
		}
	}
}

// TestDecodeDescribedTypeMismatch checks the errors for a composite field
// holding the wrong described type, or something else than a described list:
// each names the performative and the field.
func TestDecodeDescribedTypeMismatch(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"target holding a source", frameOf(t, 0, "00 53 12 c0 0d 07 a1 01 61 43 41 40 40 40 00 53 28 45"),
			"attach field 6 (target): descriptor 0x28 where a target was expected"},
		{"end error holding a close", frameOf(t, 0, "00 53 17 c0 05 01 00 53 18 45"),
			"end field 0 (error): descriptor 0x18 where an error was expected"},
		{"rejected error holding an accepted", frameOf(t, 0, "00 53 15 c0 0f 05 41 43 40 40 00 53 25 c0 05 01 00 53 24 45"),
			"disposition field 4 (state): rejected field 0 (error): descriptor 0x24 where an error was expected"},
		{"transfer state holding a source", frameOf(t, 0, "00 53 14 c0 0c 08 43 40 40 40 40 40 40 00 53 28 45"),
			"transfer field 7 (state): descriptor 0x28 where a delivery state was expected"},
		{"error described string", frameOf(t, 0, "00 53 16 c0 09 03 43 40 00 53 1d a1 01 78"),
			"detach field 2 (error): descriptor 0x1d with constructor 0xa1 (want a list)"},
		{"error unknown symbolic descriptor", frameOf(t, 0, "00 53 18 c0 08 01 00 a3 03 666f6f 45"),
			`close field 0 (error): unknown descriptor "foo"`},
		{"error not described", frameOf(t, 0, "00 53 18 c0 03 01 a1 00"),
			"close field 0 (error): constructor 0xa1 where a described list was expected"},
		{"source not described", frameOf(t, 0, "00 53 12 c0 09 06 a1 01 61 43 41 40 40 45"),
			"attach field 5 (source): constructor 0x45 where a described list was expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFrame(tt.in)
			if err == nil || err.Error() != ErrMalformed.Error()+": "+tt.want {
				t.Fatalf("ParseFrame err = %v\nwant %s: %s", err, ErrMalformed, tt.want)
			}
		})
	}
	// The symbolic form of a nested descriptor is accepted.
	f, err := ParseFrame(frameOf(t, 0, "00 53 16 c0 1b 03 43 40 00 a3 0f 616d71703a6572726f723a6c697374 c0 04 01 a3 01 78"))
	if want := (&Detach{Error: &Error{Condition: "x"}}); err != nil || !reflect.DeepEqual(f.Body, want) {
		t.Fatalf("detach with a symbolic error descriptor = %#v, %v; want %#v", f.Body, err, want)
	}
}
