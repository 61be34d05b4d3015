package store

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
)

// rawInserts are insertMessages' multi-row INSERTs on SQLite, prepared on
// the writer's driver connection and run below database/sql, inside the
// ingest's transaction (through its ingestConn's Raw). database/sql copies every
// argument of every statement into a new []driver.NamedValue and checks
// it, converting the pointers and the ints it finds by reflection: 2 KiB
// a message allocated, and 2 % of a million-message ingest's CPU with its
// garbage collection on top (issue 18, BENCHMARKS.md). Here the arguments
// go into two slices the statements keep, converted by hand.
//
// Only the ingest's transactions use them, on the writer's one connection,
// so they are never used by two goroutines at once; Raw's hold of the
// connection orders one use after another.
type rawInserts struct {
	// conn is the driver connection the statements were prepared on: a
	// writer connection replaced after an error prepares them again.
	conn any
	// messages and bodies insert 1 << i rows, for i up to
	// log2(insertChunk).
	messages, bodies []sqldriver.Stmt
	// rowArgs and bodyArgs are a chunk's arguments, their ordinals set.
	rowArgs, bodyArgs []sqldriver.NamedValue
}

// prepareOn prepares the statements on dc, unless they already are.
func (r *rawInserts) prepareOn(ctx context.Context, dc any) error {
	if r.conn == dc && r.conn != nil {
		return nil
	}
	pc, ok := dc.(sqldriver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("prepare catalog inserts: the writer's connection is a %T, which cannot prepare", dc)
	}
	r.forget()
	for n := 1; n <= insertChunk; n *= 2 {
		m, err := pc.PrepareContext(ctx, "INSERT INTO messages ("+messageColumns+") VALUES "+placeholders(n, messageColumnCount))
		if err != nil {
			r.closeAll()
			return fmt.Errorf("prepare catalog inserts: %w", err)
		}
		r.messages = append(r.messages, m)
		b, err := pc.PrepareContext(ctx, "INSERT INTO bodies (message_id, body) VALUES "+placeholders(n, 2))
		if err != nil {
			r.closeAll()
			return fmt.Errorf("prepare catalog inserts: %w", err)
		}
		r.bodies = append(r.bodies, b)
	}
	r.rowArgs = ordinals(insertChunk * messageColumnCount)
	r.bodyArgs = ordinals(insertChunk * 2)
	r.conn = dc
	return nil
}

// ordinals is n arguments numbered 1 to n.
func ordinals(n int) []sqldriver.NamedValue {
	args := make([]sqldriver.NamedValue, n)
	for i := range args {
		args[i].Ordinal = i + 1
	}
	return args
}

// closeAll closes the statements and forgets them.
func (r *rawInserts) closeAll() error {
	var errs []error
	for _, st := range append(r.messages, r.bodies...) {
		errs = append(errs, st.Close())
	}
	r.forget()
	return errors.Join(errs...)
}

// forget drops the statements without closing them.
func (r *rawInserts) forget() { *r = rawInserts{} }

// rawExec runs st with args.
func rawExec(ctx context.Context, st sqldriver.Stmt, args []sqldriver.NamedValue) error {
	ec, ok := st.(sqldriver.StmtExecContext)
	if !ok {
		return fmt.Errorf("a %T cannot execute with a context", st)
	}
	_, err := ec.ExecContext(ctx, args)
	return err
}

// insertRaw inserts msgs with ids from next on, in chunks of a power of
// two rows, on dc (the ingest transaction's driver connection).
func (r *rawInserts) insertRaw(ctx context.Context, dc any, msgs []newMessage, next int64) error {
	if err := r.prepareOn(ctx, dc); err != nil {
		return err
	}
	for rest := msgs; len(rest) > 0; {
		// The largest prepared chunk that fits: log2 of it indexes the
		// statements.
		k, n := 0, 1
		for n*2 <= min(len(rest), insertChunk) {
			k, n = k+1, n*2
		}
		rows, bodies := r.rowArgs[:n*messageColumnCount], r.bodyArgs[:n*2]
		for i := range rest[:n] {
			nm := &rest[i]
			m := nm.m
			gid, ttl, props, preview := nm.derived()
			id := next
			next++
			v := rows[i*messageColumnCount : (i+1)*messageColumnCount]
			v[0].Value, v[1].Value, v[2].Value, v[3].Value = id, nm.eid, int64(nm.sq), int64(nm.st)
			v[4].Value, v[5].Value, v[6].Value = m.SequenceNumber, m.MessageID, optString(m.CorrelationID)
			v[7].Value, v[8].Value, v[9].Value = optString(m.SessionID), optString(m.PartitionKey), optString(m.Subject)
			v[10].Value, v[11].Value = optString(m.ContentType), optString(m.ReplyTo)
			v[12].Value, v[13].Value = optString(m.ReplyToSessionID), optString(m.To)
			v[14].Value, v[15].Value = optString(m.DeadLetterReason), optString(m.DeadLetterErrorDescription)
			v[16].Value, v[17].Value = optString(m.DeadLetterSource), int64(m.DeliveryCount)
			v[18].Value, v[19].Value, v[20].Value = millis(m.EnqueuedAt), millis(m.ScheduledEnqueueAt), millis(m.ExpiresAt)
			v[21].Value, v[22].Value, v[23].Value, v[24].Value = ttl, props, int64(len(m.Body)), preview
			v[25].Value, v[26].Value, v[27].Value = gid, nm.firstSeen, nm.lastSeen
			v[28].Value, v[29].Value = max(nm.replayCount, replayCountOf(props)), nm.gone
			b := m.Body
			if b == nil {
				b = []byte{}
			}
			bodies[2*i].Value, bodies[2*i+1].Value = id, b
		}
		err := rawExec(ctx, r.messages[k], rows)
		if err == nil {
			err = rawExec(ctx, r.bodies[k], bodies)
		}
		forgetValues(rows) // nothing of the page stays reachable from the store
		forgetValues(bodies)
		if err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// forgetValues sets args' values to nil, keeping their ordinals.
func forgetValues(args []sqldriver.NamedValue) {
	for i := range args {
		args[i].Value = nil
	}
}

// optString is p's string, or nil (NULL) for none.
func optString(p *string) sqldriver.Value {
	if p == nil {
		return nil
	}
	return *p
}

// closeRawInserts closes the ingest's raw statements, on the connection
// they were prepared on (Close, before the writer closes).
func (s *Store) closeRawInserts() error {
	r := s.chunk.raw
	if r == nil {
		return nil
	}
	conn, err := s.writer.Conn(context.Background())
	if err != nil {
		return fmt.Errorf("close catalog inserts: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if r.conn != dc {
			r.forget() // prepared on a connection since replaced
			return nil
		}
		return r.closeAll()
	})
}
