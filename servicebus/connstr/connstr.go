// Package connstr parses Service Bus connection strings:
//
//	Endpoint=sb://<host>[:port][/];SharedAccessKeyName=<name>;SharedAccessKey=<key>[;EntityPath=<e>][;UseDevelopmentEmulator=true]
//	Endpoint=sb://<host>[:port][/];SharedAccessSignature=<sas>[;...]
//
// It is the one parser of the project: the command line checks the string
// with it before anything starts (cmd/dlqdash), and the adapter reads the
// namespace and the secrets to redact with it (servicebus.Open). It is pure
// (no SDK, no I/O), so configuration parsing stays pure and testable alone.
//
// Nothing here ever prints a secret: errors name keys and positions but
// never repeat a value, since any value may hold or neighbour a secret; and
// a ConnectionString's String, GoString, LogValue and MarshalText show no
// key, signature or raw string.
package connstr

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
)

// Shape is the usual form of a connection string, for error messages and
// help texts.
const Shape = "Endpoint=sb://<namespace>.servicebus.windows.net/;SharedAccessKeyName=<name>;SharedAccessKey=<key>"

// redacted replaces secrets wherever they would be shown.
const redacted = "[REDACTED]"

// secret holds a credential. Every way of printing it prints a placeholder,
// so a stray %v or slog attribute cannot leak it.
type secret string

func (s secret) String() string               { return redacted }
func (s secret) GoString() string             { return redacted }
func (s secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// ConnectionString is a parsed Service Bus connection string.
type ConnectionString struct {
	Host                   string // namespace host, e.g. contoso.servicebus.windows.net
	Port                   int    // 0 when the endpoint names none
	KeyName                string // SharedAccessKeyName; empty with a signature
	EntityPath             string
	UseDevelopmentEmulator bool

	key secret // SharedAccessKey
	sas secret // SharedAccessSignature
	raw secret // the whole string, for the Service Bus SDK
}

// Raw returns the connection string exactly as given, for the Service Bus
// SDK. Never log or render it.
func (c ConnectionString) Raw() string { return string(c.raw) }

func (c ConnectionString) String() string {
	auth := "key " + c.KeyName
	if c.sas != "" {
		auth = "shared access signature"
	}
	return fmt.Sprintf("Service Bus namespace %s (%s, secret %s)", c.Namespace(), auth, redacted)
}

func (c ConnectionString) GoString() string { return c.String() }

func (c ConnectionString) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("namespace", c.Namespace()),
		slog.String("key_name", c.KeyName),
		slog.Bool("emulator", c.UseDevelopmentEmulator),
	)
}

// Namespace is host[:port], safe to log and show.
func (c ConnectionString) Namespace() string {
	if c.Port != 0 {
		return c.Host + ":" + strconv.Itoa(c.Port)
	}
	return c.Host
}

// Redact replaces every secret of the connection string in s: the key, the
// signature, and the signature's sig= part alone (escaped or not), which is
// what makes a token usable and may be quoted without the rest (in an SDK
// error, say).
func (c ConnectionString) Redact(s string) string {
	secrets := []string{string(c.key), string(c.sas)}
	if _, sig, ok := strings.Cut(string(c.sas), "sig="); ok {
		sig, _, _ = strings.Cut(sig, "&")
		secrets = append(secrets, sig)
		if u, err := url.QueryUnescape(sig); err == nil && u != sig {
			secrets = append(secrets, u)
		}
	}
	for _, v := range secrets {
		if len(v) >= 4 { // never blank out stray short substrings
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}

// Parse checks s and returns its parts. Its errors complete a sentence whose
// subject is the string ("… has no Endpoint"), so that callers prefix what
// they call it (an environment variable, "connection string"); they name keys
// and positions, never values.
func Parse(s string) (ConnectionString, error) {
	c := ConnectionString{raw: secret(s)}
	s = strings.TrimSpace(s)
	if s == "" {
		return c, errors.New("is empty; want " + Shape)
	}
	seen := map[string]bool{}
	var endpoint, key, sas string
	var haveKey, haveSAS, haveName bool
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return c, fmt.Errorf("part %d has no '=': want key=value pairs separated by ';' like %s", i+1, Shape)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		lk := strings.ToLower(k)
		switch lk {
		case "endpoint", "sharedaccesskeyname", "sharedaccesskey", "sharedaccesssignature", "entitypath", "usedevelopmentemulator":
		default:
			// Other keys (from other tools or SDK versions) are ignored, as
			// the SDK ignores them.
			continue
		}
		if seen[lk] {
			return c, fmt.Errorf("has %s more than once", k)
		}
		seen[lk] = true
		if v == "" {
			return c, fmt.Errorf("has an empty %s", k)
		}
		switch lk {
		case "endpoint":
			endpoint = v
		case "sharedaccesskeyname":
			c.KeyName, haveName = v, true
		case "sharedaccesskey":
			key, haveKey = v, true
		case "sharedaccesssignature":
			sas, haveSAS = v, true
		case "entitypath":
			c.EntityPath = v
		case "usedevelopmentemulator":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, errors.New("has a UseDevelopmentEmulator that is neither true nor false")
			}
			c.UseDevelopmentEmulator = b
		}
	}

	if endpoint == "" {
		return c, errors.New("has no Endpoint; want " + Shape)
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || !strings.EqualFold(u.Scheme, "sb"):
		return c, errors.New("has an Endpoint that is not an sb:// address; want Endpoint=sb://<namespace>.servicebus.windows.net/")
	case u.User != nil:
		return c, errors.New("has an Endpoint with user information in it; put credentials in SharedAccessKeyName and SharedAccessKey")
	case u.Hostname() == "":
		return c, errors.New("has an Endpoint without a host; want Endpoint=sb://<namespace>.servicebus.windows.net/")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return c, errors.New("has an Endpoint with a path or query; want only sb://<host>[:port]/ (put the entity in EntityPath)")
	}
	c.Host = u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return c, errors.New("has an Endpoint with a port that is not between 1 and 65535")
		}
		c.Port = n
	}

	switch {
	case haveSAS && (haveKey || haveName):
		return c, errors.New("has both SharedAccessSignature and SharedAccessKeyName/SharedAccessKey; use one or the other")
	case haveSAS:
		c.sas = secret(sas)
	case haveKey && !haveName:
		return c, errors.New("has SharedAccessKey but no SharedAccessKeyName")
	case haveName && !haveKey:
		return c, errors.New("has SharedAccessKeyName but no SharedAccessKey")
	case haveKey:
		c.key = secret(key)
	default:
		return c, errors.New("has no credentials; add SharedAccessKeyName and SharedAccessKey, or SharedAccessSignature")
	}
	return c, nil
}
