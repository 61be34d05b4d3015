package emulator_test

import (
	"context"
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
	"github.com/dlqdash/dlqdash/emulator/config"
)

// toAdmin sends the admin client's https://<namespace>/ requests to the
// emulator's admin listener.
type toAdmin struct{ base *url.URL }

func (a toAdmin) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = a.base.Scheme, a.base.Host
	return http.DefaultClient.Do(req)
}

func newClients(t *testing.T, emu *emulator.Emulator) (*azservicebus.Client, *admin.Client) {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(emu.ConnectionString(), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	base, err := url.Parse(emu.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	ac, err := admin.NewClientFromConnectionString(emu.ConnectionString(), &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: toAdmin{base}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return c, ac
}

// TestStartServesBothEndpoints: the zero Config serves on loopback, the
// SDK's data and admin clients both reach it, Entities are created, and a
// second Start over the same namespace and addresses serves the messages
// the first one took.
func TestStartServesBothEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu, err := emulator.Start(ctx, emulator.Config{Entities: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	if host := emu.AMQPAddr().String(); !strings.HasPrefix(host, "127.0.0.1:") {
		t.Errorf("AMQP listens on %s, want loopback", host)
	}
	c, ac := newClients(t, emu)

	if _, err := ac.GetQueue(ctx, "queue.1", nil); err != nil {
		t.Fatalf("GetQueue(queue.1) of the default entities: %v", err)
	}
	if _, err := ac.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatalf("CreateQueue over the admin endpoint: %v", err)
	}
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("kept")}, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	s.Close(ctx)
	c.Close(ctx)

	amqpAddr, adminAddr, ns := emu.AMQPAddr().String(), emu.AdminAddr().String(), emu.Namespace()
	if err := emu.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := emu.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}

	again, err := emulator.Start(ctx, emulator.Config{Namespace: ns, AMQPAddr: amqpAddr, AdminAddr: adminAddr})
	if err != nil {
		t.Fatalf("restart on the same addresses: %v", err)
	}
	t.Cleanup(func() { again.Close() })
	if again.ConnectionString() != "Endpoint=sb://"+amqpAddr+";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;" {
		t.Errorf("ConnectionString = %q", again.ConnectionString())
	}
	c2, _ := newClients(t, again)
	r, err := c2.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "kept" {
		t.Fatalf("receive after the restart: %v, %d messages", err, len(msgs))
	}
	if st := again.Stats().Entity("orders"); st.Receive != 1 {
		t.Errorf("Stats().Entity(orders).Receive = %d, want 1", st.Receive)
	}
}

// TestStartRefusesWhatItCannotServe: a taken port and a bad entity file
// are errors that say which endpoint or file is wrong.
func TestStartRefusesWhatItCannotServe(t *testing.T) {
	emu, err := emulator.Start(t.Context(), emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	_, err = emulator.Start(t.Context(), emulator.Config{AMQPAddr: emu.AMQPAddr().String()})
	if err == nil || !strings.Contains(err.Error(), "AMQP endpoint") {
		t.Errorf("Start on a taken AMQP port: %v", err)
	}
	_, err = emulator.Start(t.Context(), emulator.Config{AdminAddr: emu.AdminAddr().String()})
	if err == nil || !strings.Contains(err.Error(), "admin endpoint") {
		t.Errorf("Start on a taken admin port: %v", err)
	}
	bad := config.Default()
	bad.UserConfig.Namespaces[0].Queues = append(bad.UserConfig.Namespaces[0].Queues, bad.UserConfig.Namespaces[0].Queues[0])
	_, err = emulator.Start(t.Context(), emulator.Config{Entities: bad})
	if err == nil || !strings.Contains(err.Error(), "emulator configuration") {
		t.Errorf("Start with a queue twice: %v", err)
	}
}
