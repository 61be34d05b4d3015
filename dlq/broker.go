package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Broker is what the ingester needs from Service Bus. Package servicebus
// implements it over the Azure SDK; tests may fake it.
type Broker interface {
	// Entities lists every queue, topic and subscription with its runtime
	// counts, with as few requests as the API allows (list calls, never one
	// request per entity).
	Entities(ctx context.Context) ([]Entity, error)
	// Settings lists every queue, topic and subscription with its settings.
	Settings(ctx context.Context) ([]Settings, error)
	// Peek returns up to max messages of the entity's subqueue with sequence
	// numbers >= from, in ascending order, without locking them. An empty
	// result means there are none; fewer than max does not.
	Peek(ctx context.Context, entity string, q SubQueue, from int64, max int) ([]Message, error)
}

// The errors a Broker reports, wrapped with details. They are what the
// ingester (and later the replay engine) decides on.
var (
	// ErrUnauthorized: the credentials were refused or lack the Manage or
	// Listen right needed.
	ErrUnauthorized = errors.New("Service Bus refused the credentials")
	// ErrEntityNotFound: the queue, topic or subscription does not exist
	// (any more).
	ErrEntityNotFound = errors.New("entity not found")
	// ErrUnreachable: the namespace could not be reached (DNS, connection
	// refused or lost, TLS, timeout).
	ErrUnreachable = errors.New("Service Bus unreachable")
	// ErrThrottled: the namespace is busy or throttling this client; retry
	// later, no sooner than ThrottledError.RetryAfter when given.
	ErrThrottled = errors.New("Service Bus is throttling requests")
	// ErrLockLost: a received message's lock expired (or its link closed)
	// before it was settled; the message is back in its queue.
	ErrLockLost = errors.New("the message's lock was lost")
	// ErrEntityDisabled: the entity's status forbids the operation
	// (Disabled; SendDisabled for a send, ReceiveDisabled for a receive).
	// It lasts until someone changes the status: retrying does not help.
	ErrEntityDisabled = errors.New("entity disabled")
	// ErrQuotaExceeded: the entity is full (its maximum size is reached)
	// or another quota of the namespace is exceeded. It lasts until
	// consumers make room or the quota is raised.
	ErrQuotaExceeded = errors.New("Service Bus quota exceeded")
)

// ThrottledError carries the delay a throttled broker asked for, if any.
// It matches ErrThrottled with errors.Is.
type ThrottledError struct {
	RetryAfter time.Duration // zero when the broker named none
	Err        error
}

func (e *ThrottledError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%v (retry after %s): %v", ErrThrottled, e.RetryAfter, e.Err)
	}
	return fmt.Sprintf("%v: %v", ErrThrottled, e.Err)
}

func (e *ThrottledError) Unwrap() []error { return []error{ErrThrottled, e.Err} }
