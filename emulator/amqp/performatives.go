package amqp

import (
	"time"
)

// Role is a link endpoint's role.
type Role bool

// Link roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SenderSettleMode is the snd-settle-mode of a link.
type SenderSettleMode uint8

// Sender settle modes.
const (
	SenderSettleModeUnsettled SenderSettleMode = 0
	SenderSettleModeSettled   SenderSettleMode = 1
	SenderSettleModeMixed     SenderSettleMode = 2
)

// ReceiverSettleMode is the rcv-settle-mode of a link.
type ReceiverSettleMode uint8

// Receiver settle modes.
const (
	ReceiverSettleModeFirst  ReceiverSettleMode = 0
	ReceiverSettleModeSecond ReceiverSettleMode = 1
)

// Open is the open performative (descriptor 0x10).
//
// Encoding always writes MaxFrameSize and ChannelMax explicitly, so a zero
// value means zero on the wire: set them (e.g. 65536 and 65535).
type Open struct {
	ContainerID         string
	Hostname            string
	MaxFrameSize        uint32        // default 4294967295 when absent
	ChannelMax          uint16        // default 65535 when absent
	IdleTimeout         time.Duration // milliseconds on the wire; 0 = none
	OutgoingLocales     []Symbol
	IncomingLocales     []Symbol
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          map[Symbol]any
}

// Begin is the begin performative (descriptor 0x11).
//
// Encoding writes HandleMax as given: zero allows a single handle.
type Begin struct {
	RemoteChannel       *uint16
	NextOutgoingID      uint32
	IncomingWindow      uint32
	OutgoingWindow      uint32
	HandleMax           uint32 // default 4294967295 when absent
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          map[Symbol]any
}

// Attach is the attach performative (descriptor 0x12).
type Attach struct {
	Name                 string
	Handle               uint32
	Role                 Role
	SndSettleMode        *SenderSettleMode   // nil = absent (mixed)
	RcvSettleMode        *ReceiverSettleMode // nil = absent (first)
	Source               *Source
	Target               *Target
	Unsettled            map[any]any // binary keys (delivery tags) decode as string
	IncompleteUnsettled  bool
	InitialDeliveryCount uint32
	MaxMessageSize       uint64 // 0 = unlimited (absent)
	OfferedCapabilities  []Symbol
	DesiredCapabilities  []Symbol
	Properties           map[Symbol]any
}

// Source is a link source terminus (descriptor 0x28).
type Source struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol // decoded as "session-end" when absent
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties map[Symbol]any
	DistributionMode      Symbol
	// Filter maps filter names to filters. The specification makes every
	// filter a described value (*Described); some clients (the JavaScript
	// Service Bus SDK's session filter) send a plain value such as a string
	// instead, and null means "no filter value". Both are kept as decoded.
	Filter map[Symbol]any
	// DefaultOutcome decodes to a DeliveryState (*Accepted, *Rejected,
	// *Released, *Modified, *Received) when it is one, else to a generic
	// value (usually *Described).
	DefaultOutcome any
	Outcomes       []Symbol
	Capabilities   []Symbol
}

// Target is a link target terminus (descriptor 0x29).
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol // decoded as "session-end" when absent
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties map[Symbol]any
	Capabilities          []Symbol
}

// Flow is the flow performative (descriptor 0x13).
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     map[Symbol]any
}

// Transfer is the transfer performative (descriptor 0x14). Payload holds the
// frame bytes after the performative; it is not part of the list.
type Transfer struct {
	Handle        uint32
	DeliveryID    *uint32
	DeliveryTag   []byte
	MessageFormat *uint32
	Settled       *bool // nil = not given (continuation frames)
	More          bool
	RcvSettleMode *ReceiverSettleMode
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool
	Payload       []byte
}

// Disposition is the disposition performative (descriptor 0x15).
type Disposition struct {
	Role      Role
	First     uint32
	Last      *uint32
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Detach is the detach performative (descriptor 0x16).
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

// End is the end performative (descriptor 0x17).
type End struct {
	Error *Error
}

// Close is the close performative (descriptor 0x18).
type Close struct {
	Error *Error
}

// Error is an AMQP error (descriptor 0x1d).
type Error struct {
	Condition   Symbol
	Description string
	Info        map[Symbol]any
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e == nil {
		return "amqp: <nil error>"
	}
	if e.Description == "" {
		return "amqp error " + string(e.Condition)
	}
	return "amqp error " + string(e.Condition) + ": " + e.Description
}

// DeliveryState is a delivery state or outcome. It is implemented by
// *Accepted, *Rejected, *Released, *Modified and *Received (pointers, like
// the performatives); decoding always yields those pointer types.
type DeliveryState interface{ deliveryState() }

// Accepted is the accepted outcome (descriptor 0x24).
type Accepted struct{}

// Rejected is the rejected outcome (descriptor 0x25).
type Rejected struct{ Error *Error }

// Released is the released outcome (descriptor 0x26).
type Released struct{}

// Modified is the modified outcome (descriptor 0x27).
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations map[Symbol]any
}

// Received is the received delivery state (descriptor 0x23).
type Received struct {
	SectionNumber uint32
	SectionOffset uint64
}

func (*Accepted) deliveryState() {}
func (*Rejected) deliveryState() {}
func (*Released) deliveryState() {}
func (*Modified) deliveryState() {}
func (*Received) deliveryState() {}

// SASLMechanisms is the sasl-mechanisms frame body (descriptor 0x40).
type SASLMechanisms struct{ Mechanisms []Symbol }

// SASLInit is the sasl-init frame body (descriptor 0x41).
type SASLInit struct {
	Mechanism       Symbol
	InitialResponse []byte
	Hostname        string
}

// SASLChallenge is the sasl-challenge frame body (descriptor 0x42).
type SASLChallenge struct{ Challenge []byte }

// SASLResponse is the sasl-response frame body (descriptor 0x43).
type SASLResponse struct{ Response []byte }

// SASLOutcome is the sasl-outcome frame body (descriptor 0x44). Code 0 is ok.
type SASLOutcome struct {
	Code           uint8
	AdditionalData []byte
}
