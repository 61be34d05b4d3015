package servicebus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

// pageSize is the admin API's largest page. Asking for it lets the SDK's
// pagers stop at the first short page instead of asking for one more, empty,
// page.
const pageSize = 100

// nextPage reads the next page of a listing of the admin API, within
// Timeouts.Admin.
func nextPage[T any](ctx context.Context, c *Client, op string, p *runtime.Pager[T]) (T, error) {
	var page T
	if err := c.boundedAdmin(ctx, op, func(ctx context.Context) (err error) {
		page, err = p.NextPage(ctx)
		return err
	}); err != nil {
		var zero T // page may still be written by an abandoned call
		return zero, err
	}
	return page, nil
}

// Entities lists every queue, topic and subscription with its runtime
// counts: one paged request for the queues, one for the topics and one per
// topic for its subscriptions, never one per entity. Topics count only
// scheduled messages; subscriptions have no scheduled count. A topic deleted
// between the two listings is left out.
func (c *Client) Entities(ctx context.Context) ([]dlq.Entity, error) {
	if c.isClosed() {
		return nil, fmt.Errorf("list entities: %w", ErrClosed)
	}
	var out []dlq.Entity

	queues := c.admin.NewListQueuesRuntimePropertiesPager(&admin.ListQueuesRuntimePropertiesOptions{MaxPageSize: pageSize})
	for queues.More() {
		page, err := nextPage(ctx, c, "list queues", queues)
		if err != nil {
			return nil, err
		}
		for _, q := range page.QueueRuntimeProperties {
			out = append(out, dlq.Entity{Path: q.QueueName, Kind: dlq.KindQueue, Counts: dlq.Counts{
				Active:             int64(q.ActiveMessageCount),
				DeadLetter:         int64(q.DeadLetterMessageCount),
				TransferDeadLetter: int64(q.TransferDeadLetterMessageCount),
				Scheduled:          int64(q.ScheduledMessageCount),
			}})
		}
	}

	var topics []string
	tp := c.admin.NewListTopicsRuntimePropertiesPager(&admin.ListTopicsRuntimePropertiesOptions{MaxPageSize: pageSize})
	for tp.More() {
		page, err := nextPage(ctx, c, "list topics", tp)
		if err != nil {
			return nil, err
		}
		for _, t := range page.TopicRuntimeProperties {
			topics = append(topics, t.TopicName)
			out = append(out, dlq.Entity{Path: t.TopicName, Kind: dlq.KindTopic, Counts: dlq.Counts{
				Scheduled: int64(t.ScheduledMessageCount),
			}})
		}
	}

	for _, topic := range topics {
		subs := c.admin.NewListSubscriptionsRuntimePropertiesPager(topic, &admin.ListSubscriptionsRuntimePropertiesOptions{MaxPageSize: pageSize})
		for subs.More() {
			page, err := nextPage(ctx, c, "list subscriptions of topic "+topic, subs)
			if err != nil {
				if errors.Is(err, dlq.ErrEntityNotFound) {
					break // deleted since it was listed
				}
				return nil, err
			}
			for _, s := range page.SubscriptionRuntimeProperties {
				out = append(out, dlq.Entity{
					Path:  dlq.SubscriptionPath(topic, s.SubscriptionName),
					Kind:  dlq.KindSubscription,
					Topic: topic,
					Counts: dlq.Counts{
						Active:             int64(s.ActiveMessageCount),
						DeadLetter:         int64(s.DeadLetterMessageCount),
						TransferDeadLetter: int64(s.TransferDeadLetterMessageCount),
					},
				})
			}
		}
	}
	return out, nil
}

// Settings lists every queue, topic and subscription with its settings,
// with the same requests as Entities but from the non-runtime listings.
// Durations the service writes as .NET's TimeSpan.MaxValue ("never") are
// math.MaxInt64; forwarding targets are as the service reports them (an
// entity name, or a URL for some namespaces).
func (c *Client) Settings(ctx context.Context) ([]dlq.Settings, error) {
	if c.isClosed() {
		return nil, fmt.Errorf("list entity settings: %w", ErrClosed)
	}
	var out []dlq.Settings
	var bad []string // properties the service sent that do not parse

	queues := c.admin.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: pageSize})
	for queues.More() {
		page, err := nextPage(ctx, c, "list queue settings", queues)
		if err != nil {
			return nil, err
		}
		for _, q := range page.Queues {
			p := q.QueueProperties
			s := dlq.Settings{
				Path:                             q.QueueName,
				Kind:                             dlq.KindQueue,
				Status:                           status(p.Status),
				MaxDeliveryCount:                 deref(p.MaxDeliveryCount),
				RequiresSession:                  deref(p.RequiresSession),
				RequiresDuplicateDetection:       deref(p.RequiresDuplicateDetection),
				DeadLetteringOnMessageExpiration: deref(p.DeadLetteringOnMessageExpiration),
				ForwardTo:                        deref(p.ForwardTo),
				ForwardDeadLetteredMessagesTo:    deref(p.ForwardDeadLetteredMessagesTo),
			}
			s.LockDuration = duration(&bad, q.QueueName, "LockDuration", p.LockDuration)
			s.DuplicateDetectionWindow = duration(&bad, q.QueueName, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
			s.DefaultTimeToLive = duration(&bad, q.QueueName, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
			out = append(out, s)
		}
	}

	var topics []string
	tp := c.admin.NewListTopicsPager(&admin.ListTopicsOptions{MaxPageSize: pageSize})
	for tp.More() {
		page, err := nextPage(ctx, c, "list topic settings", tp)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Topics {
			p := t.TopicProperties
			topics = append(topics, t.TopicName)
			s := dlq.Settings{
				Path:                       t.TopicName,
				Kind:                       dlq.KindTopic,
				Status:                     status(p.Status),
				RequiresDuplicateDetection: deref(p.RequiresDuplicateDetection),
			}
			s.DuplicateDetectionWindow = duration(&bad, t.TopicName, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
			s.DefaultTimeToLive = duration(&bad, t.TopicName, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
			out = append(out, s)
		}
	}

	for _, topic := range topics {
		subs := c.admin.NewListSubscriptionsPager(topic, &admin.ListSubscriptionsOptions{MaxPageSize: pageSize})
		for subs.More() {
			page, err := nextPage(ctx, c, "list subscription settings of topic "+topic, subs)
			if err != nil {
				if errors.Is(err, dlq.ErrEntityNotFound) {
					break
				}
				return nil, err
			}
			for _, sub := range page.Subscriptions {
				p := sub.SubscriptionProperties
				path := dlq.SubscriptionPath(topic, sub.SubscriptionName)
				s := dlq.Settings{
					Path:                             path,
					Kind:                             dlq.KindSubscription,
					Status:                           status(p.Status),
					MaxDeliveryCount:                 deref(p.MaxDeliveryCount),
					RequiresSession:                  deref(p.RequiresSession),
					DeadLetteringOnMessageExpiration: deref(p.DeadLetteringOnMessageExpiration),
					ForwardTo:                        deref(p.ForwardTo),
					ForwardDeadLetteredMessagesTo:    deref(p.ForwardDeadLetteredMessagesTo),
				}
				s.LockDuration = duration(&bad, path, "LockDuration", p.LockDuration)
				s.DefaultTimeToLive = duration(&bad, path, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
				out = append(out, s)
			}
		}
	}
	if len(bad) > 0 {
		// One unparsable value should not hide every entity's settings.
		c.log.Warn("entity settings with durations that do not parse were read as 0", "properties", bad)
	}
	return out, nil
}

func status(s *admin.EntityStatus) string {
	if s == nil {
		return ""
	}
	return string(*s)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// duration parses an ISO-8601 duration of the admin API; a value that does
// not parse reads as 0 and is noted in bad.
func duration(bad *[]string, entity, name string, s *string) time.Duration {
	if s == nil || *s == "" {
		return 0
	}
	d, err := isodur.Parse(*s)
	if err != nil {
		*bad = append(*bad, entity+"."+name)
		return 0
	}
	return d
}
