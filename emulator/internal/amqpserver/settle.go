package amqpserver

import (
	"fmt"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

const (
	appPropDeadLetterReason      = "DeadLetterReason"
	appPropDeadLetterDescription = "DeadLetterErrorDescription"
)

// settle applies a client disposition outcome to the lock of a delivery made on the
// link to path and returns the state to echo. A successful dead-letter is answered with
// rejected{} WITHOUT an error: echoing the client's error makes go-amqp report it, and
// the SDK would reconnect and retry. Completes, abandons, defers and dead-letters count
// as settlements in the statistics; releases do not (the SDK releases what arrives after
// a receive call returned).
func settle(ns *broker.Namespace, path string, token goamqp.UUID, state amqp.DeliveryState) amqp.DeliveryState {
	var err error
	var ok amqp.DeliveryState
	counted := true
	switch st := state.(type) {
	case *amqp.Accepted:
		err, ok = ns.Complete(token), &amqp.Accepted{}
	case *amqp.Released:
		err, ok = ns.Release(token), &amqp.Released{}
		counted = false
	case *amqp.Modified:
		props := symbolMapToStrings(st.MessageAnnotations)
		if st.UndeliverableHere {
			err = ns.Defer(token, props)
		} else {
			err = ns.Abandon(token, props)
		}
		ok = &amqp.Modified{DeliveryFailed: st.DeliveryFailed, UndeliverableHere: st.UndeliverableHere}
	case *amqp.Rejected:
		reason, desc, props := deadLetterInfo(st.Error)
		err, ok = ns.DeadLetter(token, reason, desc, props), &amqp.Rejected{}
	case nil:
		// A settled disposition without an outcome: treat as release (AMQP default outcome
		// for the SDK's links is irrelevant here; releasing keeps the message available).
		err, ok = ns.Release(token), &amqp.Released{}
		counted = false
	default:
		return &amqp.Rejected{Error: &amqp.Error{Condition: condNotImplemented, Description: fmt.Sprintf("unsupported outcome %T", state)}}
	}
	if err != nil {
		return &amqp.Rejected{Error: brokerError(err)}
	}
	if counted {
		ns.CountOp(broker.OpSettle, path, 1)
	}
	return ok
}

// deadLetterInfo splits the SDK's rejected error info into reason, description and the
// remaining properties to modify.
func deadLetterInfo(e *amqp.Error) (reason, desc string, props map[string]any) {
	if e == nil {
		return "", "", nil
	}
	for k, v := range e.Info {
		switch string(k) {
		case appPropDeadLetterReason:
			reason, _ = v.(string)
		case appPropDeadLetterDescription:
			desc, _ = v.(string)
		default:
			if props == nil {
				props = map[string]any{}
			}
			props[string(k)] = toGoAMQPValue(v)
		}
	}
	return reason, desc, props
}

func symbolMapToStrings(m map[amqp.Symbol]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[string(k)] = toGoAMQPValue(v)
	}
	return out
}

// toGoAMQPValue converts a value decoded by our codec into the equivalent go-amqp value,
// so the broker can store it in a goamqp.Message and MarshalBinary encodes it unchanged.
func toGoAMQPValue(v any) any {
	switch x := v.(type) {
	case amqp.Symbol:
		return goamqp.Symbol(x)
	case amqp.UUID:
		return goamqp.UUID(x)
	case amqp.Char:
		return rune(x)
	case amqp.Array:
		out := make([]any, len(x))
		for i := range x {
			out[i] = toGoAMQPValue(x[i])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = toGoAMQPValue(x[i])
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(x))
		for k, val := range x {
			out[toGoAMQPValue(k)] = toGoAMQPValue(val)
		}
		return out
	case *amqp.Described:
		return toGoAMQPValue(x.Value)
	default:
		return v
	}
}
