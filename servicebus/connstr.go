package servicebus

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// connString is what this package needs to know about a connection string.
// The SDK parses it again itself; parsing it here first means every
// malformed string gets one of our messages, which never repeat a value.
type connString struct {
	host     string // namespace host, without the port
	port     string // "" when the endpoint names none
	emulator bool   // UseDevelopmentEmulator=true
	secrets  []string
}

// namespace is host[:port].
func (c connString) namespace() string {
	if c.port != "" {
		return c.host + ":" + c.port
	}
	return c.host
}

const connStrShape = "Endpoint=sb://<namespace>.servicebus.windows.net/;SharedAccessKeyName=<name>;SharedAccessKey=<key>"

// parseConnString checks the parts the adapter relies on. Its errors name
// keys, never values.
func parseConnString(s string) (connString, error) {
	var c connString
	var endpoint string
	var haveName, haveKey, haveSAS bool
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return c, fmt.Errorf("connection string: a part has no '=': want key=value pairs separated by ';' like %s", connStrShape)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "endpoint":
			endpoint = v
		case "sharedaccesskeyname":
			haveName = v != ""
		case "sharedaccesskey":
			haveKey = v != ""
			c.secrets = append(c.secrets, v)
		case "sharedaccesssignature":
			haveSAS = v != ""
			c.secrets = append(c.secrets, v)
			// The signature alone is what makes a token usable; redact it
			// wherever it might be quoted without the rest.
			if _, sig, ok := strings.Cut(v, "sig="); ok {
				sig, _, _ = strings.Cut(sig, "&")
				c.secrets = append(c.secrets, sig)
				if u, err := url.QueryUnescape(sig); err == nil && u != sig {
					c.secrets = append(c.secrets, u)
				}
			}
		case "usedevelopmentemulator":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, errors.New("connection string: UseDevelopmentEmulator is neither true nor false")
			}
			c.emulator = b
		}
	}
	if endpoint == "" {
		return c, errors.New("connection string: no Endpoint; want " + connStrShape)
	}
	u, err := url.Parse(endpoint)
	if err != nil || !strings.EqualFold(u.Scheme, "sb") || u.Hostname() == "" || u.User != nil {
		return c, errors.New("connection string: Endpoint is not an sb://<host>[:port]/ address")
	}
	c.host, c.port = u.Hostname(), u.Port()
	if c.port != "" {
		if n, err := strconv.Atoi(c.port); err != nil || n < 1 || n > 65535 {
			return c, errors.New("connection string: the Endpoint's port is not between 1 and 65535")
		}
	}
	switch {
	case haveSAS && (haveName || haveKey):
		return c, errors.New("connection string: has both SharedAccessSignature and SharedAccessKeyName/SharedAccessKey; use one or the other")
	case haveSAS:
	case haveName && haveKey:
	case haveKey:
		return c, errors.New("connection string: SharedAccessKey without SharedAccessKeyName")
	case haveName:
		return c, errors.New("connection string: SharedAccessKeyName without SharedAccessKey")
	default:
		return c, errors.New("connection string: no credentials; add SharedAccessKeyName and SharedAccessKey, or SharedAccessSignature")
	}
	return c, nil
}

// redact replaces every secret of the connection string in s.
func (c connString) redact(s string) string {
	for _, secret := range c.secrets {
		if len(secret) >= 4 { // never blank out stray short substrings
			s = strings.ReplaceAll(s, secret, "[REDACTED]")
		}
	}
	return s
}
