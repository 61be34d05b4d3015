package amqp

import (
	"encoding/hex"
	"errors"
)

// Symbol is an AMQP symbol (an ASCII string from a constrained domain).
type Symbol string

// UUID is an AMQP uuid in RFC 4122 byte order.
type UUID [16]byte

// String formats u as 8-4-4-4-12 lower-case hex.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Char is an AMQP char (a single Unicode code point, UTF-32BE on the wire).
type Char rune

// Array is an AMQP array: every element has the same AMQP type. An empty
// Array is encoded as an array8 of null-typed elements with count 0.
type Array []any

// Described is an AMQP described value. Descriptor is a uint64 or a Symbol.
type Described struct {
	Descriptor any
	Value      any
}

// MaxDepth is the deepest nesting of compound and described values that
// Unmarshal and the frame decoders accept.
const MaxDepth = 64

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("amqp: malformed frame")

// ErrFrameTooLarge is returned by FrameReader.ReadFrame for a frame larger
// than the configured maximum frame size.
var ErrFrameTooLarge = errors.New("amqp: frame exceeds max-frame-size")

// Type codes (AMQP 1.0 part 1, section 1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBool       = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// Descriptor codes of the composite types this package knows.
const (
	DescriptorOpen           uint64 = 0x10
	DescriptorBegin          uint64 = 0x11
	DescriptorAttach         uint64 = 0x12
	DescriptorFlow           uint64 = 0x13
	DescriptorTransfer       uint64 = 0x14
	DescriptorDisposition    uint64 = 0x15
	DescriptorDetach         uint64 = 0x16
	DescriptorEnd            uint64 = 0x17
	DescriptorClose          uint64 = 0x18
	DescriptorError          uint64 = 0x1d
	DescriptorReceived       uint64 = 0x23
	DescriptorAccepted       uint64 = 0x24
	DescriptorRejected       uint64 = 0x25
	DescriptorReleased       uint64 = 0x26
	DescriptorModified       uint64 = 0x27
	DescriptorSource         uint64 = 0x28
	DescriptorTarget         uint64 = 0x29
	DescriptorSASLMechanisms uint64 = 0x40
	DescriptorSASLInit       uint64 = 0x41
	DescriptorSASLChallenge  uint64 = 0x42
	DescriptorSASLResponse   uint64 = 0x43
	DescriptorSASLOutcome    uint64 = 0x44
)

// symbolicDescriptors maps the symbolic form of a descriptor to its code.
var symbolicDescriptors = map[string]uint64{
	"amqp:open:list":            DescriptorOpen,
	"amqp:begin:list":           DescriptorBegin,
	"amqp:attach:list":          DescriptorAttach,
	"amqp:flow:list":            DescriptorFlow,
	"amqp:transfer:list":        DescriptorTransfer,
	"amqp:disposition:list":     DescriptorDisposition,
	"amqp:detach:list":          DescriptorDetach,
	"amqp:end:list":             DescriptorEnd,
	"amqp:close:list":           DescriptorClose,
	"amqp:error:list":           DescriptorError,
	"amqp:received:list":        DescriptorReceived,
	"amqp:accepted:list":        DescriptorAccepted,
	"amqp:rejected:list":        DescriptorRejected,
	"amqp:released:list":        DescriptorReleased,
	"amqp:modified:list":        DescriptorModified,
	"amqp:source:list":          DescriptorSource,
	"amqp:target:list":          DescriptorTarget,
	"amqp:sasl-mechanisms:list": DescriptorSASLMechanisms,
	"amqp:sasl-init:list":       DescriptorSASLInit,
	"amqp:sasl-challenge:list":  DescriptorSASLChallenge,
	"amqp:sasl-response:list":   DescriptorSASLResponse,
	"amqp:sasl-outcome:list":    DescriptorSASLOutcome,
}
