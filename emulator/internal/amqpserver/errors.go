package amqpserver

import (
	"errors"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

// AMQP error conditions the emulator sends. Only conditions the SDK classifies
// (docs/servicebus-protocol.md §11) are used in dispositions, detaches and closes aimed at it.
const (
	condInternalError     amqp.Symbol = "amqp:internal-error"
	condNotFound          amqp.Symbol = "amqp:not-found"
	condDecodeError       amqp.Symbol = "amqp:decode-error"
	condNotAllowed        amqp.Symbol = "amqp:not-allowed"
	condNotImplemented    amqp.Symbol = "amqp:not-implemented"
	condConnectionForced  amqp.Symbol = "amqp:connection:forced"
	condFramingError      amqp.Symbol = "amqp:connection:framing-error"
	condFrameSizeTooSmall amqp.Symbol = "amqp:frame-size-too-small"
	condUnattachedHandle  amqp.Symbol = "amqp:session:unattached-handle"
	condHandleInUse       amqp.Symbol = "amqp:session:handle-in-use"
	condWindowViolation   amqp.Symbol = "amqp:session:window-violation"
	condDetachForced      amqp.Symbol = "amqp:link:detach-forced"
	condMessageSize       amqp.Symbol = "amqp:link:message-size-exceeded"
	condServerBusy        amqp.Symbol = "com.microsoft:server-busy"
	condTimeout           amqp.Symbol = "com.microsoft:timeout"
	condLockLost          amqp.Symbol = "com.microsoft:message-lock-lost"
	condSessionCannotLock amqp.Symbol = "com.microsoft:session-cannot-be-locked"
	condEntityDisabled    amqp.Symbol = "com.microsoft:entity-disabled"
)

// brokerCondition maps a broker error to the AMQP condition used in dispositions,
// transfer rejections and attach refusals.
func brokerCondition(err error) amqp.Symbol {
	switch {
	case errors.Is(err, broker.ErrNotFound), errors.Is(err, broker.ErrEntityDeleted):
		return condNotFound
	case errors.Is(err, broker.ErrLockLost):
		return condLockLost
	case errors.Is(err, broker.ErrSessionLockLost):
		// The SDK treats a lost lock on a session link as retryable at link level.
		return condLockLost
	case errors.Is(err, broker.ErrServerBusy):
		return condServerBusy
	case errors.Is(err, broker.ErrInvalidMessage), errors.Is(err, broker.ErrNotAllowed), errors.Is(err, broker.ErrAlreadyExists):
		return condNotAllowed
	case errors.Is(err, broker.ErrNoSession):
		return condTimeout
	case errors.Is(err, broker.ErrSessionLocked):
		return condSessionCannotLock
	case errors.Is(err, broker.ErrEntityDisabled):
		return condEntityDisabled
	default:
		return condInternalError
	}
}

func brokerError(err error) *amqp.Error {
	return &amqp.Error{Condition: brokerCondition(err), Description: brokerDescription(err)}
}

// Descriptions the service gives for errors that clients (and the Azure SDK
// for Go's own tests) match on by text.
const (
	descLockLost        = "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue."
	descSessionLockLost = "The session lock has expired on the MessageSession. Accept a new MessageSession."
	descSessionRequired = "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."
)

// brokerDescription is the error description of a broker error on the wire:
// the service's wording first where clients match on it, then the
// emulator's detail in parentheses.
func brokerDescription(err error) string {
	var lead string
	switch {
	case errors.Is(err, broker.ErrLockLost):
		lead = descLockLost
	case errors.Is(err, broker.ErrSessionLockLost):
		lead = descSessionLockLost
	case errors.Is(err, broker.ErrSessionRequired):
		lead = descSessionRequired
	default:
		return err.Error()
	}
	return lead + " (" + err.Error() + ")"
}

// Management status codes (docs/servicebus-protocol.md §9, §11).
const (
	statusOK           int32 = 200
	statusAccepted     int32 = 202
	statusNoContent    int32 = 204
	statusBadRequest   int32 = 400
	statusUnauthorized int32 = 401
	statusNotFound     int32 = 404
	statusGone         int32 = 410
	statusInternal     int32 = 500
	statusNotImpl      int32 = 501
	statusBusy         int32 = 503
)

// brokerStatus maps a broker error to a management status code.
func brokerStatus(err error) int32 {
	switch {
	case errors.Is(err, broker.ErrNotFound), errors.Is(err, broker.ErrEntityDeleted):
		return statusNotFound
	case errors.Is(err, broker.ErrLockLost), errors.Is(err, broker.ErrSessionLockLost):
		return statusGone
	case errors.Is(err, broker.ErrServerBusy):
		return statusBusy
	case errors.Is(err, broker.ErrNotAllowed), errors.Is(err, broker.ErrInvalidMessage),
		errors.Is(err, broker.ErrAlreadyExists), errors.Is(err, broker.ErrSessionLocked):
		return statusBadRequest
	default:
		return statusInternal
	}
}
