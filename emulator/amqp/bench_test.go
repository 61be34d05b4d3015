package amqp

import (
	"bytes"
	"io"
	"testing"
)

// benchTransfer is a typical unsettled transfer of a 1 KiB message.
func benchTransfer() Frame {
	return Frame{Channel: 1, Body: &Transfer{
		Handle: 0, DeliveryID: ptr(uint32(123456)), DeliveryTag: bytes.Repeat([]byte{0xab}, 16),
		MessageFormat: ptr(uint32(0)), Settled: ptr(false), Payload: bytes.Repeat([]byte{'m'}, 1024),
	}}
}

func BenchmarkAppendFrameTransfer(b *testing.B) {
	f := benchTransfer()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(f.Body.(*Transfer).Payload)))
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendFrameDisposition(b *testing.B) {
	f := Frame{Channel: 1, Body: &Disposition{Role: RoleSender, First: 100, Last: ptr(uint32(164)), Settled: true, State: &Accepted{}}}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], f); err != nil {
			b.Fatal(err)
		}
	}
}

// loopReader returns the same bytes over and over, as a connection busy with
// transfers would.
type loopReader struct {
	data []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

func BenchmarkReadFrameTransfer(b *testing.B) {
	f := benchTransfer()
	var data []byte
	for range 64 {
		var err error
		if data, err = AppendFrame(data, f); err != nil {
			b.Fatal(err)
		}
	}
	fr := NewFrameReader(&loopReader{data: data})
	b.ReportAllocs()
	b.SetBytes(int64(len(f.Body.(*Transfer).Payload)))
	for b.Loop() {
		got, err := fr.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := got.Body.(*Transfer); !ok {
			b.Fatalf("got %T", got.Body)
		}
	}
}

func BenchmarkReadFrameFlow(b *testing.B) {
	f := Frame{Channel: 1, Body: &Flow{NextIncomingID: ptr(uint32(1)), IncomingWindow: 5000, NextOutgoingID: 9, OutgoingWindow: 5000,
		Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(10)), LinkCredit: ptr(uint32(300))}}
	var data []byte
	for range 64 {
		data, _ = AppendFrame(data, f)
	}
	fr := NewFrameReader(&loopReader{data: data})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fr.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseFrameTransfer(b *testing.B) {
	data, _ := AppendFrame(nil, benchTransfer())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFrame(data); err != nil {
			b.Fatal(err)
		}
	}
}

var _ io.Reader = (*loopReader)(nil)
