package servicebus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
)

// The AMQP conditions Service Bus uses that go-amqp has no constant for.
const (
	condServerBusy     amqp.ErrCond = "com.microsoft:server-busy"
	condTimeout        amqp.ErrCond = "com.microsoft:timeout"
	condEntityDisabled amqp.ErrCond = "com.microsoft:entity-disabled"
	condLockLost       amqp.ErrCond = "com.microsoft:message-lock-lost"
	// condCancelled: Service Bus gave up an operation on its side; the
	// SDK retries it as it does server-busy (RecoveryKindNone) and then
	// returns it bare.
	condCancelled amqp.ErrCond = "com.microsoft:operation-cancelled"
)

// sdkClientClosed is the text of the SDK's (internal) error for a call on
// a closed azservicebus.Client.
const sdkClientClosed = "client has been closed by user"

// The hints of a Client opened with a token credential (OpenWithCredential).
const (
	roleHint       = "check the role assignment of the identity on the namespace: Azure Service Bus Data Receiver to peek and receive, Data Sender to replay, and Data Owner (or a custom role with Microsoft.ServiceBus/namespaces/queues/read and topics/read) to list entities and their counts"
	credentialHint = "check the credential's configuration (managed identity or workload identity on this host, client id, tenant and secret, or az login)"
)

// credentialFailure tells whether err is a token credential's failure to
// get a token (a *CredentialError), and returns the credential's message.
// The AMQP side of the SDK reports it as a lost connection whose
// *azservicebus.Error does not unwrap, so only the text of CredentialError
// survives there.
func credentialFailure(err error) (string, bool) {
	var credErr *CredentialError
	if errors.As(err, &credErr) {
		return cause(credErr.Err), true
	}
	text := err.Error()
	if i := strings.Index(text, credentialErrorText); i >= 0 {
		return oneLine(text[i+len(credentialErrorText):]), true
	}
	return "", false
}

// rpcCoder is the SDK's (internal) $management error: an operation
// answered with a status code that is not 2xx. A 503 (server busy) is
// retried by the SDK and then returned as it is.
type rpcCoder interface {
	error
	RPCCode() int
}

// Error is what the adapter returns for a failed operation: a message a
// person can act on (with the connection string's secrets redacted), and in
// its chain the dlq sentinel it matches (if any) and the SDK's error. A
// throttled operation's Error is wrapped in a *dlq.ThrottledError and has
// no Kind of its own.
type Error struct {
	Op   string // "peek orders/$DeadLetterQueue", "list queues"
	Kind error  // dlq.ErrUnauthorized, dlq.ErrEntityNotFound, dlq.ErrUnreachable, dlq.ErrLockLost, dlq.ErrEntityDisabled, dlq.ErrQuotaExceeded, ErrClosed, or nil
	Hint string // what to do about it
	Err  error  // the SDK's error (or the context's)
	msg  string
}

func (e *Error) Error() string { return e.msg }

// Unwrap gives errors.Is and errors.As both the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// mapError classifies err from op, an AMQP operation. It returns *Error, or
// *dlq.ThrottledError around one, or a context error wrapped with op when
// the caller cancelled.
func (c *Client) mapError(op string, err error) error {
	return c.wrapError(op, c.amqpAt, err)
}

// mapAdminError is mapError for an operation of the admin API.
func (c *Client) mapAdminError(op string, err error) error {
	return c.wrapError(op, "the admin API at "+c.adminBase, err)
}

func (c *Client) wrapError(op, target string, err error) error {
	if err == nil {
		return nil
	}
	kind, hint, retryAfter := classify(err, target)
	if kind == context.Canceled {
		return fmt.Errorf("%s: %w", op, err)
	}
	e := &Error{Op: op, Hint: hint, Err: err}
	if kind != dlq.ErrThrottled {
		e.Kind = kind
	}
	var b strings.Builder
	b.WriteString(op)
	b.WriteString(": ")
	switch credMsg, credFailed := credentialFailure(err); {
	case kind == dlq.ErrUnauthorized && credFailed:
		fmt.Fprintf(&b, "could not get a token for %s: %s; %s", c.name, credMsg, credentialHint)
		e.Hint = credentialHint
		e.msg = c.ns.Redact(b.String())
		return e
	case kind == dlq.ErrUnauthorized && c.credential:
		fmt.Fprintf(&b, "Service Bus refused the credential for %s: %s; %s", c.name, cause(err), roleHint)
		e.Hint = roleHint
		e.msg = c.ns.Redact(b.String())
		return e
	}
	if kind != nil && kind != dlq.ErrThrottled {
		b.WriteString(kind.Error())
		b.WriteString(": ")
	}
	if hint != "" {
		b.WriteString(hint)
		b.WriteString(" (")
		b.WriteString(cause(err))
		b.WriteString(")")
	} else {
		b.WriteString(cause(err))
	}
	e.msg = c.ns.Redact(b.String())
	if kind == dlq.ErrThrottled {
		return &dlq.ThrottledError{RetryAfter: retryAfter, Err: e}
	}
	return e
}

// classify decides which sentinel err matches. Checks run from the most
// specific signal to the least: an explicit status or condition first, then
// the transport's errors.
// target names what was being reached ("host:port", "the admin API at
// https://host/").
func classify(err error, target string) (kind error, hint string, retryAfter time.Duration) {
	const (
		authHint        = "check SharedAccessKeyName/SharedAccessKey (or the SharedAccessSignature and its expiry) and that the key has the Manage right (needed to list entities), Listen (needed to peek and receive) and Send (needed to replay); with an Entra ID credential, that its identity has the Azure Service Bus Data Receiver role (peek and receive), Data Sender (replay) and Data Owner (entity lists and counts) on the namespace"
		notFoundHint    = "the queue, topic or subscription does not exist (any more)"
		busyHint        = "the namespace is busy or throttling this client; retry later"
		disabledHint    = "the entity is disabled for this operation; set its status to Active (SendDisabled still allows reading it, ReceiveDisabled sending to it)"
		quotaHint       = "the entity is full (its maximum size is reached) or a quota of the namespace is exceeded; let its consumers make room, or raise its maximum size"
		notAllowedHint  = "Service Bus does not allow this here; the main queue of a session-enabled entity cannot be peeked or received without a session, and a message sent to one needs a session id"
		lockLostHint    = "the message's lock expired (or its link closed) before it was settled; the message is available again in its queue"
		gatewayHint     = "the admin endpoint's gateway did not get an answer from Service Bus"
		closedHint      = ""
		timeoutHint     = "Service Bus did not answer in time"
		cancelledHint   = "Service Bus cancelled the operation on its side (an entity update or a failover, say); it can be retried"
		connClosedHint  = "the connection to %s was closed (by the broker or the network); the next call reconnects"
		unreachableHint = "could not reach %s: check the Endpoint host and port, DNS, firewalls and proxies (AMQP uses port 5671, 5672 for an emulator; the admin API uses HTTPS, or port 5300 for an emulator)"
	)
	unreachable := fmt.Sprintf(unreachableHint, target)

	// The SDK's error for a call on a closed client is not exported, nor
	// turned into an *azservicebus.Error; only its text tells.
	if errors.Is(err, ErrClosed) || strings.Contains(err.Error(), sdkClientClosed) {
		return ErrClosed, closedHint, 0
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled, "", 0
	}

	// A credential that could not get a token (checked first: the SDK
	// may report it as a lost connection).
	if _, ok := credentialFailure(err); ok {
		return dlq.ErrUnauthorized, credentialHint, 0
	}

	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		switch sbErr.Code {
		case azservicebus.CodeUnauthorizedAccess:
			return dlq.ErrUnauthorized, authHint, 0
		case azservicebus.CodeNotFound:
			return dlq.ErrEntityNotFound, notFoundHint, 0
		case azservicebus.CodeConnectionLost:
			return dlq.ErrUnreachable, unreachable, 0
		case azservicebus.CodeTimeout:
			return dlq.ErrUnreachable, timeoutHint, 0
		case azservicebus.CodeClosed:
			return ErrClosed, closedHint, 0
		case azservicebus.CodeLockLost:
			return dlq.ErrLockLost, lockLostHint, 0
		}
	}

	var respErr *azcore.ResponseError
	if errors.As(err, &respErr) {
		switch respErr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return dlq.ErrUnauthorized, authHint, 0
		case http.StatusNotFound:
			return dlq.ErrEntityNotFound, notFoundHint, 0
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return dlq.ErrThrottled, busyHint, retryAfterHeader(respErr.RawResponse)
		case http.StatusRequestTimeout, http.StatusGatewayTimeout:
			return dlq.ErrUnreachable, timeoutHint, 0
		case http.StatusBadGateway:
			return dlq.ErrUnreachable, gatewayHint, 0
		}
		return nil, "", 0
	}

	var rpcErr rpcCoder
	if errors.As(err, &rpcErr) {
		switch rpcErr.RPCCode() {
		case http.StatusUnauthorized, http.StatusForbidden:
			return dlq.ErrUnauthorized, authHint, 0
		case http.StatusNotFound:
			return dlq.ErrEntityNotFound, notFoundHint, 0
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return dlq.ErrThrottled, busyHint, 0
		case http.StatusRequestTimeout:
			return dlq.ErrUnreachable, timeoutHint, 0
		}
	}

	// A connection that ended, whatever the condition it ended with (the
	// broker may close one with amqp:not-allowed for a protocol slip of the
	// client's), is a lost connection: the adapter reconnects (see
	// Client.connFailed) and the call can be retried.
	var closedBy *amqp.ConnError
	if errors.As(err, &closedBy) && closedBy.RemoteErr != nil && closedBy.RemoteErr.Condition != amqp.ErrCondUnauthorizedAccess {
		return dlq.ErrUnreachable, fmt.Sprintf(connClosedHint, target), 0
	}

	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch amqpErr.Condition {
		case amqp.ErrCondUnauthorizedAccess:
			return dlq.ErrUnauthorized, authHint, 0
		case amqp.ErrCondNotFound:
			return dlq.ErrEntityNotFound, notFoundHint, 0
		case condServerBusy:
			return dlq.ErrThrottled, busyHint, 0
		case condTimeout:
			return dlq.ErrUnreachable, timeoutHint, 0
		case condCancelled:
			return dlq.ErrUnreachable, cancelledHint, 0
		case condLockLost:
			return dlq.ErrLockLost, lockLostHint, 0
		case condEntityDisabled:
			return dlq.ErrEntityDisabled, disabledHint, 0
		case amqp.ErrCondResourceLimitExceeded:
			return dlq.ErrQuotaExceeded, quotaHint, 0
		case amqp.ErrCondNotAllowed:
			return nil, notAllowedHint, 0
		case amqp.ErrCondConnectionForced, amqp.ErrCondInternalError, amqp.ErrCondDetachForced:
			return dlq.ErrUnreachable, unreachable, 0
		}
	}

	if errors.Is(err, context.DeadlineExceeded) {
		return dlq.ErrUnreachable, timeoutHint, 0
	}
	var (
		netErr   net.Error
		dnsErr   *net.DNSError
		certErr  *tls.CertificateVerificationError
		unknownA x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		connErr  *amqp.ConnError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownA), errors.As(err, &hostErr):
		return dlq.ErrUnreachable, "the server's TLS certificate was not accepted; check the Endpoint host (and, for an emulator, UseDevelopmentEmulator=true)", 0
	case errors.As(err, &dnsErr):
		return dlq.ErrUnreachable, unreachable, 0
	case errors.As(err, &netErr), errors.As(err, &connErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return dlq.ErrUnreachable, unreachable, 0
	}
	return nil, "", 0
}

// retryAfterHeader reads the delay a throttled response asks for:
// retry-after-ms or x-ms-retry-after-ms (milliseconds), or Retry-After
// (seconds or an HTTP date).
func retryAfterHeader(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	for _, h := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if v := resp.Header.Get(h); v != "" {
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
				return time.Duration(ms * float64(time.Millisecond))
			}
		}
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// cause is a one-line summary of the SDK's error. An admin response error's
// own text is a multi-line dump; it is reduced to the request, the status
// and the service's <Detail>.
func cause(err error) string {
	var respErr *azcore.ResponseError
	if errors.As(err, &respErr) {
		var b strings.Builder
		if resp := respErr.RawResponse; resp != nil {
			if req := resp.Request; req != nil && req.URL != nil {
				fmt.Fprintf(&b, "%s %s: ", req.Method, req.URL.EscapedPath())
			}
			fmt.Fprintf(&b, "HTTP %d", resp.StatusCode)
			if body, err := runtime.Payload(resp); err == nil {
				if d := errorDetail(body); d != "" {
					b.WriteString(": ")
					b.WriteString(d)
				}
			}
		} else {
			fmt.Fprintf(&b, "HTTP %d", respErr.StatusCode)
		}
		return b.String()
	}
	return oneLine(err.Error())
}

// errorDetail reads <Error><Code/><Detail/></Error>, the admin API's error
// body.
func errorDetail(body []byte) string {
	var e struct {
		Detail string `xml:"Detail"`
	}
	if xml.Unmarshal(body, &e) != nil {
		return ""
	}
	return oneLine(e.Detail)
}

// oneLine folds whitespace and caps the length of text from elsewhere.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const limit = 400
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// RefusedError is a send that failed before any of its copies reached the
// destination, for what they are or where they go: a copy that cannot be
// built or is larger than one message may be, a delivery Service Bus
// rejected as too large (amqp:link:message-size-exceeded), a destination
// that does not accept messages (com.microsoft:entity-disabled), a single
// message it refused (amqp:not-allowed: an invalid property, a session
// entity's message without a session id). Sending the same copies again
// would be refused again. Err is the error as it would be without this
// wrapper (an *Error for the broker's refusals).
//
// Package replay reads it through Refused: the copies it sends again one
// by one (to find the one refused) cannot be second copies.
type RefusedError struct {
	Err error
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Refused says that none of the copies was sent.
func (e *RefusedError) Refused() bool { return true }

// refusedWhole reports whether err, the failure of a delivery of n
// messages (or of the attach before it), says for certain that Service Bus
// enqueued none of them. Only a rejection or a refused attach can: a link
// or connection that ended mid-call (*amqp.LinkError, *amqp.ConnError,
// whatever their condition) leaves the outcome unknown, and so do a
// timeout, a throttled or busy broker and the conditions that do not name
// the messages (amqp:resource-limit-exceeded, a full entity, is not
// counted: it is not about what the messages are, and a partial batch is
// not ruled out). A batch's amqp:not-allowed counts only for one message:
// it may be about one message among others, and the emulator
// (docs/servicebus-protocol.md §7.1) keeps those before the one it
// refuses; whether Service Bus ever does is not documented.
func refusedWhole(err error, n int) bool {
	var (
		linkErr *amqp.LinkError
		connErr *amqp.ConnError
		amqpErr *amqp.Error
	)
	if errors.As(err, &linkErr) || errors.As(err, &connErr) || !errors.As(err, &amqpErr) {
		return false
	}
	switch amqpErr.Condition {
	case amqp.ErrCondMessageSizeExceeded, condEntityDisabled:
		return true
	case amqp.ErrCondNotAllowed:
		return n == 1
	}
	return false
}

// refusedAttach reports whether err, the failure of the attach (or batch
// making) before anything of a Send was sent, refuses every copy for where
// they go: com.microsoft:entity-disabled or amqp:not-allowed, whether the
// SDK reports the refused attach bare or as the link's *amqp.LinkError
// (no transfer was in flight, so an ended link leaves nothing unknown). A
// connection that ended is not a refusal.
func refusedAttach(err error) bool {
	var (
		connErr *amqp.ConnError
		amqpErr *amqp.Error
	)
	if errors.As(err, &connErr) || !errors.As(err, &amqpErr) {
		return false
	}
	switch amqpErr.Condition {
	case condEntityDisabled, amqp.ErrCondNotAllowed:
		return true
	}
	return false
}
