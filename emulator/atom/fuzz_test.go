package atom

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// FuzzPut sends arbitrary bodies to every PUT route: the handler must answer
// with a status, never panic.
func FuzzPut(f *testing.F) {
	f.Add("/q", queueBody("<LockDuration>PT30S</LockDuration><MaxDeliveryCount>3</MaxDeliveryCount>"))
	f.Add("/t", `<entry><content><TopicDescription><DefaultMessageTimeToLive>P1D</DefaultMessageTimeToLive></TopicDescription></content></entry>`)
	f.Add("/t/Subscriptions/s", `<entry><content><SubscriptionDescription><DefaultRuleDescription><Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="SqlFilter"><SqlExpression>1=1</SqlExpression></Filter></DefaultRuleDescription></SubscriptionDescription></content></entry>`)
	f.Add("/t/Subscriptions/s/Rules/r", `<entry><content><RuleDescription><Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="CorrelationFilter"><Properties><KeyValueOfstringanyType><Key>k</Key><Value i:type="d:int" xmlns:d="x">1</Value></KeyValueOfstringanyType></Properties></Filter></RuleDescription></content></entry>`)
	f.Fuzz(func(t *testing.T, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \t\r\n") {
			return
		}
		if _, err := url.ParseRequestURI("http://127.0.0.1" + path); err != nil {
			return
		}
		ns := broker.New(broker.Options{})
		if _, err := ns.CreateTopic("t", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.CreateSubscription("t", "s", broker.DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
		h := NewHandler(ns, Options{})
		req := httptest.NewRequest(http.MethodPut, "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", sign(t, "http://127.0.0.1"+path, DefaultKeyName, DefaultKey))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("500 for PUT %s: %s", path, rec.Body)
		}
	})
}
