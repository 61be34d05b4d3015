package amqpserver

import (
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

const (
	// sessionIncomingWindow is advertised in begin and in every flow; it is re-opened
	// whenever half of it has been used, so a compliant client never stalls.
	sessionIncomingWindow = 5000
	sessionOutgoingWindow = 5000
	// maxDispositionRange bounds the work one client disposition can ask for.
	maxDispositionRange = 100000
)

// unsettledDelivery is a peek-lock delivery sent on a link and not yet settled.
type unsettledDelivery struct {
	l     *link
	token goamqp.UUID
}

// session is one AMQP session. Every field is guarded by conn.mu.
type session struct {
	c     *conn
	ch    uint16 // the client's channel; the emulator uses the same number for its side
	links map[uint32]*link

	// client → emulator transfers
	nextIncomingID    uint32
	incomingSinceFlow uint32 // transfer frames since the window was last re-advertised

	// emulator → client transfers
	nextOutgoingID       uint32
	nextDeliveryID       uint32
	remoteIncomingWindow int64
	// remoteWindowAdvertised is the incoming-window of the client's last begin or flow.
	remoteWindowAdvertised uint32
	unsettled              map[uint32]unsettledDelivery

	ended bool
}

func newSession(c *conn, ch uint16, b *amqp.Begin) *session {
	return &session{
		c:                      c,
		ch:                     ch,
		links:                  map[uint32]*link{},
		nextIncomingID:         b.NextOutgoingID,
		remoteIncomingWindow:   int64(b.IncomingWindow),
		remoteWindowAdvertised: b.IncomingWindow,
		unsettled:              map[uint32]unsettledDelivery{},
	}
}

// fillSessionFlow sets the session fields every flow must carry (next-incoming-id above
// all: go-amqp ends the session without it). It re-opens the full incoming window.
// Caller holds c.mu.
func (s *session) fillSessionFlow(f *amqp.Flow) {
	nid := s.nextIncomingID
	f.NextIncomingID = &nid
	f.IncomingWindow = sessionIncomingWindow
	f.NextOutgoingID = s.nextOutgoingID
	f.OutgoingWindow = sessionOutgoingWindow
	s.incomingSinceFlow = 0
}

// sendSessionFlow queues a flow without a handle. Caller holds c.mu.
func (s *session) sendSessionFlow() {
	f := &amqp.Flow{}
	s.fillSessionFlow(f)
	s.c.send(s.ch, f)
}

// handleEnd: End is an implicit detach of every link on the session (the SDK's RPC
// links just end their session). Message locks are untouched.
func (s *session) handleEnd(e *amqp.End) error {
	c := s.c
	if e.Error != nil {
		c.log.Debug("emulator: peer ended session with error", "channel", s.ch, "condition", string(e.Error.Condition), "error", e.Error.Description)
	}
	c.mu.Lock()
	delete(c.sessions, s.ch)
	s.ended = true
	c.send(s.ch, &amqp.End{})
	c.mu.Unlock()
	s.endLinks()
	return nil
}

// endLinks stops every link of an ended session.
func (s *session) endLinks() {
	c := s.c
	c.mu.Lock()
	s.ended = true
	links := make([]*link, 0, len(s.links))
	for _, l := range s.links {
		links = append(links, l)
	}
	s.links = map[uint32]*link{}
	s.unsettled = map[uint32]unsettledDelivery{}
	for _, l := range links {
		l.markDetachedLocked()
	}
	c.mu.Unlock()
	for _, l := range links {
		l.release()
	}
}

// handleFlow updates the session window and, with a handle, the link's credit.
func (s *session) handleFlow(f *amqp.Flow) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.NextIncomingID != nil {
		// Window the client still grants us = its next-incoming-id + incoming-window − our next-outgoing-id.
		s.remoteIncomingWindow = int64(int32(*f.NextIncomingID-s.nextOutgoingID)) + int64(f.IncomingWindow)
	} else {
		s.remoteIncomingWindow = int64(f.IncomingWindow)
	}
	s.remoteWindowAdvertised = f.IncomingWindow
	for _, l := range s.links {
		l.wakeUp()
	}
	if f.Handle == nil {
		if f.Echo {
			s.sendSessionFlow()
		}
		return nil
	}
	l := s.links[*f.Handle]
	if l == nil {
		return protoErr(condUnattachedHandle, "flow on unattached handle %d", *f.Handle)
	}
	if l.refused {
		return nil
	}
	if !l.clientSender {
		// The client grants credit: ours = its delivery-count + link-credit − ours.
		if f.LinkCredit != nil {
			dc := l.deliveryCount
			if f.DeliveryCount != nil {
				dc = *f.DeliveryCount
			}
			credit := int64(int32(dc-l.deliveryCount)) + int64(*f.LinkCredit)
			if credit < 0 {
				credit = 0
			}
			l.credit = uint32(credit)
		}
		l.drain = f.Drain
		l.wakeUp()
	}
	if f.Echo {
		l.sendFlowLocked(false)
	}
	return nil
}

// handleDisposition settles peek-lock deliveries the client received on this session.
func (s *session) handleDisposition(d *amqp.Disposition) error {
	if d.Role != amqp.RoleReceiver {
		// The client settling our incoming deliveries: every inbound delivery is already
		// settled by our own disposition, so there is nothing to do.
		return nil
	}
	first, last := d.First, d.First
	if d.Last != nil {
		last = *d.Last
	}
	if last-first > maxDispositionRange {
		return protoErr(condNotAllowed, "disposition range %d..%d too large", first, last)
	}
	c := s.c
	type item struct {
		id    uint32
		token goamqp.UUID
		path  string
		known bool
	}
	items := make([]item, 0, last-first+1)
	c.mu.Lock()
	for id := first; ; id++ {
		u, ok := s.unsettled[id]
		if ok {
			delete(s.unsettled, id)
		}
		it := item{id: id, token: u.token, known: ok}
		if ok {
			it.path = u.l.path
		}
		items = append(items, it)
		if id == last {
			break
		}
	}
	c.mu.Unlock()

	ns := c.s.ns
	results := make([]amqp.DeliveryState, len(items))
	allOK := true
	for i, it := range items {
		if !it.known {
			// Already settled (or never ours): answer as lock lost so the client does not hang.
			results[i] = &amqp.Rejected{Error: &amqp.Error{Condition: condLockLost, Description: "the delivery is not known on this session (already settled or from another session)"}}
			allOK = false
			continue
		}
		results[i] = settle(ns, it.path, it.token, d.State)
		if _, rej := results[i].(*amqp.Rejected); rej {
			if _, isDL := d.State.(*amqp.Rejected); !isDL || results[i].(*amqp.Rejected).Error != nil {
				allOK = false
			}
		}
	}
	if d.Settled {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return nil
	}
	if allOK && len(items) > 0 {
		f, l := first, last
		disp := &amqp.Disposition{Role: amqp.RoleSender, First: f, Settled: true, State: results[0]}
		if l != f {
			disp.Last = &l
		}
		c.send(s.ch, disp)
		return nil
	}
	for i, it := range items {
		c.send(s.ch, &amqp.Disposition{Role: amqp.RoleSender, First: it.id, Settled: true, State: results[i]})
	}
	return nil
}
