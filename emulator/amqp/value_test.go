package amqp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var testTime = time.UnixMilli(1_763_776_000_123).UTC()

func TestValueRoundTrip(t *testing.T) {
	uuid := UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	long := strings.Repeat("x", 300)
	tests := []struct {
		name string
		in   any
		want any // nil means want == in
	}{
		{"null", nil, nil},
		{"true", true, nil},
		{"false", false, nil},
		{"ubyte", uint8(200), nil},
		{"ushort", uint16(65000), nil},
		{"uint0", uint32(0), nil},
		{"smalluint", uint32(255), nil},
		{"uint", uint32(math.MaxUint32), nil},
		{"ulong0", uint64(0), nil},
		{"smallulong", uint64(7), nil},
		{"ulong", uint64(math.MaxUint64), nil},
		{"go uint", uint(12345), uint64(12345)},
		{"byte", int8(-100), nil},
		{"short", int16(-30000), nil},
		{"smallint", int32(-128), nil},
		{"int", int32(math.MinInt32), nil},
		{"smalllong", int64(127), nil},
		{"long", int64(math.MinInt64), nil},
		{"go int", int(-5_000_000_000), int64(-5_000_000_000)},
		{"float", float32(3.25), nil},
		{"double", math.Pi, nil},
		{"char", Char('€'), nil},
		{"timestamp", testTime, nil},
		{"timestamp before 1970", time.UnixMilli(-86_400_001).UTC(), nil},
		{"uuid", uuid, nil},
		{"vbin8", []byte{1, 2, 3}, nil},
		{"vbin8 empty", []byte{}, nil},
		{"vbin32", bytes.Repeat([]byte{7}, 300), nil},
		{"str8", "héllo", nil},
		{"str8 empty", "", nil},
		{"str32", long, nil},
		{"sym8", Symbol("amqp:accepted:list"), nil},
		{"sym32", Symbol(long), nil},
		{"list0", []any{}, nil},
		{"list8", []any{uint32(1), "two", nil, true}, nil},
		{"list32", []any{long, int64(1)}, nil},
		{"nested list", []any{[]any{[]any{uint8(1)}}}, nil},
		{"map8", map[any]any{Symbol("a"): int32(1), "b": []any{}, uint64(3): nil}, nil},
		{"map32", map[any]any{"k": long}, nil},
		{"map with described key", map[any]any{int64(1): &Described{Descriptor: uint64(9), Value: "v"}}, nil},
		{"map[Symbol]any", map[Symbol]any{"x-opt-a": int64(1)}, map[any]any{Symbol("x-opt-a"): int64(1)}},
		{"map[string]any", map[string]any{"status-code": int32(200)}, map[any]any{"status-code": int32(200)}},
		{"empty array", Array{}, nil},
		{"array of ulong", Array{uint64(1), uint64(math.MaxUint64)}, nil},
		{"array of bool", Array{true, false}, nil},
		{"array of mixed-length strings", Array{"a", long}, nil},
		{"array of binary", Array{[]byte{1}, []byte{}}, nil},
		{"array of lists", Array{[]any{uint8(1)}, []any{}}, nil},
		{"array of maps", Array{map[any]any{"a": int8(1)}}, nil},
		{"array of arrays", Array{Array{int32(1), int32(2)}, Array{}}, nil},
		{"array of every fixed type", Array{uint8(1)}, nil},
		{"array of ushort", Array{uint16(1)}, nil},
		{"array of short", Array{int16(-1)}, nil},
		{"array of byte", Array{int8(-1)}, nil},
		{"array of float", Array{float32(1.5)}, nil},
		{"array of double", Array{2.5}, nil},
		{"array of char", Array{Char('a')}, nil},
		{"array of timestamp", Array{testTime}, nil},
		{"array of uuid", Array{uuid, UUID{}}, nil},
		{"array of symbol", Array{Symbol("a"), Symbol("b")}, nil},
		{"[]Symbol", []Symbol{"ANONYMOUS", "MSSBCBS"}, Array{Symbol("ANONYMOUS"), Symbol("MSSBCBS")}},
		{"[]Symbol empty", []Symbol{}, Array{}},
		{"[]string", []string{"s1", long}, Array{"s1", long}},
		{"[]int64", []int64{1, -2}, Array{int64(1), int64(-2)}},
		{"[]int32", []int32{1, -2}, Array{int32(1), int32(-2)}},
		{"[]uint32", []uint32{1, 2}, Array{uint32(1), uint32(2)}},
		{"[]uint64", []uint64{1, 2}, Array{uint64(1), uint64(2)}},
		{"[]bool", []bool{true, false}, Array{true, false}},
		{"[]UUID", []UUID{uuid}, Array{uuid}},
		{"[]time.Time", []time.Time{testTime}, Array{testTime}},
		{"described ulong", &Described{Descriptor: uint64(0x77), Value: "body"}, nil},
		{"described symbol", &Described{Descriptor: Symbol("com.example:x"), Value: []any{uint32(1)}}, nil},
		{"described value", Described{Descriptor: uint64(0x75), Value: []byte("data")}, &Described{Descriptor: uint64(0x75), Value: []byte("data")}},
		{"nil described", (*Described)(nil), nil},
		{"nested described", &Described{Descriptor: uint64(1), Value: &Described{Descriptor: uint64(2), Value: nil}}, nil},
		{"nil map", map[any]any(nil), nil},
		{"nil []Symbol", []Symbol(nil), nil},
		{"nil binary", []byte(nil), nil},
		{"nil Array", Array(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = tt.in
				switch v := tt.in.(type) {
				case map[any]any:
					if v == nil {
						want = nil
					}
				case *Described:
					if v == nil {
						want = nil
					}
				case []Symbol, []byte, Array:
					if reflect.ValueOf(v).IsNil() {
						want = nil
					}
				}
			}
			prefix := []byte{0xAA, 0xBB}
			b, err := AppendValue(prefix, tt.in)
			if err != nil {
				t.Fatalf("AppendValue: %v", err)
			}
			if !bytes.Equal(b[:2], prefix) {
				t.Fatalf("AppendValue clobbered dst prefix: % x", b[:2])
			}
			enc := b[2:]
			got, n, err := Unmarshal(append(enc, 0xFF)) // trailing byte must be left alone
			if err != nil {
				t.Fatalf("Unmarshal(% x): %v", enc, err)
			}
			if n != len(enc) {
				t.Fatalf("Unmarshal consumed %d bytes, encoding has %d", n, len(enc))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip: got %#v, want %#v (encoding % x)", got, want, enc)
			}
			// Map order is not deterministic, so compare Marshal by value.
			m, err := Marshal(tt.in)
			if err != nil || len(m) != len(enc) {
				t.Fatalf("Marshal = % x, %v; want % x", m, err, enc)
			}
			if got2, _, err := Unmarshal(m); err != nil || !reflect.DeepEqual(got2, want) {
				t.Fatalf("Unmarshal(Marshal) = %#v, %v", got2, err)
			}
		})
	}
}

func TestValueEncodingGolden(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, "40"},
		{"true", true, "41"},
		{"false", false, "42"},
		{"uint0", uint32(0), "43"},
		{"smalluint", uint32(5), "52 05"},
		{"uint", uint32(256), "70 00000100"},
		{"ulong0", uint64(0), "44"},
		{"smallulong", uint64(0x70), "53 70"},
		{"ulong", uint64(0x1370_0000_000c), "80 00001370 0000000c"},
		{"smallint", int32(-1), "54 ff"},
		{"int", int32(200), "71 000000c8"},
		{"smalllong", int64(-1), "55 ff"},
		{"long", int64(128), "81 0000000000000080"},
		{"ubyte", uint8(1), "50 01"},
		{"byte", int8(-2), "51 fe"},
		{"ushort", uint16(258), "60 0102"},
		{"short", int16(-2), "61 fffe"},
		{"float", float32(1), "72 3f800000"},
		{"double", float64(1), "82 3ff0000000000000"},
		{"char", Char('A'), "73 00000041"},
		{"timestamp", time.UnixMilli(1).UTC(), "83 0000000000000001"},
		{"uuid", UUID{15: 1}, "98 00000000000000000000000000000001"},
		{"str8", "ab", "a1 02 6162"},
		{"sym8", Symbol("ab"), "a3 02 6162"},
		{"vbin8", []byte{9}, "a0 01 09"},
		{"list0", []any{}, "45"},
		{"list8", []any{true, uint32(0)}, "c0 03 02 41 43"},
		{"map8", map[any]any{Symbol("a"): nil}, "c1 05 02 a3 01 61 40"},
		{"empty array", Array{}, "e0 02 00 40"},
		{"symbol array", []Symbol{"ANONYMOUS", "MSSBCBS"}, "e0 14 02 a3 09 414e4f4e594d4f5553 07 4d535342434253"},
		{"long array", []int64{1}, "e0 0a 01 81 0000000000000001"},
		{"described", &Described{Descriptor: uint64(0x77), Value: "x"}, "00 53 77 a1 01 78"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if want := mustHex(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("Marshal(%#v) = % x, want % x", tt.in, got, want)
			}
		})
	}
}

// TestUnmarshalAcceptsWideForms decodes encodings this package never writes
// (32-bit forms of small values), as other peers may.
func TestUnmarshalAcceptsWideForms(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"str32", "b1 00000002 6869", "hi"},
		{"sym32", "b3 00000001 61", Symbol("a")},
		{"vbin32", "b0 00000000", []byte{}},
		{"list32", "d0 00000005 00000001 43", []any{uint32(0)}},
		{"map32", "d1 00000008 00000002 a3 01 61 41", map[any]any{Symbol("a"): true}},
		{"array32", "f0 00000006 00000001 52 07", Array{uint32(7)}},
		{"bool byte", "56 01", true},
		{"smallulong array", "e0 04 02 53 01 02", Array{uint64(1), uint64(2)}},
		{"bool array", "e0 04 02 56 01 00", Array{true, false}},
		{"described symbolic", "00 a3 03 666f6f 40", &Described{Descriptor: Symbol("foo")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustHex(t, tt.in)
			got, n, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(b) || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Unmarshal = %#v (%d bytes), want %#v (%d bytes)", got, n, tt.want, len(b))
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	nested := bytes.Repeat([]byte{0xd0, 0, 0, 0, 0, 0, 0, 0, 1}, 100)
	// Make each list32 size cover the rest: size = remaining bytes after the size field.
	for i := 0; i < 100; i++ {
		rest := len(nested) - (i*9 + 5) + 1 // +1 for the final null
		nested[i*9+1] = byte(rest >> 24)
		nested[i*9+2] = byte(rest >> 16)
		nested[i*9+3] = byte(rest >> 8)
		nested[i*9+4] = byte(rest)
	}
	nested = append(nested, 0x40)
	deepDescribed := append(bytes.Repeat([]byte{0x00, 0x53, 0x01}, 200), 0x40)

	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown constructor", []byte{0x01}},
		{"reserved constructor", []byte{0xff}},
		{"truncated uint", mustHex(t, "70 0000")},
		{"truncated ulong", mustHex(t, "80 00")},
		{"truncated uuid", mustHex(t, "98 0102")},
		{"str8 longer than input", mustHex(t, "a1 05 6162")},
		{"str32 huge", mustHex(t, "b1 ffffffff 61")},
		{"vbin32 huge", mustHex(t, "b0 7fffffff")},
		{"list8 size beyond input", mustHex(t, "c0 10 01 40")},
		{"list32 huge", mustHex(t, "d0 ffffffff ffffffff")},
		{"list count beyond size", mustHex(t, "c0 02 05 40")},
		{"list32 count huge", mustHex(t, "d0 00000005 ffffffff 40")},
		{"list size too big for elements", mustHex(t, "c0 03 01 40 40")},
		{"list size zero", mustHex(t, "c0 00")},
		{"map odd count", mustHex(t, "c1 02 01 40")},
		{"map binary key", mustHex(t, "c1 05 02 a0 01 00 40")},
		{"map list key", mustHex(t, "c1 03 02 45 40")},
		{"map map key", mustHex(t, "c1 06 02 c1 01 00 40")},
		{"map array key", mustHex(t, "c1 06 02 e0 02 00 40 40")},
		{"array count huge", mustHex(t, "f0 00000005 ffffffff 70")},
		{"array of nulls", mustHex(t, "e0 02 05 40")},
		{"array of uint0", mustHex(t, "e0 02 ff 43")},
		{"array width mismatch", mustHex(t, "e0 05 01 70 000000")},
		{"array of described", mustHex(t, "e0 05 01 00 53 01 40")},
		{"array missing constructor", mustHex(t, "e0 01 00")},
		{"bad bool byte", mustHex(t, "56 02")},
		{"decimal32", mustHex(t, "74 00000000")},
		{"decimal64", mustHex(t, "84 0000000000000000")},
		{"decimal128", mustHex(t, "94 00000000000000000000000000000000")},
		{"described without value", mustHex(t, "00 53 01")},
		{"described bad descriptor", mustHex(t, "00 a1 01 61 40")},
		{"too deep lists", nested},
		{"too deep described", deepDescribed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, n, err := Unmarshal(tt.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal(% x) = %#v, %d, %v; want an error wrapping ErrMalformed", tt.in, v, n, err)
			}
		})
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	// MaxDepth-1 nested lists decode; it is the limit, not an off-by-one.
	var v any = []any{}
	for i := 0; i < MaxDepth-1; i++ {
		v = []any{v}
	}
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Unmarshal(b); err != nil {
		t.Fatalf("Unmarshal of %d nested lists: %v", MaxDepth, err)
	}
}

func TestAppendValueErrors(t *testing.T) {
	var deep any = nil
	for i := 0; i < 2*MaxDepth+5; i++ {
		deep = []any{deep}
	}
	tests := []struct {
		name string
		in   any
	}{
		{"struct", struct{}{}},
		{"chan", make(chan int)},
		{"mixed array", Array{uint32(1), "x"}},
		{"array of unsupported", Array{struct{}{}}},
		{"described bad descriptor", &Described{Descriptor: "string", Value: nil}},
		{"list with unsupported", []any{1.5, struct{}{}}},
		{"map with unsupported", map[any]any{"a": struct{}{}}},
		{"too deep", deep},
		{"negative idle timeout", &Open{IdleTimeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte{1, 2, 3}
			out, err := AppendValue(dst, tt.in)
			if err == nil {
				t.Fatalf("AppendValue(%#v) = % x, want an error", tt.in, out)
			}
			if len(out) != 3 {
				t.Fatalf("AppendValue returned %d bytes on error, want dst unchanged", len(out))
			}
		})
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	if got, want := u.String(), "12345678-9abc-def0-0123-456789abcdef"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestErrorString(t *testing.T) {
	var err error = &Error{Condition: "amqp:not-found", Description: "no such queue"}
	if got := err.Error(); !strings.Contains(got, "amqp:not-found") || !strings.Contains(got, "no such queue") {
		t.Fatalf("Error() = %q", got)
	}
}

// TestDepthSymmetry checks that whatever nesting the decoder accepts inside a
// performative, the encoder can write again.
func TestDepthSymmetry(t *testing.T) {
	for k := MaxDepth - 8; k < MaxDepth+4; k++ {
		var v any = uint8(1)
		for i := 0; i < k; i++ {
			v = []any{v}
		}
		for _, f := range []Frame{
			{Body: &Open{ContainerID: "c", Properties: map[Symbol]any{"a": v}}},
			{Body: &Attach{Source: &Source{DynamicNodeProperties: map[Symbol]any{"a": v}}}},
			{Body: &Disposition{State: &Rejected{Error: &Error{Info: map[Symbol]any{"a": v}}}}},
		} {
			b, err := AppendFrame(nil, f)
			if err != nil {
				t.Fatalf("depth %d: AppendFrame: %v", k, err)
			}
			got, err := ParseFrame(b)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("depth %d: %v", k, err)
				}
				continue
			}
			if _, err := AppendFrame(nil, got); err != nil {
				t.Fatalf("depth %d: decoded %T but cannot encode it again: %v", k, got.Body, err)
			}
		}
	}
}

func TestCyclicValueIsAnError(t *testing.T) {
	l := []any{nil}
	l[0] = l
	if _, err := Marshal(l); err == nil {
		t.Fatal("Marshal of a cyclic list succeeded")
	}
	m := map[any]any{}
	d := &Described{Descriptor: uint64(1)}
	d.Value = []any{d}
	m["x"] = d
	if _, err := Marshal(m); err == nil {
		t.Fatal("Marshal of a cyclic described value succeeded")
	}
}
