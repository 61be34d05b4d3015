package amqp

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

func TestAppendTransferFrames(t *testing.T) {
	payload := make([]byte, 200_000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	newTransfer := func(p []byte, more bool) *Transfer {
		return &Transfer{Handle: 3, DeliveryID: ptr(uint32(9)), DeliveryTag: bytes.Repeat([]byte{1}, 16),
			MessageFormat: ptr(uint32(0x80013700)), Settled: ptr(false), More: more, Payload: p}
	}
	empty, err := AppendFrame(nil, Frame{Body: newTransfer(nil, false)})
	if err != nil {
		t.Fatal(err)
	}
	fit := 65536 - len(empty) // payload bytes that fit in one 64 KiB frame
	tests := []struct {
		name    string
		payload []byte
		max     uint32
		more    bool
		frames  int
	}{
		{"fits", payload[:100], 65536, false, 1},
		{"exactly one frame", payload[:fit], 65536, false, 1},
		{"one byte over", payload[:fit+1], 65536, false, 2},
		{"many frames", payload, 65536, false, 4},
		{"tiny frames", payload[:5000], 512, false, 11},
		{"caller keeps delivery open", payload[:70000], 65536, true, 2},
		{"empty payload", nil, 512, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newTransfer(tt.payload, tt.more)
			b, err := AppendTransferFrames([]byte{0xee}, 5, in, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != 0xee {
				t.Fatal("dst prefix clobbered")
			}
			fr := NewFrameReader(bytes.NewReader(b[1:]))
			fr.SetMaxFrameSize(tt.max)
			var got []byte
			var n int
			for {
				f, err := fr.ReadFrame()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("frame %d: %v", n, err)
				}
				tr := f.Body.(*Transfer)
				if f.Channel != 5 || tr.Handle != 3 {
					t.Fatalf("frame %d on channel %d handle %d", n, f.Channel, tr.Handle)
				}
				if n == 0 {
					want := *in
					want.More, want.Payload = tr.More, tr.Payload
					if !reflect.DeepEqual(tr, &want) {
						t.Fatalf("first frame %#v, want %#v", tr, &want)
					}
				} else if tr.DeliveryID != nil || tr.DeliveryTag != nil || tr.MessageFormat != nil {
					t.Fatalf("continuation frame %d repeats first-frame fields: %#v", n, tr)
				}
				got = append(got, tr.Payload...)
				n++
				last := len(got) == len(tt.payload)
				if wantMore := !last || tt.more; tr.More != wantMore {
					t.Fatalf("frame %d more=%v, want %v", n, tr.More, wantMore)
				}
			}
			if n != tt.frames {
				t.Fatalf("%d frames, want %d", n, tt.frames)
			}
			if !bytes.Equal(got, tt.payload) {
				t.Fatal("reassembled payload differs")
			}
		})
	}
	if _, err := AppendTransferFrames(nil, 0, &Transfer{Payload: payload[:1000], DeliveryTag: make([]byte, 100)}, 64); err == nil {
		t.Fatal("no error for a max-frame-size too small for the performative")
	}
}

func BenchmarkAppendTransferFrames256K(b *testing.B) {
	t := &Transfer{Handle: 0, DeliveryID: ptr(uint32(1)), DeliveryTag: make([]byte, 16), MessageFormat: ptr(uint32(0)),
		Settled: ptr(false), Payload: make([]byte, 256<<10)}
	buf := make([]byte, 0, 300<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(t.Payload)))
	for b.Loop() {
		var err error
		if buf, err = AppendTransferFrames(buf[:0], 1, t, 65536); err != nil {
			b.Fatal(err)
		}
	}
}
