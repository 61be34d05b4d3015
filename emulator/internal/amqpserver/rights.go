package amqpserver

import (
	"fmt"
	"strings"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

// Shared access rights, as Azure names them.
const (
	rightManage = "Manage"
	rightSend   = "Send"
	rightListen = "Listen"
)

const condUnauthorizedAccess amqp.Symbol = "amqp:unauthorized-access"

// grant is what one accepted put-token allows on a connection: the rights
// of the token's key for the audience it was put for.
type grant struct {
	audience string // lower-cased, without scheme or trailing slash: host[:port]/path
	rights   []string
}

// keyFor returns the key(s) and rights of the SAS key name skn: the
// server's own key (every right) or one of Options.Rules (its primary and
// secondary key).
func (s *Server) keyFor(skn string) (keys []string, rights []string, ok bool) {
	if skn == s.opts.KeyName {
		return []string{s.opts.Key}, []string{rightManage, rightSend, rightListen}, true
	}
	for _, r := range s.opts.Rules {
		if r.KeyName != skn {
			continue
		}
		for _, k := range []string{r.PrimaryKey, r.SecondaryKey} {
			if k != "" {
				keys = append(keys, k)
			}
		}
		return keys, r.Rights, true
	}
	return nil, nil, false
}

// recordGrant remembers the rights of an accepted token for its audience;
// a later token for the same audience replaces the earlier one, as a
// renewed token does on Azure.
func (c *conn) recordGrant(audience string, rights []string) {
	aud := normAudience(audience)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.grants {
		if c.grants[i].audience == aud {
			c.grants[i].rights = rights
			return
		}
	}
	c.grants = append(c.grants, grant{audience: aud, rights: rights})
}

// checkRight refuses an attach to entity path when the connection holds a
// token covering the path (its audience equal to the entity or a prefix of
// it, the namespace included) and none of the covering tokens has right
// (Manage includes Send and Listen). A connection that put no token for
// the path is let through, as before rules existed (the emulator does not
// require put-token before attach). The refusal is Azure's:
// amqp:unauthorized-access, "Unauthorized access. 'Send' claim(s) are
// required to perform this operation. Resource: 'sb://host/path'."
func (c *conn) checkRight(path, right string) *amqp.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := strings.ToLower(strings.Trim(path, "/"))
	covered, host := false, ""
	for _, g := range c.grants {
		h, gp, _ := strings.Cut(g.audience, "/")
		if gp != "" && gp != p && !strings.HasPrefix(p, gp+"/") {
			continue
		}
		covered, host = true, h
		for _, r := range g.rights {
			if strings.EqualFold(r, right) || strings.EqualFold(r, rightManage) {
				return nil
			}
		}
	}
	if !covered {
		return nil
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return &amqp.Error{Condition: condUnauthorizedAccess, Description: fmt.Sprintf(
		"Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: 'sb://%s/%s'.", right, host, p)}
}

func normAudience(aud string) string {
	return strings.TrimSuffix(strings.ToLower(stripScheme(aud)), "/")
}

// allRights are the rights of an Entra ID token: the emulator has no role
// assignments, so a valid token may do everything.
var allRights = []string{rightManage, rightSend, rightListen}
