// Package webhook posts alerts over HTTP: alert.Poster.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// Poster posts JSON bodies. Its errors never contain the URL (a webhook URL
// is a secret: Slack's and Teams' carry their token in the path).
type Poster struct {
	client *http.Client
}

// New returns a Poster using client (nil: one that follows no redirects,
// so that a webhook cannot send an alert, and the body, elsewhere).
func New(client *http.Client) *Poster {
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Poster{client: client}
}

// Post sends body as application/json and returns the answer's status.
func (p *Poster) Post(ctx context.Context, rawURL string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dlqdash-alerts")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, scrub(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// scrub words a transport error without the URL that *url.Error carries.
func scrub(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer in time: %w", context.DeadlineExceeded)
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("could not reach the webhook: %s %v", op.Op, op.Err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("could not resolve the webhook's host: %s", dns.Err)
	}
	return fmt.Errorf("could not reach the webhook: %v", err)
}
