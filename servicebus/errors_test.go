package servicebus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// fakeRPCError stands for the SDK's internal $management error type.
type fakeRPCError struct{ code int }

func (e fakeRPCError) Error() string { return fmt.Sprintf("rpc: failed, status code %d", e.code) }
func (e fakeRPCError) RPCCode() int  { return e.code }

func responseError(status int, header http.Header, body string) error {
	req, _ := http.NewRequest(http.MethodGet, "https://ns.servicebus.windows.net/$Resources/Queues?api-version=2024-05", nil)
	resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: header, Request: req,
		Body: io.NopCloser(strings.NewReader(body))}
	return &azcore.ResponseError{StatusCode: status, RawResponse: resp}
}

func TestClassify(t *testing.T) {
	amqpErr := func(cond amqp.ErrCond) error { return &amqp.Error{Condition: cond, Description: "d"} }
	for _, tt := range []struct {
		name string
		err  error
		want error // nil: no sentinel
	}{
		{"sb unauthorized", &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}, dlq.ErrUnauthorized},
		{"sb not found", &azservicebus.Error{Code: azservicebus.CodeNotFound}, dlq.ErrEntityNotFound},
		{"sb connection lost", &azservicebus.Error{Code: azservicebus.CodeConnectionLost}, dlq.ErrUnreachable},
		{"sb timeout", &azservicebus.Error{Code: azservicebus.CodeTimeout}, dlq.ErrUnreachable},
		{"sb closed", &azservicebus.Error{Code: azservicebus.CodeClosed}, ErrClosed},
		{"sb client closed", fmt.Errorf("wrapped: %w", errors.New("client has been closed by user")), ErrClosed},
		{"sb lock lost", &azservicebus.Error{Code: azservicebus.CodeLockLost}, dlq.ErrLockLost},
		{"amqp lock lost", amqpErr(condLockLost), dlq.ErrLockLost},
		{"admin 401", responseError(401, nil, ""), dlq.ErrUnauthorized},
		{"admin 403", responseError(403, nil, ""), dlq.ErrUnauthorized},
		{"admin 404", responseError(404, nil, ""), dlq.ErrEntityNotFound},
		{"admin 429", responseError(429, nil, ""), dlq.ErrThrottled},
		{"admin 503", responseError(503, nil, ""), dlq.ErrThrottled},
		{"admin 502", responseError(502, nil, ""), dlq.ErrUnreachable},
		{"admin 504", responseError(504, nil, ""), dlq.ErrUnreachable},
		{"admin 408", responseError(408, nil, ""), dlq.ErrUnreachable},
		{"admin 500", responseError(500, nil, ""), nil},
		{"admin 400", responseError(400, nil, ""), nil},
		{"rpc 503 (server busy on peek)", fakeRPCError{503}, dlq.ErrThrottled},
		{"rpc 401", fakeRPCError{401}, dlq.ErrUnauthorized},
		{"rpc 404", fakeRPCError{404}, dlq.ErrEntityNotFound},
		{"rpc 500", fakeRPCError{500}, nil},
		{"amqp unauthorized", amqpErr(amqp.ErrCondUnauthorizedAccess), dlq.ErrUnauthorized},
		{"amqp not found", amqpErr(amqp.ErrCondNotFound), dlq.ErrEntityNotFound},
		{"attach refused not found", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotFound}}, dlq.ErrEntityNotFound},
		{"amqp server busy", amqpErr(condServerBusy), dlq.ErrThrottled},
		{"amqp timeout", amqpErr(condTimeout), dlq.ErrUnreachable},
		// Retried by the SDK like server-busy, then returned bare: a
		// transient failure, not a refusal of the messages.
		{"amqp operation cancelled", amqpErr(condCancelled), dlq.ErrUnreachable},
		{"amqp connection forced", amqpErr(amqp.ErrCondConnectionForced), dlq.ErrUnreachable},
		// A status someone set, and a full entity: neither is transient,
		// each has its own sentinel so the replay engine can pause saying so.
		{"amqp entity disabled", amqpErr(condEntityDisabled), dlq.ErrEntityDisabled},
		{"attach refused entity disabled", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: condEntityDisabled}}, dlq.ErrEntityDisabled},
		{"amqp resource limit exceeded (entity full)", amqpErr(amqp.ErrCondResourceLimitExceeded), dlq.ErrQuotaExceeded},
		{"link detached resource limit exceeded", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondResourceLimitExceeded}}, dlq.ErrQuotaExceeded},
		{"amqp not allowed", amqpErr(amqp.ErrCondNotAllowed), nil},
		{"attach refused not allowed", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotAllowed}}, nil},
		// A connection the broker closed is lost, whatever its condition.
		{"connection closed not allowed", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotAllowed}}, dlq.ErrUnreachable},
		{"connection closed forced", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondConnectionForced}}, dlq.ErrUnreachable},
		{"connection closed unauthorized", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondUnauthorizedAccess}}, dlq.ErrUnauthorized},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, dlq.ErrUnreachable},
		{"dns", fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), dlq.ErrUnreachable},
		{"eof", fmt.Errorf("read: %w", io.EOF), dlq.ErrUnreachable},
		{"reset", syscall.ECONNRESET, dlq.ErrUnreachable},
		{"deadline", context.DeadlineExceeded, dlq.ErrUnreachable},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), context.Canceled},
		{"unknown", errors.New("something else"), nil},
	} {
		kind, hint, _ := classify(tt.err, "ns")
		if kind != tt.want {
			t.Errorf("%s: kind %v, want %v", tt.name, kind, tt.want)
		}
		if kind != nil && kind != context.Canceled && kind != ErrClosed && hint == "" {
			t.Errorf("%s: no hint", tt.name)
		}
	}
}

func TestMapError(t *testing.T) {
	ns, err := connstr.Parse("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s3cr3t-key")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{ns: ns, adminBase: "https://ns.servicebus.windows.net/"}

	err = c.mapAdminError("list queues", responseError(401, nil, `<Error><Code>401</Code><Detail>InvalidSignature:
		The token has an invalid signature. TrackingId:abc</Detail></Error>`))
	if !errors.Is(err, dlq.ErrUnauthorized) {
		t.Fatalf("not ErrUnauthorized: %v", err)
	}
	var respErr *azcore.ResponseError
	if !errors.As(err, &respErr) {
		t.Errorf("the SDK's error is not in the chain")
	}
	msg := err.Error()
	for _, want := range []string{"list queues: ", "Service Bus refused the credentials", "SharedAccessKey", "Manage", "HTTP 401", "InvalidSignature: The token has an invalid signature"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "-----") {
		t.Errorf("message is not one line: %q", msg)
	}

	// Throttling carries Retry-After.
	for _, tt := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"X-Ms-Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}, 59 * time.Minute},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{nil, 0},
	} {
		err := c.mapAdminError("list topics", responseError(429, tt.header, ""))
		var te *dlq.ThrottledError
		if !errors.As(err, &te) || !errors.Is(err, dlq.ErrThrottled) {
			t.Fatalf("429: %v is not a ThrottledError", err)
		}
		if te.RetryAfter < tt.want || te.RetryAfter > tt.want+time.Minute && tt.want > 0 || tt.want == 0 && te.RetryAfter != 0 {
			t.Errorf("Retry-After %v: RetryAfter %s, want %s", tt.header, te.RetryAfter, tt.want)
		}
	}

	// Secrets are redacted wherever they appear.
	err = c.mapError("peek q", errors.New("token s3cr3t-key rejected"))
	if strings.Contains(err.Error(), "s3cr3t-key") {
		t.Errorf("secret in %q", err)
	}
	// Cancellation stays the caller's.
	err = c.mapError("peek q", context.Canceled)
	if !errors.Is(err, context.Canceled) || errors.Is(err, dlq.ErrUnreachable) || !strings.HasPrefix(err.Error(), "peek q: ") {
		t.Errorf("cancelled: %v", err)
	}
	// A deadline is both.
	err = c.mapError("peek q", context.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlq.ErrUnreachable) {
		t.Errorf("deadline: %v", err)
	}
}

// TestAdminThrottled checks the admin path end to end: a 429 with
// Retry-After comes back at once, not after the SDK's retries, and the
// request reached the admin endpoint with the namespace's signature.
func TestAdminThrottled(t *testing.T) {
	var hits atomic.Int32
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Retry-After", "12")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "<Error><Code>429</Code><Detail>Too many requests.</Detail></Error>")
	}))
	defer srv.Close()
	c, err := Open(t.Context(), "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0", Options{AdminEndpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	start := time.Now()
	_, err = c.Entities(t.Context())
	var te *dlq.ThrottledError
	if !errors.As(err, &te) || te.RetryAfter != 12*time.Second {
		t.Fatalf("Entities: %v (%T)", err, err)
	}
	if hits.Load() != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("%d requests in %s; want one, at once", hits.Load(), time.Since(start))
	}
	if a, _ := auth.Load().(string); !strings.Contains(a, "contoso.servicebus.windows.net") || !strings.Contains(a, "skn=Root") {
		t.Errorf("Authorization %q does not sign the namespace URL", a)
	}
	if !strings.Contains(err.Error(), "Too many requests.") {
		t.Errorf("message lacks the service's detail: %v", err)
	}
}

// TestAdminEmptyNamespace checks the rewrite against an admin endpoint
// without the emulator flag, and that an empty namespace is an empty list.
func TestAdminEmptyNamespace(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		fmt.Fprint(w, `<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Queues</title></feed>`)
	}))
	defer srv.Close()
	c, err := Open(t.Context(), "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0", Options{AdminEndpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ents, err := c.Entities(t.Context())
	if err != nil || len(ents) != 0 {
		t.Fatalf("Entities: %v, %v", ents, err)
	}
	settings, err := c.Settings(t.Context())
	if err != nil || len(settings) != 0 {
		t.Fatalf("Settings: %v, %v", settings, err)
	}
	// One request per listing: a page shorter than the page size ends it.
	want := []string{"/$Resources/Queues", "/$Resources/Topics", "/$Resources/Queues", "/$Resources/Topics"}
	if fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Errorf("requests %v, want %v", paths, want)
	}
	if c.Namespace() != "contoso.servicebus.windows.net" {
		t.Errorf("Namespace() = %q", c.Namespace())
	}
}
