package amqpserver

import (
	"errors"
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

const (
	opPeek              = "com.microsoft:peek-message"
	opReceiveBySeq      = "com.microsoft:receive-by-sequence-number"
	opRenewLock         = "com.microsoft:renew-lock"
	opUpdateDisposition = "com.microsoft:update-disposition"
	opSchedule          = "com.microsoft:schedule-message"
	opCancelScheduled   = "com.microsoft:cancel-scheduled-message"
	opRenewSessionLock  = "com.microsoft:renew-session-lock"
	opGetSessionState   = "com.microsoft:get-session-state"
	opSetSessionState   = "com.microsoft:set-session-state"
	opGetMessageSession = "com.microsoft:get-message-sessions"

	maxPeekCount = 5000
)

// listSessionsDefaultModeMillis is 10000-01-01T00:00:00Z, the SDK's marker for
// "sessions with messages or state" in get-message-sessions.
const listSessionsDefaultModeMillis = 253402300800000

// mgmtError carries a status code out of an operation handler.
type mgmtError struct {
	code int32
	msg  string
}

func (e *mgmtError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &mgmtError{code: statusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// handleMgmt runs one $management operation against the entity at path and returns
// the reply (status codes per docs/servicebus-protocol.md §9 and §11).
func (s *Server) handleMgmt(path string, req *goamqp.Message) *goamqp.Message {
	op, _ := req.ApplicationProperties["operation"].(string)
	body, _ := req.Value.(map[string]any)
	if body == nil {
		if m, ok := req.Value.(map[any]any); ok {
			body = make(map[string]any, len(m))
			for k, v := range m {
				if ks, ok := k.(string); ok {
					body[ks] = v
				}
			}
		}
	}
	var (
		value any
		code  = statusOK
		err   error
	)
	s.ns.CountManagement(path, op)
	switch op {
	case opPeek:
		s.ns.CountOp(broker.OpPeek, path, 1)
		value, code, err = s.mgmtPeek(path, body)
	case opReceiveBySeq:
		value, err = s.mgmtReceiveBySeq(path, body)
	case opRenewLock:
		value, err = s.mgmtRenewLock(body)
	case opUpdateDisposition:
		err = s.mgmtUpdateDisposition(path, body)
	case opSchedule:
		value, err = s.mgmtSchedule(path, body)
	case opCancelScheduled:
		var seqs []int64
		if seqs, err = int64List(body["sequence-numbers"]); err == nil {
			err = s.ns.CancelScheduled(path, seqs)
		}
	case opRenewSessionLock:
		id, _ := body["session-id"].(string)
		var until time.Time
		if until, err = s.ns.RenewSessionLock(path, id); err == nil {
			value = map[string]any{"expiration": until.UTC()}
		}
	case opGetSessionState:
		id, _ := body["session-id"].(string)
		var st []byte
		if st, err = s.ns.SessionState(path, id); err == nil {
			if len(st) == 0 {
				value = map[string]any{"session-state": nil}
			} else {
				value = map[string]any{"session-state": st}
			}
		}
	case opSetSessionState:
		id, _ := body["session-id"].(string)
		st, _ := body["session-state"].([]byte)
		err = s.ns.SetSessionState(path, id, st)
	case opGetMessageSession:
		value, code, err = s.mgmtListSessions(path, body)
	default:
		return rpcResponse(statusNotImpl, fmt.Sprintf("operation %q is not implemented by the emulator", op), nil)
	}
	if err != nil {
		var me *mgmtError
		if errors.As(err, &me) {
			return rpcResponse(me.code, me.msg, nil)
		}
		s.log.Debug("emulator: management operation failed", "operation", op, "entity", path, "error", err)
		return rpcResponse(brokerStatus(err), brokerDescription(err), nil)
	}
	desc := "OK"
	if code == statusNoContent {
		desc = "No content"
	}
	return rpcResponse(code, desc, value)
}

func (s *Server) mgmtPeek(path string, body map[string]any) (any, int32, error) {
	from, ok := toInt64(body["from-sequence-number"])
	if !ok {
		return nil, 0, badRequest("peek-message needs from-sequence-number")
	}
	count, ok := toInt64(body["message-count"])
	if !ok || count <= 0 {
		return nil, 0, badRequest("peek-message needs a positive message-count")
	}
	if count > maxPeekCount {
		count = maxPeekCount
	}
	var ds []broker.Delivery
	if sid, ok := body["session-id"].(string); ok && sid != "" {
		// Session peek: only that session's messages, read on past other sessions' until
		// count are found or the entity ends. Filtering one page after reading it could
		// answer 204 while the session has more messages further on, and the client
		// would stop paging.
		for {
			page, err := s.ns.Peek(path, from, maxPeekCount)
			if err != nil {
				return nil, 0, err
			}
			for _, d := range page {
				if d.Message.Properties != nil && d.Message.Properties.GroupID != nil && *d.Message.Properties.GroupID == sid {
					ds = append(ds, d)
					if len(ds) == int(count) {
						break
					}
				}
			}
			if len(ds) == int(count) || len(page) < maxPeekCount {
				break
			}
			from = page[len(page)-1].SequenceNumber + 1
		}
	} else {
		var err error
		if ds, err = s.ns.Peek(path, from, int(count)); err != nil {
			return nil, 0, err
		}
	}
	if len(ds) == 0 {
		return nil, statusNoContent, nil
	}
	s.ns.CountOp(broker.OpPeekedMessages, path, int64(len(ds)))
	msgs, err := encodeDeliveries(ds, false)
	if err != nil {
		return nil, 0, err
	}
	return map[string]any{"messages": msgs}, statusOK, nil
}

// encodeDeliveries builds the "messages" list: an AMQP list (the SDK asserts []any) of
// maps holding each encoded message, plus its lock token when withLock.
func encodeDeliveries(ds []broker.Delivery, withLock bool) ([]any, error) {
	out := make([]any, 0, len(ds))
	for _, d := range ds {
		b, err := encodeMessage(d.Message)
		if err != nil {
			return nil, fmt.Errorf("encode message %d: %w", d.SequenceNumber, err)
		}
		m := map[string]any{"message": b}
		if withLock {
			m["lock-token"] = d.LockToken
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *Server) mgmtReceiveBySeq(path string, body map[string]any) (any, error) {
	seqs, err := int64List(body["sequence-numbers"])
	if err != nil {
		return nil, err
	}
	mode := broker.PeekLock
	if v, ok := toInt64(body["receiver-settle-mode"]); ok && v == 0 {
		mode = broker.ReceiveAndDelete
	}
	ds, err := s.ns.ReceiveDeferred(path, seqs, mode)
	if err != nil {
		// Never 204 here: the SDK would treat it as a connection failure.
		return nil, err
	}
	s.ns.CountOp(broker.OpReceive, path, int64(len(ds)))
	msgs, err := encodeDeliveries(ds, mode == broker.PeekLock)
	if err != nil {
		return nil, err
	}
	return map[string]any{"messages": msgs}, nil
}

func (s *Server) mgmtRenewLock(body map[string]any) (any, error) {
	tokens, err := uuidList(body["lock-tokens"])
	if err != nil {
		return nil, err
	}
	exp := make([]time.Time, 0, len(tokens))
	for _, t := range tokens {
		until, err := s.ns.RenewLock(t)
		if err != nil {
			return nil, err
		}
		exp = append(exp, until.UTC())
	}
	// Must be an AMQP array of timestamps: the SDK asserts []time.Time.
	return map[string]any{"expirations": exp}, nil
}

func (s *Server) mgmtUpdateDisposition(path string, body map[string]any) error {
	status, _ := body["disposition-status"].(string)
	tokens, err := uuidList(body["lock-tokens"])
	if err != nil {
		return err
	}
	props, _ := body["properties-to-modify"].(map[string]any)
	if props == nil {
		if m, ok := body["properties-to-modify"].(map[any]any); ok {
			props = make(map[string]any, len(m))
			for k, v := range m {
				if ks, ok := k.(string); ok {
					props[ks] = v
				}
			}
		}
	}
	reason, _ := body["deadletter-reason"].(string)
	desc, _ := body["deadletter-description"].(string)
	for _, t := range tokens {
		switch status {
		case "completed":
			err = s.ns.Complete(t)
		case "abandoned":
			err = s.ns.Abandon(t, props)
		case "defered", "deferred":
			err = s.ns.Defer(t, props)
		case "suspended":
			err = s.ns.DeadLetter(t, reason, desc, props)
		default:
			return badRequest("unknown disposition-status %q", status)
		}
		if err != nil {
			return err
		}
		s.ns.CountOp(broker.OpSettle, path, 1)
	}
	return nil
}

func (s *Server) mgmtSchedule(path string, body map[string]any) (any, error) {
	list, ok := body["messages"].([]any)
	if !ok {
		return nil, badRequest("schedule-message needs a list of messages")
	}
	msgs := make([]*goamqp.Message, 0, len(list))
	for i, item := range list {
		entry, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest("schedule-message entry %d is %T, not a map", i, item)
		}
		raw, ok := entry["message"].([]byte)
		if !ok {
			return nil, badRequest("schedule-message entry %d has no binary message", i)
		}
		m := new(goamqp.Message)
		if err := m.UnmarshalBinary(raw); err != nil {
			return nil, badRequest("schedule-message entry %d: %v", i, err)
		}
		msgs = append(msgs, m)
	}
	seqs, err := s.ns.Schedule(path, msgs)
	if err != nil {
		return nil, err
	}
	s.ns.CountOp(broker.OpSend, path, int64(len(seqs)))
	// Must be an AMQP array of longs: the SDK asserts []int64.
	return map[string]any{"sequence-numbers": seqs}, nil
}

func (s *Server) mgmtListSessions(path string, body map[string]any) (any, int32, error) {
	updated, _ := body["last-updated-time"].(time.Time)
	if updated.UnixMilli() >= listSessionsDefaultModeMillis {
		updated = time.Time{}
	}
	skip, _ := toInt64(body["skip"])
	top, ok := toInt64(body["top"])
	if !ok || top <= 0 {
		top = 100
	}
	ids, err := s.ns.ListSessions(path, updated, int(skip), int(top))
	if err != nil {
		return nil, 0, err
	}
	if len(ids) == 0 {
		return nil, statusNoContent, nil
	}
	return map[string]any{"skip": int32(skip) + int32(len(ids)), "sessions-ids": ids}, statusOK, nil
}

func int64List(v any) ([]int64, error) {
	switch x := v.(type) {
	case []int64:
		return x, nil
	case []any:
		out := make([]int64, 0, len(x))
		for _, e := range x {
			n, ok := toInt64(e)
			if !ok {
				return nil, badRequest("sequence number %v is not an integer", e)
			}
			out = append(out, n)
		}
		return out, nil
	default:
		if n, ok := toInt64(v); ok {
			return []int64{n}, nil
		}
		return nil, badRequest("expected sequence-numbers as an array of long, got %T", v)
	}
}

func uuidList(v any) ([]goamqp.UUID, error) {
	switch x := v.(type) {
	case []goamqp.UUID:
		return x, nil
	case goamqp.UUID:
		return []goamqp.UUID{x}, nil
	case []any:
		out := make([]goamqp.UUID, 0, len(x))
		for _, e := range x {
			u, ok := e.(goamqp.UUID)
			if !ok {
				return nil, badRequest("lock token %v is not a uuid", e)
			}
			out = append(out, u)
		}
		return out, nil
	default:
		return nil, badRequest("expected lock-tokens as an array of uuid, got %T", v)
	}
}
