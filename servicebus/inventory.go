package servicebus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

var (
	_ replay.ScheduledCanceller = (*Client)(nil)
	_ replay.SubscriptionLister = (*Client)(nil)
)

// CancelScheduled cancels scheduled messages of a queue or topic by
// sequence number (the SDK's Sender.CancelScheduledMessages: one
// cancel-scheduled-message request over $management), on a sender opened
// for the call and closed after it, within Timeouts.Attach + Timeouts.Send.
// Service Bus ignores numbers that are not (or no longer) scheduled.
func (c *Client) CancelScheduled(ctx context.Context, entity string, seqs []int64) error {
	op := "cancel scheduled messages of " + entity
	if c.isClosed() {
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	_, _, isSub, err := parseEntityPath(entity)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if isSub {
		return fmt.Errorf("%s: a subscription holds no scheduled messages; its topic does", op)
	}
	if len(seqs) == 0 {
		return nil
	}
	l, err := newLink(c, func(sb *azservicebus.Client) (*azservicebus.Sender, error) { return sb.NewSender(entity, nil) })
	if err != nil {
		return c.mapError(op, err)
	}
	defer func() {
		// Within Timeouts.Attach: a broker that did not answer may not
		// answer the detach either.
		_ = l.close(context.WithoutCancel(ctx))
	}()
	h := l.get()
	err, o := c.bounded(ctx, op, "a cancel of scheduled messages of "+entity, c.timeouts.Send+h.attach, func(ctx context.Context) error {
		return h.sdk.CancelScheduledMessages(ctx, seqs, nil)
	})
	l.after(h, o)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return err
}

// Subscriptions lists topic's subscriptions (one paged request) and, when
// it has at most rulesUpTo of them, each one's rules (one paged request
// each). A missing topic is dlq.ErrEntityNotFound.
func (c *Client) Subscriptions(ctx context.Context, topic string, rulesUpTo int) ([]replay.Subscription, error) {
	op := "list the subscriptions of " + topic
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if _, _, isSub, err := parseEntityPath(topic); err != nil || isSub {
		return nil, fmt.Errorf("%s: %q is not a topic name", op, topic)
	}
	var out []replay.Subscription
	p := c.admin.NewListSubscriptionsPager(topic, &admin.ListSubscriptionsOptions{MaxPageSize: pageSize})
	for p.More() {
		page, err := nextPage(ctx, c, op, p)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Subscriptions {
			out = append(out, replay.Subscription{Name: s.SubscriptionName})
		}
	}
	if len(out) > rulesUpTo {
		return out, nil
	}
	for i := range out {
		rules, err := c.rules(ctx, topic, out[i].Name)
		if errors.Is(err, dlq.ErrEntityNotFound) {
			continue // deleted since it was listed: its rules stay unknown
		}
		if err != nil {
			return nil, err
		}
		out[i].Rules, out[i].RulesRead = rules, true
	}
	return out, nil
}

// rules lists one subscription's rules.
func (c *Client) rules(ctx context.Context, topic, sub string) ([]replay.Rule, error) {
	op := "list the rules of " + dlq.SubscriptionPath(topic, sub)
	var out []replay.Rule
	p := c.admin.NewListRulesPager(topic, sub, &admin.ListRulesOptions{MaxPageSize: pageSize})
	for p.More() {
		page, err := nextPage(ctx, c, op, p)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Rules {
			out = append(out, ruleOf(r))
		}
	}
	return out, nil
}

// ruleOf is a rule as the engine describes it.
func ruleOf(r admin.RuleProperties) replay.Rule {
	out := replay.Rule{Name: r.Name, Kind: replay.RuleUnknown}
	switch f := r.Filter.(type) {
	case *admin.TrueFilter:
		out.Kind = replay.RuleTrue
	case *admin.FalseFilter:
		out.Kind = replay.RuleFalse
	case *admin.SQLFilter:
		out.Kind, out.Filter = replay.RuleSQL, f.Expression
	case *admin.CorrelationFilter:
		out.Kind, out.Filter, out.Correlation = replay.RuleCorrelation, correlationWords(f), correlationOf(f)
	}
	return out
}

// correlationOf is a correlation filter's conditions as the engine
// evaluates them.
func correlationOf(f *admin.CorrelationFilter) *replay.Correlation {
	c := &replay.Correlation{System: map[string]string{}, Properties: maps.Clone(f.ApplicationProperties)}
	for name, v := range map[string]*string{"correlation_id": f.CorrelationID, "message_id": f.MessageID, "subject": f.Subject,
		"to": f.To, "reply_to": f.ReplyTo, "reply_to_session_id": f.ReplyToSessionID, "session_id": f.SessionID, "content_type": f.ContentType} {
		if v != nil {
			c.System[name] = *v
		}
	}
	return c
}

// correlationWords writes a correlation filter's conditions:
// "subject = 'x' and region = 'eu'".
func correlationWords(f *admin.CorrelationFilter) string {
	var conds []string
	add := func(name string, v *string) {
		if v != nil {
			conds = append(conds, fmt.Sprintf("%s = %q", name, *v))
		}
	}
	add("correlation id", f.CorrelationID)
	add("message id", f.MessageID)
	add("subject", f.Subject)
	add("to", f.To)
	add("reply to", f.ReplyTo)
	add("reply to session id", f.ReplyToSessionID)
	add("session id", f.SessionID)
	add("content type", f.ContentType)
	for _, k := range slices.Sorted(maps.Keys(f.ApplicationProperties)) {
		if v, ok := f.ApplicationProperties[k].(string); ok {
			conds = append(conds, fmt.Sprintf("%s = %q", k, v))
		} else {
			conds = append(conds, fmt.Sprintf("%s = %v", k, f.ApplicationProperties[k]))
		}
	}
	return strings.Join(conds, " and ")
}
