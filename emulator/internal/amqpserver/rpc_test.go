package amqpserver_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

func sasToken(resource, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := fmt.Sprint(expiry.Unix())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, keyName)
}

// TestSASConnectionString: a connection string carrying a namespace-wide SAS works; an
// expired one or one for another namespace gets CodeUnauthorizedAccess, the expired one
// in Azure's words with the expiry (the SDK's TestClientUnauthorizedCreds "Expired SAS").
func TestSASConnectionString(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	host := env.srv.Addr().String()
	cases := []struct {
		name     string
		resource string
		expiry   time.Time
		ok       bool
	}{
		{"namespace token", host, time.Now().Add(time.Hour), true},
		{"entity token", "amqp://" + host + "/q1", time.Now().Add(time.Hour), true},
		{"expired", host, time.Now().Add(-time.Minute), false},
		{"other entity", "amqp://" + host + "/q2", time.Now().Add(time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := sasToken(tc.resource, amqpserver.DefaultKeyName, amqpserver.DefaultKey, tc.expiry)
			cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;UseDevelopmentEmulator=true", host, tok)
			client := newClient(t, cs)
			defer client.Close(ctx)
			s, err := client.NewSender("q1", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("send: %v", err)
			case !tc.ok && sbCode(err) != azservicebus.CodeUnauthorizedAccess:
				t.Fatalf("send: %v (code %q), want unauthorized", err, sbCode(err))
			}
			if tc.name == "expired" {
				want := "rpc: failed, status code 401 and description: ExpiredToken: The token is expired. Expiration time: '" +
					time.Unix(tc.expiry.Unix(), 0).UTC().Format("2006-01-02 15:04:05Z") + "'"
				if !strings.Contains(err.Error(), want) {
					t.Errorf("send with an expired SAS: %v\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

// TestReplyRoutedByLinkName: clients other than Go attach their reply receiver without a
// target and use the link name as reply-to.
func TestReplyRoutedByLinkName(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	sess := dialSession(t, ctx, env)
	snd, err := sess.NewSender(ctx, "q1/$management", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "q1/$management", &goamqp.ReceiverOptions{Name: "reply-link-7", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	req := &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: "req-1", ReplyTo: strPtr("reply-link-7")},
		ApplicationProperties: map[string]any{"operation": "com.microsoft:peek-message"},
		Value:                 map[string]any{"from-sequence-number": int64(1), "message-count": int32(5)},
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatalf("send request: %v", err)
	}
	resp, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("receive reply: %v", err)
	}
	if resp.Properties == nil || resp.Properties.CorrelationID != "req-1" {
		t.Fatalf("correlation id %v", resp.Properties)
	}
	if resp.ApplicationProperties["statusCode"] != int32(204) || resp.ApplicationProperties["status-code"] != int32(204) {
		t.Fatalf("status %v", resp.ApplicationProperties)
	}
	// An unknown operation is 501.
	req.Properties.MessageID = "req-2"
	req.ApplicationProperties["operation"] = "com.microsoft:no-such-op"
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatalf("send request: %v", err)
	}
	resp, err = rcv.Receive(ctx, nil)
	if err != nil || resp.ApplicationProperties["statusCode"] != int32(501) {
		t.Fatalf("unknown op: %v %v", resp, err)
	}
}

// TestAttachRefusals checks the conditions of refused attaches with a raw go-amqp client.
func TestAttachRefusals(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", nil)
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
		if _, err := ns.CreateTopic("t1", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.CreateSubscription("t1", "s1", broker.DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
	})
	ctx := testCtx(t)
	sess := dialSession(t, ctx, env)
	sessionFilter := []goamqp.LinkFilter{goamqp.NewLinkFilter("com.microsoft:session-filter", 0x00000137000000C, "a")}
	cases := []struct {
		name string
		try  func() error
		cond goamqp.ErrCond
	}{
		{"send to subscription", func() error { _, err := sess.NewSender(ctx, "t1/Subscriptions/s1", nil); return err }, goamqp.ErrCondNotAllowed},
		{"send to DLQ", func() error { _, err := sess.NewSender(ctx, "q1/$DeadLetterQueue", nil); return err }, goamqp.ErrCondNotAllowed},
		{"send to missing", func() error { _, err := sess.NewSender(ctx, "nope", nil); return err }, goamqp.ErrCondNotFound},
		{"receive from topic", func() error { _, err := sess.NewReceiver(ctx, "t1", nil); return err }, goamqp.ErrCondNotAllowed},
		{"session filter on plain queue", func() error {
			_, err := sess.NewReceiver(ctx, "q1", &goamqp.ReceiverOptions{Filters: sessionFilter})
			return err
		}, goamqp.ErrCondNotAllowed},
		{"no session filter on session queue", func() error { _, err := sess.NewReceiver(ctx, "sq", nil); return err }, goamqp.ErrCondNotAllowed},
		{"management of missing entity", func() error { _, err := sess.NewSender(ctx, "nope/$management", nil); return err }, goamqp.ErrCondNotFound},
	}
	for _, tc := range cases {
		err := tc.try()
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != tc.cond {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.cond)
		}
	}
	// The session still works after the refusals.
	if _, err := sess.NewSender(ctx, "q1", nil); err != nil {
		t.Fatalf("sender after refusals: %v", err)
	}
}
