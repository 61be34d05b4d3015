package amqp

import (
	"encoding/binary"
	"fmt"
)

// AppendTransferFrames appends t as one or more AMQP frames on channel, none
// larger than maxFrameSize (the peer's max-frame-size from its open). When
// the payload does not fit in one frame it is split: the first frame carries
// every field of t, the continuation frames only the handle, and every frame
// but the last has more=true. The last frame has more=t.More, so a caller
// streaming a delivery in pieces can keep it open.
//
// This only splits bytes as asked; choosing maxFrameSize is the caller's
// policy. On error dst is returned unchanged (same length).
func AppendTransferFrames(dst []byte, channel uint16, t *Transfer, maxFrameSize uint32) ([]byte, error) {
	if t == nil {
		return dst, fmt.Errorf("%w: nil *Transfer", errEncode)
	}
	start := len(dst)
	// Fast path: the whole transfer fits in one frame.
	out, err := AppendFrame(dst, Frame{Channel: channel, Body: t})
	if err != nil {
		return dst[:start], err
	}
	if uint64(len(out)-start) <= uint64(maxFrameSize) {
		return out, nil
	}
	dst = out[:start]

	payload := t.Payload
	first := *t
	first.More = true
	first.Payload = nil
	cont := Transfer{Handle: t.Handle, More: true}
	for i := 0; len(payload) > 0 || i == 0; i++ {
		hdr := len(dst)
		dst = append(dst, 0, 0, 0, 0, 2, FrameTypeAMQP, byte(channel>>8), byte(channel))
		// Encode with more=true first: it is never shorter than more=false,
		// so the room computed from it is safe for the last frame too.
		perf := &cont
		if i == 0 {
			perf = &first
		}
		perf.More = true
		if dst, err = appendTransfer(dst, perf); err != nil {
			return dst[:start], err
		}
		room := int64(maxFrameSize) - int64(len(dst)-hdr)
		if room <= 0 {
			return dst[:start], fmt.Errorf("%w: max-frame-size %d leaves no room for a transfer payload", errEncode, maxFrameSize)
		}
		n := len(payload)
		if int64(n) > room {
			n = int(room)
		}
		if n == len(payload) && !t.More {
			// The last piece: re-encode with more=false.
			dst = dst[:hdr+frameHeaderSize]
			perf.More = false
			if dst, err = appendTransfer(dst, perf); err != nil {
				return dst[:start], err
			}
		}
		dst = append(dst, payload[:n]...)
		payload = payload[n:]
		binary.BigEndian.PutUint32(dst[hdr:], uint32(len(dst)-hdr))
	}
	return dst, nil
}
