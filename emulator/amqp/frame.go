package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Frame types.
const (
	FrameTypeAMQP uint8 = 0
	FrameTypeSASL uint8 = 1
)

// Protocol ids of the protocol header.
const (
	ProtoAMQP uint8 = 0
	ProtoTLS  uint8 = 2
	ProtoSASL uint8 = 3
)

// minReadBuffer is the initial FrameReader buffer: room for a burst of
// small frames (flows, dispositions, small transfers) per Read call.
const minReadBuffer = 16 << 10

// frameHeaderSize is the size of the fixed frame header; DefaultMaxFrameSize
// is the FrameReader limit until SetMaxFrameSize changes it.
const (
	frameHeaderSize            = 8
	DefaultMaxFrameSize uint32 = 65536
)

// Frame is one AMQP or SASL frame. Body is a performative pointer (*Open,
// *Begin, *Attach, *Flow, *Transfer, *Disposition, *Detach, *End, *Close for
// AMQP frames; *SASLMechanisms, *SASLInit, *SASLChallenge, *SASLResponse,
// *SASLOutcome for SASL frames) or nil for an empty (keep-alive) frame. A
// transfer's payload travels in (*Transfer).Payload.
type Frame struct {
	Type    uint8
	Channel uint16
	Body    any
}

// ProtocolHeader returns the 8-byte protocol header "AMQP" proto 1 0 0.
func ProtocolHeader(proto uint8) []byte {
	return []byte{'A', 'M', 'Q', 'P', proto, 1, 0, 0}
}

// ReadProtocolHeader reads an 8-byte protocol header from r and returns its
// protocol id. Bytes that are not "AMQP" id 1 0 0 with a known id give an
// error wrapping ErrMalformed (with the id byte as read, so that the caller
// can answer with its own header before closing). I/O errors are returned as
// they are.
//
// When frames are read with a FrameReader, read later headers through the
// FrameReader (which is an io.Reader), since it may have buffered them.
func ReadProtocolHeader(r io.Reader) (proto uint8, err error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	return parseProtocolHeader(h)
}

func parseProtocolHeader(h [8]byte) (uint8, error) {
	if h[0] != 'A' || h[1] != 'M' || h[2] != 'Q' || h[3] != 'P' {
		return 0, malformed("protocol header % x does not start with AMQP", h[:])
	}
	if h[5] != 1 || h[6] != 0 || h[7] != 0 {
		return h[4], malformed("unsupported protocol version %d.%d.%d", h[5], h[6], h[7])
	}
	switch h[4] {
	case ProtoAMQP, ProtoTLS, ProtoSASL:
		return h[4], nil
	}
	return h[4], malformed("unknown protocol id %d", h[4])
}

// ParseFrame decodes exactly one whole frame, header included. The result
// aliases b (transfer payloads, delivery tags and other binary values).
// Every error wraps ErrMalformed.
func ParseFrame(b []byte) (Frame, error) {
	if len(b) < frameHeaderSize {
		return Frame{}, malformed("frame of %d bytes is shorter than its header", len(b))
	}
	size := binary.BigEndian.Uint32(b)
	if uint64(size) != uint64(len(b)) {
		return Frame{}, malformed("frame size %d but %d bytes given", size, len(b))
	}
	return parseFrame(b, false)
}

// parseFrame decodes a frame whose size field has been checked against
// len(b). copyBytes makes binary values fresh copies.
func parseFrame(b []byte, copyBytes bool) (Frame, error) {
	doff := int(b[4]) * 4
	if doff < frameHeaderSize || doff > len(b) {
		return Frame{}, malformed("data offset %d in a frame of %d bytes", b[4], len(b))
	}
	f := Frame{Type: b[5], Channel: binary.BigEndian.Uint16(b[6:])}
	if f.Type != FrameTypeAMQP && f.Type != FrameTypeSASL {
		return Frame{}, malformed("unknown frame type %d", f.Type)
	}
	body := b[doff:]
	if len(body) == 0 {
		return f, nil
	}
	d := decoder{b: body, copy: copyBytes}
	v, err := d.composite()
	if err != nil {
		return Frame{}, err
	}
	if isSASLBody(v) != (f.Type == FrameTypeSASL) || !isFrameBody(v) {
		return Frame{}, malformed("%T is not a body of a frame of type %d", v, f.Type)
	}
	rest := body[d.pos:]
	if t, ok := v.(*Transfer); ok {
		if len(rest) > 0 {
			if copyBytes {
				t.Payload = append([]byte(nil), rest...)
			} else {
				t.Payload = rest[:len(rest):len(rest)]
			}
		}
	} else if len(rest) > 0 {
		return Frame{}, malformed("%d bytes after a %T performative", len(rest), v)
	}
	f.Body = v
	return f, nil
}

func isSASLBody(v any) bool {
	switch v.(type) {
	case *SASLMechanisms, *SASLInit, *SASLChallenge, *SASLResponse, *SASLOutcome:
		return true
	}
	return false
}

func isFrameBody(v any) bool {
	switch v.(type) {
	case *Open, *Begin, *Attach, *Flow, *Transfer, *Disposition, *Detach, *End, *Close,
		*SASLMechanisms, *SASLInit, *SASLChallenge, *SASLResponse, *SASLOutcome:
		return true
	}
	return false
}

// AppendFrame appends the encoding of f to dst: the 8-byte header (data
// offset 2), the performative and, for a transfer, its payload. It does not
// split transfers to fit a peer's max-frame-size; that is the caller's job.
// On error dst is returned unchanged (same length).
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	s := len(dst)
	if f.Type != FrameTypeAMQP && f.Type != FrameTypeSASL {
		return dst, fmt.Errorf("%w: unknown frame type %d", errEncode, f.Type)
	}
	dst = append(dst, 0, 0, 0, 0, 2, f.Type, byte(f.Channel>>8), byte(f.Channel))
	var err error
	if f.Body != nil {
		if !isFrameBody(f.Body) {
			return dst[:s], fmt.Errorf("%w: %T is not a frame body (want a performative pointer)", errEncode, f.Body)
		}
		if isSASLBody(f.Body) != (f.Type == FrameTypeSASL) {
			return dst[:s], fmt.Errorf("%w: %T in a frame of type %d", errEncode, f.Body, f.Type)
		}
		switch b := f.Body.(type) {
		case *Transfer:
			if b == nil {
				return dst[:s], fmt.Errorf("%w: nil *Transfer", errEncode)
			}
			if dst, err = appendTransfer(dst, b); err == nil {
				dst = append(dst, b.Payload...)
			}
		default:
			dst, err = appendComposite(dst, f.Body, 0)
		}
		if err != nil {
			return dst[:s], err
		}
	}
	size := len(dst) - s
	if uint64(size) > math.MaxUint32 {
		return dst[:s], fmt.Errorf("%w: frame of %d bytes", errEncode, size)
	}
	binary.BigEndian.PutUint32(dst[s:], uint32(size))
	return dst, nil
}

// FrameReader reads frames from an io.Reader through its own buffer, so a
// single Read usually yields several frames. It is not safe for concurrent
// use. Frames it returns never alias its buffer: a transfer's payload and
// delivery tag stay valid after the next ReadFrame.
//
// FrameReader is also an io.Reader that drains its buffer first, so a
// protocol header that arrives right after the SASL exchange can be read
// with ReadProtocolHeader(fr) or fr.ReadProtocolHeader().
type FrameReader struct {
	r     io.Reader
	buf   []byte
	start int // first unread byte
	end   int // end of buffered data
	max   uint32
	err   error // sticky error from r, returned once the buffer is drained
	empty int   // consecutive reads that returned 0, nil
}

// NewFrameReader returns a FrameReader reading from r with a maximum frame
// size of DefaultMaxFrameSize.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r, max: DefaultMaxFrameSize}
}

// SetMaxFrameSize sets the largest frame ReadFrame accepts; larger frames
// fail with ErrFrameTooLarge. Values below 512 (the AMQP minimum) are raised
// to 512.
func (fr *FrameReader) SetMaxFrameSize(n uint32) {
	if n < 512 {
		n = 512
	}
	fr.max = n
}

// fill makes at least n bytes available in buf[start:end]. io.EOF before any
// byte of the wanted data is returned as io.EOF; a partial frame gives
// io.ErrUnexpectedEOF.
func (fr *FrameReader) fill(n int) error {
	for fr.end-fr.start < n {
		if fr.err != nil {
			err := fr.err
			if err == io.EOF && fr.end > fr.start {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if len(fr.buf)-fr.start < n {
			// Not enough room after start: compact, growing when needed.
			size := len(fr.buf)
			if size < minReadBuffer {
				size = minReadBuffer
			}
			for size < n {
				size *= 2
			}
			if size == len(fr.buf) {
				copy(fr.buf, fr.buf[fr.start:fr.end])
			} else {
				nb := make([]byte, size)
				copy(nb, fr.buf[fr.start:fr.end])
				fr.buf = nb
			}
			fr.end -= fr.start
			fr.start = 0
		}
		m, err := fr.r.Read(fr.buf[fr.end:])
		if m < 0 || m > len(fr.buf)-fr.end {
			return errors.New("amqp: reader returned an invalid count")
		}
		fr.end += m
		switch {
		case err != nil:
			fr.err = err
		case m > 0:
			fr.empty = 0
		default:
			// Guard against readers that return 0, nil forever.
			if fr.empty++; fr.empty >= 100 {
				fr.err = io.ErrNoProgress
			}
		}
	}
	return nil
}

// ReadFrame reads the next frame. I/O errors are returned as they are (io.EOF
// at a frame boundary, io.ErrUnexpectedEOF inside a frame); decoding errors
// wrap ErrMalformed; a frame above the maximum size gives ErrFrameTooLarge.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if err := fr.fill(frameHeaderSize); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(fr.buf[fr.start:])
	if size > fr.max {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, size, fr.max)
	}
	if size < frameHeaderSize {
		return Frame{}, malformed("frame size %d is smaller than its header", size)
	}
	if err := fr.fill(int(size)); err != nil {
		return Frame{}, err
	}
	b := fr.buf[fr.start : fr.start+int(size)]
	fr.start += int(size)
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
	}
	// A transfer's payload must outlive the buffer: copy the whole frame once
	// and let the decoded transfer alias that copy, which costs one
	// allocation instead of one per binary field. Other frames are decoded
	// straight from the buffer with their binary values copied.
	doff := int(b[4]) * 4
	if doff >= frameHeaderSize && len(b) >= doff+3 && b[doff] == codeDescribed &&
		b[doff+1] == codeSmallUlong && b[doff+2] == byte(DescriptorTransfer) {
		c := make([]byte, len(b))
		copy(c, b)
		return parseFrame(c, false)
	}
	return parseFrame(b, true)
}

// Read reads buffered bytes first, then from the underlying reader.
func (fr *FrameReader) Read(p []byte) (int, error) {
	if fr.end > fr.start {
		n := copy(p, fr.buf[fr.start:fr.end])
		fr.start += n
		if fr.start == fr.end {
			fr.start, fr.end = 0, 0
		}
		return n, nil
	}
	if fr.err != nil {
		return 0, fr.err
	}
	return fr.r.Read(p)
}

// ReadProtocolHeader reads a protocol header through the buffer; see the
// package-level ReadProtocolHeader.
func (fr *FrameReader) ReadProtocolHeader() (proto uint8, err error) {
	if err := fr.fill(8); err != nil {
		return 0, err
	}
	var h [8]byte
	copy(h[:], fr.buf[fr.start:])
	fr.start += 8
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
	}
	return parseProtocolHeader(h)
}
