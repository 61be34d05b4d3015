package emulator_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// ruleClients are an AMQP and an admin client signing with the key keyName.
func ruleClients(t *testing.T, emu *emulator.Emulator, keyName, key string) (*azservicebus.Client, *admin.Client) {
	t.Helper()
	cs := strings.Replace(emu.ConnectionString(), "SharedAccessKeyName="+emulator.DefaultKeyName, "SharedAccessKeyName="+keyName, 1)
	cs = strings.Replace(cs, "SharedAccessKey="+emulator.DefaultKey, "SharedAccessKey="+key, 1)
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	base, err := url.Parse(emu.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	ac, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: toAdmin{base}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return c, ac
}

// TestAuthorizationRules: namespace keys with fewer rights, as the SDK's
// own TestClientUnauthorizedCreds, TestReceiverUnauthorizedCreds and
// TestAdminClient_LackPermissions_* use them. A Listen-only key cannot send
// and a Send-only key cannot receive (amqp:unauthorized-access, Azure's
// words, CodeUnauthorizedAccess), each can do its own part; a key without
// Manage gets Azure's 401s from the admin API, except that a missing queue
// or topic is still "not found" (nil from the SDK); the secondary key signs
// as well as the primary; and invalid rules are refused at Start.
func TestAuthorizationRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{AuthorizationRules: []broker.AuthorizationRule{
		{KeyName: "SendOnly", Rights: []string{"Send"}, PrimaryKey: "c2VuZC1vbmx5"},
		{KeyName: "ListenOnly", Rights: []string{"Listen"}, PrimaryKey: "bGlzdGVuLW9ubHk=", SecondaryKey: "c2Vjb25kYXJ5"},
		{KeyName: "NoManage", Rights: []string{"Send", "Listen"}, PrimaryKey: "bm8tbWFuYWdl"},
	}})
	_, root := newClients(t, emu)
	if _, err := root.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.CreateSubscription(ctx, "events", "audit", nil); err != nil {
		t.Fatal(err)
	}
	sendOnly, _ := ruleClients(t, emu, "SendOnly", "c2VuZC1vbmx5")
	listenOnly, _ := ruleClients(t, emu, "ListenOnly", "bGlzdGVuLW9ubHk=")
	listenSecondary, _ := ruleClients(t, emu, "ListenOnly", "c2Vjb25kYXJ5")

	unauthorized := func(what string, err error, want string) {
		t.Helper()
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v\nwant CodeUnauthorizedAccess with %q", what, err, want)
		}
	}
	s, _ := listenOnly.NewSender("orders", nil)
	unauthorized("send with a Listen-only key", s.SendMessage(ctx, &azservicebus.Message{Body: []byte("no")}, nil),
		"Description: Unauthorized access. 'Send' claim(s) are required to perform this operation. Resource: 'sb://")
	r, _ := sendOnly.NewReceiverForQueue("orders", nil)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if len(msgs) != 0 {
		t.Errorf("a Send-only key received %d messages", len(msgs))
	}
	unauthorized("receive with a Send-only key", err,
		"Description: Unauthorized access. 'Listen' claim(s) are required to perform this operation")

	// Each does its own part; the secondary key works too.
	s, _ = sendOnly.NewSender("orders", nil)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("yes")}, nil); err != nil {
		t.Fatalf("send with a Send-only key: %v", err)
	}
	for name, c := range map[string]*azservicebus.Client{"primary": listenOnly, "secondary": listenSecondary} {
		r, _ := c.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if name == "secondary" {
			s, _ := sendOnly.NewSender("orders", nil)
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("yes")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "yes" {
			t.Fatalf("receive with the Listen-only key (%s) = %v, %v", name, msgs, err)
		}
	}

	// The admin API without Manage.
	_, noManage := ruleClients(t, emu, "NoManage", "bm8tbWFuYWdl")
	if q, err := noManage.GetQueue(ctx, "missing", nil); err != nil || q != nil {
		t.Errorf("GetQueue(missing) without Manage = %v, %v; want nil, nil (404)", q, err)
	}
	if p, err := noManage.GetTopicRuntimeProperties(ctx, "missing", nil); err != nil || p != nil {
		t.Errorf("GetTopicRuntimeProperties(missing) without Manage = %v, %v; want nil, nil (404)", p, err)
	}
	status401 := func(what string, err error, want string) {
		t.Helper()
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v\nwant 401 with %q", what, err, want)
		}
	}
	_, err = noManage.GetQueue(ctx, "orders", nil)
	status401("GetQueue", err, ">Manage,EntityRead claims required for this operation")
	_, err = noManage.NewListTopicsPager(nil).NextPage(ctx)
	status401("list topics", err, ">Manage,EntityRead claims required for this operation")
	_, err = noManage.CreateQueue(ctx, "never", nil)
	status401("CreateQueue", err, "Authorization failed for specified action: Manage,EntityWrite")
	_, err = noManage.DeleteTopic(ctx, "events", nil)
	status401("DeleteTopic", err, "Authorization failed for specified action: Manage,EntityDelete.")
	_, err = noManage.GetSubscription(ctx, "events", "missing", nil)
	status401("GetSubscription(missing)", err, "401 SubCode=40100: Unauthorized : Unauthorized access for 'GetSubscription' operation")
	_, err = noManage.NewListSubscriptionsPager("events", nil).NextPage(ctx)
	status401("list subscriptions", err, "Unauthorized access for 'EnumerateSubscriptions' operation")
	_, err = noManage.DeleteSubscription(ctx, "events", "audit", nil)
	status401("DeleteSubscription", err, "Unauthorized access for 'DeleteSubscription' operation")
	if _, err := emu.Namespace().Topic("events"); err != nil {
		t.Errorf("the topic is gone after refused deletes: %v", err)
	}

	// Invalid rules do not start.
	for name, rule := range map[string]broker.AuthorizationRule{
		"no key":             {KeyName: "k", Rights: []string{"Send"}},
		"main key's name":    {KeyName: emulator.DefaultKeyName, Rights: []string{"Send"}, PrimaryKey: "x"},
		"unknown right":      {KeyName: "k", Rights: []string{"Read"}, PrimaryKey: "x"},
		"manage without all": {KeyName: "k", Rights: []string{"Manage", "Send"}, PrimaryKey: "x"},
	} {
		if e, err := emulator.Start(ctx, emulator.Config{AuthorizationRules: []broker.AuthorizationRule{rule}}); err == nil {
			e.Close()
			t.Errorf("Start with an invalid rule (%s) succeeded", name)
		}
	}
}
