package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// Apply validates c, names ns after the configured namespace and creates
// every queue, topic, subscription and rule in it. Forwarding is set in a
// second pass, once every target exists. On error the entities created so far
// remain; callers start from a fresh namespace and give up on error.
func (c *Config) Apply(ns *broker.Namespace) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	n := c.UserConfig.Namespaces[0]
	ns.SetName(n.Name)

	type pending struct {
		apply func() error
	}
	var later []pending

	for _, q := range n.Queues {
		p := QueueBrokerProperties(q.Properties)
		fwd, fwdDLQ := p.ForwardTo, p.ForwardDeadLetteredMessagesTo
		p.ForwardTo, p.ForwardDeadLetteredMessagesTo = "", ""
		if _, err := ns.CreateQueue(q.Name, p); err != nil {
			return fmt.Errorf("config: create queue %q: %w", q.Name, err)
		}
		if fwd != "" || fwdDLQ != "" {
			name := q.Name
			p.ForwardTo, p.ForwardDeadLetteredMessagesTo = fwd, fwdDLQ
			later = append(later, pending{func() error {
				if _, err := ns.UpdateQueue(name, p); err != nil {
					return fmt.Errorf("config: set forwarding on queue %q: %w", name, err)
				}
				return nil
			}})
		}
	}
	for _, t := range n.Topics {
		if _, err := ns.CreateTopic(t.Name, TopicBrokerProperties(t.Properties)); err != nil {
			return fmt.Errorf("config: create topic %q: %w", t.Name, err)
		}
	}
	for _, t := range n.Topics {
		for _, s := range t.Subscriptions {
			p := SubscriptionBrokerProperties(s.Properties)
			fwd, fwdDLQ := p.ForwardTo, p.ForwardDeadLetteredMessagesTo
			p.ForwardTo, p.ForwardDeadLetteredMessagesTo = "", ""
			rules := make([]broker.Rule, 0, len(s.Rules))
			for _, r := range s.Rules {
				rules = append(rules, BrokerRule(r))
			}
			if _, err := ns.CreateSubscription(t.Name, s.Name, p, rules...); err != nil {
				return fmt.Errorf("config: create subscription %q of topic %q: %w", s.Name, t.Name, err)
			}
			if fwd != "" || fwdDLQ != "" {
				topic, name := t.Name, s.Name
				p.ForwardTo, p.ForwardDeadLetteredMessagesTo = fwd, fwdDLQ
				later = append(later, pending{func() error {
					if _, err := ns.UpdateSubscription(topic, name, p); err != nil {
						return fmt.Errorf("config: set forwarding on subscription %q of topic %q: %w", name, topic, err)
					}
					return nil
				}})
			}
		}
	}
	for _, p := range later {
		if err := p.apply(); err != nil {
			return err
		}
	}
	return nil
}

func orDefault(d Duration, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

func orDefaultCount(n int32) int32 {
	if n == 0 {
		return DefaultMaxDeliveryCount
	}
	return n
}

// QueueBrokerProperties maps Config.json queue properties onto the broker's,
// starting from the broker's Azure defaults for everything Config.json cannot
// express.
func QueueBrokerProperties(qp QueueProperties) broker.QueueProperties {
	p := broker.DefaultQueueProperties()
	p.DeadLetteringOnMessageExpiration = qp.DeadLetteringOnMessageExpiration
	p.DefaultMessageTimeToLive = orDefault(qp.DefaultMessageTimeToLive, DefaultMessageTimeToLive)
	p.DuplicateDetectionHistoryTimeWindow = orDefault(qp.DuplicateDetectionHistoryTimeWindow, DefaultDuplicateDetectionHistoryTimeWindow)
	p.ForwardDeadLetteredMessagesTo = qp.ForwardDeadLetteredMessagesTo
	p.ForwardTo = qp.ForwardTo
	p.LockDuration = orDefault(qp.LockDuration, DefaultLockDuration)
	p.MaxDeliveryCount = orDefaultCount(qp.MaxDeliveryCount)
	p.RequiresDuplicateDetection = qp.RequiresDuplicateDetection
	p.RequiresSession = qp.RequiresSession
	return p
}

// TopicBrokerProperties maps Config.json topic properties onto the broker's.
func TopicBrokerProperties(tp TopicProperties) broker.TopicProperties {
	p := broker.DefaultTopicProperties()
	p.DefaultMessageTimeToLive = orDefault(tp.DefaultMessageTimeToLive, DefaultMessageTimeToLive)
	p.DuplicateDetectionHistoryTimeWindow = orDefault(tp.DuplicateDetectionHistoryTimeWindow, DefaultDuplicateDetectionHistoryTimeWindow)
	p.RequiresDuplicateDetection = tp.RequiresDuplicateDetection
	return p
}

// SubscriptionBrokerProperties maps Config.json subscription properties onto the broker's.
func SubscriptionBrokerProperties(sp SubscriptionProperties) broker.SubscriptionProperties {
	p := broker.DefaultSubscriptionProperties()
	p.DeadLetteringOnMessageExpiration = sp.DeadLetteringOnMessageExpiration
	p.DefaultMessageTimeToLive = orDefault(sp.DefaultMessageTimeToLive, DefaultMessageTimeToLive)
	p.LockDuration = orDefault(sp.LockDuration, DefaultLockDuration)
	p.MaxDeliveryCount = orDefaultCount(sp.MaxDeliveryCount)
	p.ForwardDeadLetteredMessagesTo = sp.ForwardDeadLetteredMessagesTo
	p.ForwardTo = sp.ForwardTo
	p.RequiresSession = sp.RequiresSession
	return p
}

// BrokerRule maps a Config.json rule onto a broker rule.
func BrokerRule(r Rule) broker.Rule {
	br := broker.Rule{Name: r.Name}
	if r.Properties.Action != nil {
		br.Action = r.Properties.Action.SQLExpression
	}
	switch {
	case strings.EqualFold(r.Properties.FilterType, FilterCorrelation) && r.Properties.CorrelationFilter != nil:
		cf := r.Properties.CorrelationFilter
		br.Kind = broker.FilterCorrelation
		br.Correlation = &broker.CorrelationFilter{
			ContentType:      cf.ContentType,
			CorrelationID:    cf.CorrelationID,
			Subject:          cf.Label,
			MessageID:        cf.MessageID,
			ReplyTo:          cf.ReplyTo,
			ReplyToSessionID: cf.ReplyToSessionID,
			SessionID:        cf.SessionID,
			To:               cf.To,
		}
		if len(cf.Properties) > 0 {
			br.Correlation.Properties = make(map[string]any, len(cf.Properties))
			for k, v := range cf.Properties {
				br.Correlation.Properties[k] = v
			}
		}
	case r.Properties.SQLFilter != nil:
		br.Kind = broker.FilterSQL
		br.SQLExpression = r.Properties.SQLFilter.SQLExpression
	}
	return br
}
