package amqpserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

type linkKind int

const (
	linkData linkKind = iota
	linkCBS
	linkMgmt
)

const (
	cbsAddress       = "$cbs"
	mgmtSuffix       = "/$management"
	sessionFilterKey = amqp.Symbol("com.microsoft:session-filter")
	// sessionFilterCode is the descriptor of the Service Bus session filter.
	sessionFilterCode    = uint64(0x00000137000000C)
	propTimeout          = "com.microsoft:timeout"
	propLockedUntilUTC   = "com.microsoft:locked-until-utc"
	propMaxBatchSize     = "com.microsoft:max-message-batch-size"
	batchMessageFormat   = uint32(0x80013700)
	senderCreditGrant    = 5000
	senderCreditLow      = 2500
	transferOverhead     = 128 // bytes reserved for the transfer performative in each frame
	defaultAcceptTimeout = 60 * time.Second
	// dotnetEpochTicks is 1970-01-01 in .NET ticks (100 ns since 0001-01-01).
	dotnetEpochTicks = 621355968000000000
)

// link is one attached link. The client's handle keys it; the emulator answers with
// the same handle number (handle spaces are per direction). Guarded by conn.mu except
// where noted.
type link struct {
	s            *session
	name         string
	handle       uint32
	clientSender bool // the client sends (we receive)
	kind         linkKind
	path         string // broker path: data entity, or the entity behind $management
	sourceAddr   string
	targetAddr   string
	refused      bool // attach refused; waiting for the client's detach ack
	detached     bool

	deliveryCount uint32
	credit        uint32

	// inbound delivery being reassembled (client senders)
	inProgress bool
	inID       uint32
	inSettled  bool
	inFormat   uint32
	inBuf      []byte
	inTooBig   bool
	inSize     uint64
	inTooBigAt uint64 // inSize when it first passed the limit

	// outbound (client receivers)
	consumer *broker.Consumer
	mode     broker.ReceiveMode
	drain    bool
	wake     chan struct{} // cap 1: credit, window or drain changed
	stop     chan struct{} // closed when the link is detached
	cancel   context.CancelFunc

	// plainSessionFilter: the client sent its session filter as a plain value
	// rather than a described one, and gets the reply in the same form.
	plainSessionFilter bool
}

func (l *link) wakeUp() {
	if l.wake == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// markDetachedLocked flags the link as gone and stops its goroutines. Caller holds c.mu.
func (l *link) markDetachedLocked() {
	if l.detached {
		return
	}
	l.detached = true
	if l.stop != nil {
		close(l.stop)
	}
	if l.cancel != nil {
		l.cancel()
	}
}

// release frees broker resources of a detached link (outside c.mu). Closing the
// consumer releases its session lock; message locks survive.
func (l *link) release() {
	if l.consumer != nil {
		l.consumer.Close()
	}
}

// sendFlowLocked sends this link's flow state. Caller holds c.mu.
func (l *link) sendFlowLocked(drain bool) {
	h, dc, cr := l.handle, l.deliveryCount, l.credit
	f := &amqp.Flow{Handle: &h, DeliveryCount: &dc, LinkCredit: &cr, Drain: drain}
	l.s.fillSessionFlow(f)
	l.s.c.send(l.s.ch, f)
}

// handleAttach answers a client attach: registers the link, checks the entity, and
// for client senders grants credit right away.
func (s *session) handleAttach(a *amqp.Attach) error {
	c := s.c
	c.mu.Lock()
	if _, dup := s.links[a.Handle]; dup {
		c.mu.Unlock()
		return protoErr(condHandleInUse, "attach on handle %d which is in use", a.Handle)
	}
	l := &link{s: s, name: a.Name, handle: a.Handle, clientSender: a.Role == amqp.RoleSender}
	if a.Source != nil {
		l.sourceAddr = a.Source.Address
	}
	if a.Target != nil {
		l.targetAddr = a.Target.Address
	}
	s.links[a.Handle] = l
	c.mu.Unlock()

	if l.clientSender {
		return s.attachClientSender(l, a)
	}
	return s.attachClientReceiver(l, a)
}

// attachReply builds the echo every attach reply needs (name, opposite role, settle
// modes verbatim: go-amqp compares them).
func attachReply(l *link, a *amqp.Attach) *amqp.Attach {
	role := amqp.RoleReceiver
	if !l.clientSender {
		role = amqp.RoleSender
	}
	return &amqp.Attach{
		Name:          a.Name,
		Handle:        l.handle,
		Role:          role,
		SndSettleMode: a.SndSettleMode,
		RcvSettleMode: a.RcvSettleMode,
		Source:        a.Source,
		Target:        a.Target,
	}
}

// refuseLocked replies with a null terminus followed by detach{error}. Caller holds c.mu.
func (s *session) refuseLocked(l *link, a *amqp.Attach, e *amqp.Error) {
	r := attachReply(l, a)
	if l.clientSender {
		r.Target = nil
	} else {
		r.Source = nil
	}
	l.refused = true
	s.c.send(s.ch, r)
	s.c.send(s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: e})
	s.c.log.Debug("emulator: attach refused", "link", l.name, "condition", string(e.Condition), "error", e.Description)
}

func (s *session) refuse(l *link, a *amqp.Attach, e *amqp.Error) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if !l.detached && !s.ended {
		s.refuseLocked(l, a, e)
	}
	return nil
}

func isMgmtAddress(addr string) bool {
	return len(addr) >= len(mgmtSuffix) && strings.EqualFold(addr[len(addr)-len(mgmtSuffix):], mgmtSuffix)
}

// nodeAddress is the node a link address names, without the namespace: the Go, .NET
// and JavaScript SDKs send the bare path (q1, q1/$management, $cbs), the Python SDK a
// URI (amqps://<namespace>/q1, sb://<namespace>/q1/$management), and Azure takes both.
func nodeAddress(addr string) string {
	i := strings.Index(addr, "://")
	if i < 0 {
		return addr
	}
	rest := addr[i+3:]
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		return ""
	}
	return strings.TrimSuffix(rest[j+1:], "/")
}

// linkMaxMessageSize is the max-message-size of an attach reply: the namespace's
// message size where the client sends messages to an entity, 2^64-1 everywhere
// else: $cbs and $management links, and links the client receives on (the Python
// SDK reads the field and the Java SDK treats an absent one as zero). A receive
// link must not carry the send limit: go-amqp applies the peer's value to what it
// receives, and a delivery is larger than the message that was sent (the broker
// adds its annotations and header), so a message sent near the limit could never
// be received.
func (c *conn) linkMaxMessageSize(l *link, clientSends bool) uint64 {
	if l.kind == linkData && clientSends {
		return c.s.opts.MaxMessageSize
	}
	return math.MaxUint64
}

// cbsInUseLocked reports whether the connection already has an attached $cbs link in
// the same direction as l. Azure allows one $cbs sender and one $cbs receiver per
// connection and refuses another with amqp:not-allowed; the Go SDK relies on that to
// notice a $cbs link it failed to close, and resets the connection. Caller holds c.mu.
func (c *conn) cbsInUseLocked(l *link) bool {
	for _, s := range c.sessions {
		for _, o := range s.links {
			if o != l && o.kind == linkCBS && o.clientSender == l.clientSender && !o.detached && !o.refused {
				return true
			}
		}
	}
	return false
}

// attachCBS accepts l as the connection's $cbs link in its direction, or refuses it.
func (s *session) attachCBS(l *link, a *amqp.Attach) (refused bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l.kind = linkCBS
	if !c.cbsInUseLocked(l) {
		return false
	}
	if !l.detached && !s.ended {
		s.refuseLocked(l, a, &amqp.Error{Condition: condNotAllowed,
			Description: "a $cbs link in this direction is already open on the connection; only one $cbs sender and one $cbs receiver are allowed per connection"})
	}
	return true
}

func (s *session) attachClientSender(l *link, a *amqp.Attach) error {
	c := s.c
	ns := c.s.ns
	node := nodeAddress(l.targetAddr)
	switch {
	case l.targetAddr == "" && a.Target == nil:
		return s.refuse(l, a, &amqp.Error{Condition: condNotAllowed, Description: "attach without a target"})
	case strings.EqualFold(node, cbsAddress):
		if s.attachCBS(l, a) {
			return nil
		}
	case isMgmtAddress(node):
		l.kind = linkMgmt
		l.path = node[:len(node)-len(mgmtSuffix)]
		if _, err := ns.Resolve(l.path); err != nil {
			return s.refuse(l, a, brokerError(err))
		}
	default:
		l.kind = linkData
		l.path = node
		addr, err := ns.Resolve(l.path)
		if err != nil {
			return s.refuse(l, a, brokerError(err))
		}
		if addr.Kind == broker.KindSubscription || addr.SubQueue != broker.SubQueueMain {
			return s.refuse(l, a, &amqp.Error{Condition: condNotAllowed, Description: fmt.Sprintf("cannot send to %q: only queues and topics accept messages", l.path)})
		}
		if e := c.checkRight(l.path, rightSend); e != nil {
			return s.refuse(l, a, e)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.detached || s.ended {
		return nil
	}
	r := attachReply(l, a)
	if r.Target == nil {
		r.Target = &amqp.Target{Address: l.targetAddr}
	}
	// Must be > 0: the SDK uses it as the batch byte limit.
	r.MaxMessageSize = c.linkMaxMessageSize(l, true)
	if l.kind == linkData {
		r.Properties = map[amqp.Symbol]any{propMaxBatchSize: c.s.opts.MaxMessageSize}
	}
	c.send(s.ch, r)
	l.deliveryCount = a.InitialDeliveryCount
	l.credit = senderCreditGrant
	// link-credit must be present in every flow to a client sender (go-amqp dereferences it).
	l.sendFlowLocked(false)
	return nil
}

func (s *session) attachClientReceiver(l *link, a *amqp.Attach) error {
	c := s.c
	ns := c.s.ns
	l.wake = make(chan struct{}, 1)
	l.stop = make(chan struct{})
	node := nodeAddress(l.sourceAddr)
	switch {
	case a.Source == nil:
		return s.refuse(l, a, &amqp.Error{Condition: condNotAllowed, Description: "attach without a source"})
	case strings.EqualFold(node, cbsAddress):
		if s.attachCBS(l, a) {
			return nil
		}
		return s.acceptReceiver(l, a, nil)
	case isMgmtAddress(node):
		l.kind = linkMgmt
		l.path = node[:len(node)-len(mgmtSuffix)]
		if _, err := ns.Resolve(l.path); err != nil {
			return s.refuse(l, a, brokerError(err))
		}
		return s.acceptReceiver(l, a, nil)
	}
	l.kind = linkData
	l.path = node
	if _, err := ns.Resolve(l.path); err != nil {
		return s.refuse(l, a, brokerError(err))
	}
	if e := c.checkRight(l.path, rightListen); e != nil {
		return s.refuse(l, a, e)
	}
	l.mode = broker.PeekLock
	if a.SndSettleMode != nil && *a.SndSettleMode == amqp.SenderSettleModeSettled {
		l.mode = broker.ReceiveAndDelete
	}
	opts := broker.ConsumerOptions{Mode: l.mode}
	if v, ok := a.Source.Filter[sessionFilterKey]; ok {
		id, exact, plain, err := sessionFilterValue(v)
		if err != nil {
			return s.refuse(l, a, &amqp.Error{Condition: condNotAllowed, Description: err.Error()})
		}
		opts.Session = true
		opts.SessionID = id
		opts.ExactSession = exact
		l.plainSessionFilter = plain
	}
	if !opts.Session {
		cons, err := ns.NewConsumer(c.ctx, l.path, opts)
		if err != nil {
			return s.refuse(l, a, brokerError(err))
		}
		return s.acceptReceiver(l, a, cons)
	}
	// Accepting a session may wait for one to become free: do it off the reader goroutine.
	timeout := defaultAcceptTimeout
	if ms, ok := toInt64(a.Properties[propTimeout]); ok && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
		// The SDK sends its caller's remaining context time minus at most 1 % jitter
		// (≤ 100 ms). Timing out exactly then makes the refusal race the caller's own
		// deadline, which then sees context.DeadlineExceeded instead of CodeTimeout.
		// Answer a fifth early, at most 1 s, so the refusal wins on any loaded machine.
		timeout -= min(timeout/5, time.Second)
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	c.mu.Lock()
	if l.detached || s.ended {
		c.mu.Unlock()
		cancel()
		return nil
	}
	l.cancel = cancel
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("emulator: panic accepting session", "panic", r)
				c.shutdownWith(&amqp.Error{Condition: condInternalError, Description: "internal error"})
			}
		}()
		cons, err := ns.NewConsumer(ctx, l.path, opts)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				err = fmt.Errorf("no session available within %s: %w", timeout, broker.ErrNoSession)
			}
			_ = s.refuse(l, a, brokerError(err))
			return
		}
		_ = s.acceptReceiver(l, a, cons)
	}()
	return nil
}

// sessionFilterValue reads a com.microsoft:session-filter value: the session id and
// exact (a string was given, possibly "", a valid session id), or null for the next
// available session; and whether the client sent it plain. The Go, .NET and Java SDKs
// send a value described by 0x137000000C (null for accept-next); the JavaScript SDK
// sends the bare string (or null).
func sessionFilterValue(v any) (id string, exact, plain bool, err error) {
	plain = true
	if d, ok := v.(*amqp.Described); ok {
		plain = false
		v = d.Value
	}
	switch x := v.(type) {
	case nil:
		return "", false, plain, nil
	case string:
		return x, true, plain, nil
	case amqp.Symbol:
		return string(x), true, plain, nil
	}
	return "", false, plain, fmt.Errorf("session filter value must be a string or null, got %T", v)
}

// acceptReceiver sends the attach reply for a client receiver and starts its deliverer.
func (s *session) acceptReceiver(l *link, a *amqp.Attach, cons *broker.Consumer) error {
	c := s.c
	c.mu.Lock()
	if l.detached || s.ended {
		c.mu.Unlock()
		if cons != nil {
			cons.Close()
		}
		return nil
	}
	r := attachReply(l, a)
	r.InitialDeliveryCount = 0
	r.MaxMessageSize = c.linkMaxMessageSize(l, false)
	if cons != nil && a.Source != nil {
		if _, ok := a.Source.Filter[sessionFilterKey]; ok {
			// The client replaces its filter with ours and requires the locked session id
			// as a string under the same key and descriptor.
			src := *a.Source
			src.Filter = make(map[amqp.Symbol]any, len(a.Source.Filter))
			for k, v := range a.Source.Filter {
				src.Filter[k] = v
			}
			if l.plainSessionFilter {
				// The JavaScript SDK reads the reply's filter as a plain string and
				// compares it with the id it asked for.
				src.Filter[sessionFilterKey] = cons.SessionID()
			} else {
				src.Filter[sessionFilterKey] = &amqp.Described{Descriptor: sessionFilterCode, Value: cons.SessionID()}
			}
			r.Source = &src
			until := cons.SessionLockedUntil()
			r.Properties = map[amqp.Symbol]any{propLockedUntilUTC: int64(dotnetEpochTicks + until.UnixMilli()*10000)}
		}
	}
	l.consumer = cons
	c.send(s.ch, r)
	if cons != nil {
		c.wg.Add(1)
		go l.deliverLoop()
	}
	c.mu.Unlock()
	return nil
}

// handleDetach: always answer closed:true (go-amqp fails a non-closing detach).
func (s *session) handleDetach(d *amqp.Detach) error {
	c := s.c
	c.mu.Lock()
	l := s.links[d.Handle]
	if l == nil {
		c.mu.Unlock()
		return protoErr(condUnattachedHandle, "detach on unattached handle %d", d.Handle)
	}
	delete(s.links, d.Handle)
	reply := !l.refused && !l.detached
	l.markDetachedLocked()
	c.mu.Unlock()
	// Release the broker side (the consumer and its session lock) before answering,
	// so that a client whose detach has completed can accept the same session again
	// at once, and sees the entity as no longer received from.
	l.release()
	if reply {
		c.mu.Lock()
		if !s.ended {
			c.send(s.ch, &amqp.Detach{Handle: l.handle, Closed: true})
		}
		c.mu.Unlock()
	}
	return nil
}

// forceDetach detaches a link from the server side (entity deleted, session lock lost).
func (l *link) forceDetach(e *amqp.Error) {
	c := l.s.c
	c.mu.Lock()
	if l.detached || l.s.ended {
		c.mu.Unlock()
		return
	}
	// Keep the handle registered: the client answers with its own detach.
	l.refused = true
	l.markDetachedLocked()
	c.send(l.s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: e})
	c.mu.Unlock()
	l.release()
}

// handleTransfer reassembles an inbound delivery and processes it once complete.
func (s *session) handleTransfer(t *amqp.Transfer) error {
	c := s.c
	c.mu.Lock()
	l := s.links[t.Handle]
	if l == nil {
		c.mu.Unlock()
		return protoErr(condUnattachedHandle, "transfer on unattached handle %d", t.Handle)
	}
	if !l.clientSender {
		c.mu.Unlock()
		return protoErr(condNotAllowed, "transfer from the receiving end of link %q", l.name)
	}
	s.nextIncomingID++
	s.incomingSinceFlow++
	if s.incomingSinceFlow > sessionIncomingWindow {
		c.mu.Unlock()
		return protoErr(condWindowViolation, "more transfers than the session incoming window allows")
	}
	if s.incomingSinceFlow >= sessionIncomingWindow/2 {
		s.sendSessionFlow()
	}
	if l.refused {
		c.mu.Unlock()
		return nil
	}
	if !l.inProgress {
		if t.DeliveryID == nil {
			c.mu.Unlock()
			return protoErr(condNotAllowed, "first transfer of a delivery without delivery-id")
		}
		l.inProgress = true
		l.inID = *t.DeliveryID
		l.inSettled = t.Settled != nil && *t.Settled
		l.inFormat = 0
		if t.MessageFormat != nil {
			l.inFormat = *t.MessageFormat
		}
		l.inBuf = nil
		l.inSize = 0
		l.inTooBig = false
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
		if l.credit < senderCreditLow {
			l.credit = senderCreditGrant
			l.sendFlowLocked(false)
		}
	}
	if t.Aborted {
		l.inProgress = false
		l.inBuf = nil
		c.mu.Unlock()
		return nil
	}
	l.inSize += uint64(len(t.Payload))
	max := c.s.opts.MaxMessageSize
	if l.kind != linkData {
		max = 4 << 20 // RPC requests (schedule batches) may exceed the message size
	}
	if l.inSize > max {
		if !l.inTooBig {
			l.inTooBigAt = l.inSize
		}
		l.inTooBig = true
		l.inBuf = nil
	} else if l.inBuf != nil {
		l.inBuf = append(l.inBuf, t.Payload...)
	} else {
		// First frame: the frame reader never aliases its buffer, so keep the payload as is.
		l.inBuf = t.Payload
		if t.More {
			l.inBuf = append(make([]byte, 0, 2*len(t.Payload)), t.Payload...)
		}
	}
	if t.More {
		c.mu.Unlock()
		return nil
	}
	l.inProgress = false
	payload, id, settled, format, tooBig, tooBigAt := l.inBuf, l.inID, l.inSettled, l.inFormat, l.inTooBig, l.inTooBigAt
	l.inBuf = nil
	kind := l.kind
	c.mu.Unlock()

	if tooBig {
		// As Azure (Microsoft.Azure.Amqp's receiving link): a delivery whose transfer
		// payloads add up to more than the link's max-message-size is rejected when
		// the frame that crosses it arrives, worded as below (clients match on the
		// text), and the link stays attached. Exactly max-message-size bytes pass.
		s.dispose(id, settled, &amqp.Rejected{Error: &amqp.Error{Condition: condMessageSize,
			Description: fmt.Sprintf("The received message (delivery-id:%d, size:%d bytes) exceeds the limit (%d bytes) currently allowed on the link.", id, tooBigAt, max)}})
		return nil
	}
	switch kind {
	case linkData:
		s.dispose(id, settled, s.enqueue(l, payload, format))
	case linkCBS, linkMgmt:
		var req goamqp.Message
		if err := req.UnmarshalBinary(payload); err != nil {
			s.dispose(id, settled, &amqp.Rejected{Error: &amqp.Error{Condition: condDecodeError, Description: err.Error()}})
			return nil
		}
		// The SDK waits for this disposition before it waits for the reply.
		s.dispose(id, settled, &amqp.Accepted{})
		var resp *goamqp.Message
		if kind == linkCBS {
			resp = c.handleCBS(&req)
		} else {
			resp = c.s.handleMgmt(l.path, &req)
		}
		s.reply(l, &req, resp)
	}
	return nil
}

// dispose answers an inbound unsettled delivery with a settled disposition.
func (s *session) dispose(id uint32, settled bool, state amqp.DeliveryState) {
	if settled {
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return
	}
	c.send(s.ch, &amqp.Disposition{Role: amqp.RoleReceiver, First: id, Settled: true, State: state})
}

// enqueue decodes a data-link delivery (a batch carries one whole message per data
// section) and hands the messages to the broker.
func (s *session) enqueue(l *link, payload []byte, format uint32) amqp.DeliveryState {
	ns := s.c.s.ns
	var msgs []*goamqp.Message
	env := new(goamqp.Message)
	if err := env.UnmarshalBinary(payload); err != nil {
		return &amqp.Rejected{Error: &amqp.Error{Condition: condDecodeError, Description: "cannot decode message: " + err.Error()}}
	}
	if format == batchMessageFormat {
		msgs = make([]*goamqp.Message, 0, len(env.Data))
		for i, d := range env.Data {
			m := new(goamqp.Message)
			if err := m.UnmarshalBinary(d); err != nil {
				return &amqp.Rejected{Error: &amqp.Error{Condition: condDecodeError, Description: fmt.Sprintf("cannot decode message %d of the batch: %v", i, err)}}
			}
			msgs = append(msgs, m)
		}
	} else {
		msgs = []*goamqp.Message{env}
	}
	for i, m := range msgs {
		if err := ns.Send(l.path, m); err != nil {
			ns.CountOp(broker.OpSend, l.path, int64(i)) // the batch's earlier messages stay
			return &amqp.Rejected{Error: brokerError(err)}
		}
	}
	ns.CountOp(broker.OpSend, l.path, int64(len(msgs)))
	return &amqp.Accepted{}
}

// reply routes an RPC response to the client receiver whose target address (or link
// name, or source address) equals the request's reply-to, preferring this session. A
// request without reply-to (uamqp, the Python SDK's AMQP stack up to 7.8, sends $cbs
// and $management requests without one) is answered as Azure does, on the client's
// receiver from the same node: the link attached with the request link's target as
// its source.
func (s *session) reply(from *link, req, resp *goamqp.Message) {
	if resp == nil {
		return
	}
	replyTo := ""
	if req.Properties != nil {
		if req.Properties.ReplyTo != nil {
			replyTo = *req.Properties.ReplyTo
		}
		if resp.Properties == nil {
			resp.Properties = &goamqp.MessageProperties{}
		}
		resp.Properties.CorrelationID = req.Properties.MessageID
	}
	payload, err := resp.MarshalBinary()
	if err != nil {
		s.c.log.Error("emulator: encode rpc reply", "error", err)
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	find := func(s *session) *link { return s.findReplyLink(replyTo) }
	if replyTo == "" {
		find = func(s *session) *link { return s.findNodeReceiver(from) }
	}
	l := find(s)
	if l == nil {
		for _, other := range c.sessions {
			if other != s {
				if l = find(other); l != nil {
					break
				}
			}
		}
	}
	if l == nil {
		c.log.Debug("emulator: no link for rpc reply", "reply_to", replyTo)
		return
	}
	l.transferLocked(payload, nil, true)
}

// findNodeReceiver is the client receiver attached from the node the request link
// sends to ($cbs, or the same entity's $management). Caller holds c.mu.
func (s *session) findNodeReceiver(from *link) *link {
	for _, l := range s.links {
		if l.clientSender || l.detached || l.refused || l.kind != from.kind || l.path != from.path {
			continue
		}
		return l
	}
	return nil
}

// findReplyLink: caller holds c.mu.
func (s *session) findReplyLink(replyTo string) *link {
	var byName, bySource *link
	for _, l := range s.links {
		if l.clientSender || l.detached || l.refused || l.kind == linkData {
			continue
		}
		switch {
		case l.targetAddr != "" && l.targetAddr == replyTo:
			return l
		case l.name == replyTo:
			byName = l
		case l.sourceAddr == replyTo:
			bySource = l
		}
	}
	if byName != nil {
		return byName
	}
	return bySource
}

// transferLocked sends one delivery on a link, split into frames that fit the peer's
// max-frame-size. Caller holds c.mu. Returns the delivery id.
func (l *link) transferLocked(payload []byte, tag []byte, settled bool) uint32 {
	s := l.s
	c := s.c
	id := s.nextDeliveryID
	s.nextDeliveryID++
	if tag == nil {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], id)
		tag = b[:]
	}
	chunk := int(c.framesChunk())
	format := uint32(0)
	for first := true; first || len(payload) > 0; first = false {
		n := len(payload)
		if n > chunk {
			n = chunk
		}
		t := &amqp.Transfer{Handle: l.handle, More: n < len(payload), Payload: payload[:n]}
		if first {
			did, st := id, settled
			t.DeliveryID, t.DeliveryTag, t.MessageFormat, t.Settled = &did, tag, &format, &st
		}
		payload = payload[n:]
		c.send(s.ch, t)
		s.nextOutgoingID++
		s.remoteIncomingWindow--
	}
	l.deliveryCount++
	if l.credit > 0 {
		l.credit--
	}
	return id
}

// staged is a broker delivery taken for a link and encoded, waiting for credit and
// session window to send it.
type staged struct {
	d       broker.Delivery
	payload []byte
	frames  int64
}

// framesChunk is the payload size of one outgoing transfer frame. Caller holds c.mu.
func (c *conn) framesChunk() int64 {
	if c.peerMaxFrame > 1<<24 {
		return 1<<24 - transferOverhead
	}
	return int64(c.peerMaxFrame) - transferOverhead
}

// framesFor is how many transfer frames transferLocked splits a payload into. Caller
// holds c.mu.
func (c *conn) framesFor(n int) int64 {
	chunk := c.framesChunk()
	if n == 0 {
		return 1
	}
	return (int64(n) + chunk - 1) / chunk
}

// windowFits reports whether a delivery of the given number of transfer frames may be
// sent now. Every frame of a multi-frame delivery consumes one unit of the client's
// incoming window, so the whole delivery must fit; only a delivery larger than the
// window the client advertises at all is sent once that window is fully open (it could
// never be sent otherwise). Caller holds c.mu.
func (s *session) windowFits(frames int64) bool {
	w := s.remoteIncomingWindow
	return w >= frames || (w > 0 && w >= int64(s.remoteWindowAdvertised))
}

// deliverLoop feeds a client receiver from its broker consumer while it has credit and
// the session window is open.
//
// A message is taken from the broker only when the link has credit and the window is
// open, but the client may withdraw credit (flow with link-credit 0) while it is being
// encoded, and a multi-frame delivery may not fit the rest of the window. The taken
// message is therefore staged on the link and sent as soon as credit and window allow,
// never dropped: in receive-and-delete mode the broker has already removed it. A staged
// peek-lock message is released (no delivery count) when the credit is withdrawn or the
// link detaches; only a detach loses a staged receive-and-delete message.
func (l *link) deliverLoop() {
	c := l.s.c
	defer c.wg.Done()
	var pending *staged
	defer func() {
		if pending != nil && l.mode == broker.PeekLock {
			_ = c.s.ns.Release(pending.d.LockToken)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("emulator: panic in deliverer", "panic", r)
			c.shutdownWith(&amqp.Error{Condition: condInternalError, Description: "internal error"})
		}
	}()
	cons := l.consumer
	for {
		c.mu.Lock()
		if l.detached {
			c.mu.Unlock()
			return
		}
		if pending != nil && l.credit > 0 && l.s.windowFits(pending.frames) {
			l.sendStagedLocked(pending)
			pending = nil
		}
		var unlock *staged
		if pending != nil && l.credit == 0 && l.mode == broker.PeekLock {
			// Credit withdrawn: hand a locked message back (no delivery count) rather than
			// keep it locked for a client that may never ask again.
			unlock, pending = pending, nil
		}
		ready := pending == nil && l.credit > 0 && l.s.remoteIncomingWindow > 0
		drain := l.drain
		c.mu.Unlock()
		if unlock != nil {
			_ = c.s.ns.Release(unlock.d.LockToken)
		}
		var room <-chan struct{}
		if ready {
			// Back-pressure: a client that does not read keeps its messages in the broker.
			if room = c.w.waitRoom(); room == nil {
				if d, ok := cons.Next(); ok {
					pending = l.stage(d)
					continue
				}
			}
		}
		if drain && room == nil {
			c.mu.Lock()
			if l.drain && !l.detached {
				// Nothing more to send: consume the remaining credit and tell the client.
				l.deliveryCount += l.credit
				l.credit = 0
				l.drain = false
				l.sendFlowLocked(true)
			}
			c.mu.Unlock()
			continue // releases a pending peek-lock message, now without credit
		}
		notify := cons.Notify()
		if pending != nil || room != nil {
			notify = nil // nothing new can be taken until the pending one is sent
		}
		select {
		case <-l.wake:
		case <-room:
		case <-notify:
		case <-cons.Done():
			l.forceDetach(consumerDoneError(cons.Err()))
			return
		case <-l.stop:
			return
		}
	}
}

func consumerDoneError(err error) *amqp.Error {
	switch {
	case err == nil:
		return &amqp.Error{Condition: condDetachForced, Description: "the consumer was closed"}
	case errors.Is(err, broker.ErrEntityDeleted), errors.Is(err, broker.ErrNotFound):
		return &amqp.Error{Condition: condNotFound, Description: err.Error()}
	default:
		return &amqp.Error{Condition: condDetachForced, Description: err.Error()}
	}
}

// stage encodes a broker delivery (outside the lock). It returns nil when the message
// cannot be encoded (a peek-lock message is then released).
func (l *link) stage(d broker.Delivery) *staged {
	c := l.s.c
	payload, err := encodeMessage(d.Message)
	if err != nil {
		c.log.Error("emulator: encode delivery", "error", err, "sequence_number", d.SequenceNumber)
		if l.mode == broker.PeekLock {
			_ = c.s.ns.Release(d.LockToken)
		}
		return nil
	}
	c.mu.Lock()
	frames := c.framesFor(len(payload))
	c.mu.Unlock()
	return &staged{d: d, payload: payload, frames: frames}
}

// sendStagedLocked sends a staged delivery. Caller holds c.mu.
func (l *link) sendStagedLocked(p *staged) {
	settled := l.mode == broker.ReceiveAndDelete
	var tag []byte
	if !settled {
		tag = dotnetGUIDBytes(p.d.LockToken)
	} else {
		tag = make([]byte, 8)
		binary.BigEndian.PutUint64(tag, uint64(p.d.SequenceNumber))
	}
	id := l.transferLocked(p.payload, tag, settled)
	if !settled {
		l.s.unsettled[id] = unsettledDelivery{l: l, token: p.d.LockToken}
	}
	l.s.c.s.ns.CountOp(broker.OpReceive, l.path, 1)
}

// dotnetGUIDBytes returns the lock token in .NET Guid.ToByteArray order, which the SDK
// swaps back (RFC bytes [3,2,1,0,5,4,7,6,8..15]).
func dotnetGUIDBytes(u goamqp.UUID) []byte {
	return []byte{u[3], u[2], u[1], u[0], u[5], u[4], u[7], u[6],
		u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]}
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > 1<<63-1 {
			return 0, false
		}
		return int64(x), true
	case uint:
		return int64(x), true
	default:
		return 0, false
	}
}
