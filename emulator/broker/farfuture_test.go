package broker

import (
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// A scheduled time beyond what int64 nanoseconds hold (after 2262; Service
// Bus takes any time up to 9999-12-31) stays scheduled: it once wrapped
// around to a time in the past and was enqueued at once. Queues and
// topics, by send and by Schedule.
func TestScheduledFarFuture(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2600, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
	} {
		t.Run(at.Format("2006"), func(t *testing.T) {
			ns, clk := newNS(t)
			mustQueue(t, ns, "q", nil)
			mustNil(t, ns.CreateTopicDefault("t"))
			_, err := ns.CreateSubscription("t", "s", DefaultSubscriptionProperties())
			mustNil(t, err)

			mustSend(t, ns, "q", schedMsg("sent", at))
			_, err = ns.Schedule("q", []*goamqp.Message{schedMsg("scheduled", at)})
			mustNil(t, err)
			mustSend(t, ns, "t", schedMsg("topic", at))

			clk.Advance(24 * time.Hour)
			ns.Tick()
			if got := counts(t, ns, "q"); got.Scheduled != 2 || got.Active != 0 {
				t.Errorf("queue counts %+v, want 2 scheduled", got)
			}
			noNext(t, mustConsumer(t, ns, "q", ConsumerOptions{}))
			noNext(t, mustConsumer(t, ns, "t/Subscriptions/s", ConsumerOptions{}))
			p, err := ns.Peek("q", 1, 2)
			mustNil(t, err)
			for _, d := range p {
				if got, _ := ann(d, "x-opt-scheduled-enqueue-time").(time.Time); !got.Equal(at) {
					t.Errorf("peeked %q scheduled for %v, want %v", body(d), got, at)
				}
			}
		})
	}
}
