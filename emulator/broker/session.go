package broker

import (
	"fmt"
	"slices"
	"time"
)

// sessionStore resolves a path that must be a session entity's main queue.
func (ns *Namespace) sessionStore(path string) (*store, error) {
	s, q, _, err := ns.receivable(path)
	if err != nil {
		return nil, err
	}
	if !s.session || q != &s.main {
		return nil, fmt.Errorf("%q is not a session entity: %w", path, ErrNotAllowed)
	}
	return s, nil
}

// RenewSessionLock extends a held session lock by the entity's
// LockDuration. ErrSessionLockLost when nobody holds it or it expired.
func (ns *Namespace) RenewSessionLock(path, sessionID string) (time.Time, error) {
	s, err := ns.sessionStore(path)
	if err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.unlockFlush()
	now := ns.nowNano()
	s.touch(now)
	ss := s.sessions[sessionID]
	if s.deleted || ss == nil || ss.holder == nil {
		return time.Time{}, fmt.Errorf("session %q of %s: %w", sessionID, s.name, ErrSessionLockLost)
	}
	if ss.until <= now {
		s.expireSession(ss, now)
		return time.Time{}, fmt.Errorf("session %q of %s: expired: %w", sessionID, s.name, ErrSessionLockLost)
	}
	ss.until = now + int64(s.lockDuration())
	return unixTime(ss.until), nil
}

// SessionState returns a copy of the session's state (nil if none). The
// session lock is not required (emulator choice: lenient for dashboards).
func (ns *Namespace) SessionState(path, sessionID string) ([]byte, error) {
	s, err := ns.sessionStore(path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.unlockFlush()
	s.touch(ns.nowNano())
	if ss := s.sessions[sessionID]; ss != nil && ss.state != nil {
		return slices.Clone(ss.state), nil
	}
	return nil, nil
}

// SetSessionState stores a copy of state; empty clears it. The updated-at
// time feeds ListSessions.
func (ns *Namespace) SetSessionState(path, sessionID string, state []byte) error {
	s, err := ns.sessionStore(path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.unlockFlush()
	if s.deleted {
		return fmt.Errorf("%s: %w", s.name, ErrEntityDeleted)
	}
	ss := s.sessionFor(sessionID)
	ss.state = nil
	if len(state) > 0 {
		ss.state = slices.Clone(state)
	}
	ss.updated = ns.nowNano()
	s.touch(ss.updated)
	return nil
}

// defaultModeAfter: the SDK's "default mode" sentinel is 10000-01-01; any
// time from year 9999 on is treated like the zero time.
var defaultModeAfter = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ListSessions lists session ids sorted by id, after skip, at most top (all
// when top <= 0). With a zero updatedAfter (default mode) it lists sessions
// that have messages or stored state; otherwise sessions whose state was
// set after updatedAfter.
func (ns *Namespace) ListSessions(path string, updatedAfter time.Time, skip, top int) ([]string, error) {
	s, err := ns.sessionStore(path)
	if err != nil {
		return nil, err
	}
	def := updatedAfter.IsZero() || !updatedAfter.Before(defaultModeAfter)
	after := updatedAfter.UnixNano()
	s.touch(ns.nowNano())
	s.mu.Lock()
	var ids []string
	for id, ss := range s.sessions {
		if def && (ss.msgs > 0 || ss.state != nil) || !def && ss.updated != 0 && ss.updated > after {
			ids = append(ids, id)
		}
	}
	s.unlockFlush()
	slices.Sort(ids)
	if skip > 0 {
		ids = ids[min(skip, len(ids)):]
	}
	if top > 0 && len(ids) > top {
		ids = ids[:top]
	}
	return ids, nil
}
