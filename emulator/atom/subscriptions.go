package atom

import (
	"net/http"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

func subscriptionPath(topic, sub string) string { return topic + "/Subscriptions/" + sub }

func (h *handler) listSubscriptions(w http.ResponseWriter, rq *request, topic string) error {
	skip, top, err := paging(rq.r)
	if err != nil {
		return err
	}
	subs, err := h.ns.Subscriptions(topic)
	if err != nil {
		return err
	}
	var entries []*entryXML
	for _, s := range page(subs, skip, top) {
		entries = append(entries, h.subscriptionEntry(rq, s))
	}
	writeXML(w, http.StatusOK, h.feed(rq, "Subscriptions", entries))
	return nil
}

func (h *handler) showSubscription(w http.ResponseWriter, rq *request, topic, sub string) error {
	s, err := h.ns.Subscription(topic, sub)
	if err != nil {
		return err
	}
	writeXML(w, http.StatusOK, h.subscriptionEntry(rq, s))
	return nil
}

func (h *handler) putSubscription(w http.ResponseWriter, rq *request, topic, sub string) error {
	e, err := readEntry(w, rq.r)
	if err != nil {
		return err
	}
	in := e.Content.Subscription
	if in == nil {
		return badRequest("the entry's <content> must hold a SubscriptionDescription")
	}
	update := isUpdate(rq.r)
	p := broker.DefaultSubscriptionProperties()
	if update {
		cur, err := h.ns.Subscription(topic, sub)
		if err != nil {
			return err
		}
		p = cur.Properties
	}
	if err := applySubscription(in, &p); err != nil {
		return err
	}
	var s broker.SubscriptionInfo
	if update {
		// A DefaultRuleDescription only matters at creation, as in the service.
		s, err = h.ns.UpdateSubscription(topic, sub, p)
	} else {
		var rules []broker.Rule
		if in.DefaultRuleDescription != nil {
			r, err := ruleFromXML(in.DefaultRuleDescription, "$Default")
			if err != nil {
				return err
			}
			rules = append(rules, r)
		}
		s, err = h.ns.CreateSubscription(topic, sub, p, rules...)
	}
	if err != nil {
		return err
	}
	writeXML(w, putStatus(update), h.subscriptionEntry(rq, s))
	return nil
}

func (h *handler) deleteSubscription(w http.ResponseWriter, topic, sub string) error {
	if err := h.ns.DeleteSubscription(topic, sub); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func applySubscription(in *subscriptionIn, p *broker.SubscriptionProperties) error {
	if err := parseDuration("LockDuration", in.LockDuration, &p.LockDuration, false); err != nil {
		return err
	}
	if err := parseDuration("DefaultMessageTimeToLive", in.DefaultMessageTimeToLive, &p.DefaultMessageTimeToLive, true); err != nil {
		return err
	}
	if err := parseDuration("AutoDeleteOnIdle", in.AutoDeleteOnIdle, &p.AutoDeleteOnIdle, true); err != nil {
		return err
	}
	if err := setInt32("MaxDeliveryCount", in.MaxDeliveryCount, &p.MaxDeliveryCount); err != nil {
		return err
	}
	if err := parseStatus(in.Status, &p.Status); err != nil {
		return err
	}
	setBool(in.RequiresSession, &p.RequiresSession)
	setBool(in.DeadLetteringOnMessageExpiration, &p.DeadLetteringOnMessageExpiration)
	setBool(in.DeadLetteringOnFilterEvaluationExceptions, &p.DeadLetteringOnFilterEvaluationExceptions)
	setBool(in.EnableBatchedOperations, &p.EnableBatchedOperations)
	setForward(in.ForwardTo, &p.ForwardTo)
	setForward(in.ForwardDeadLetteredMessagesTo, &p.ForwardDeadLetteredMessagesTo)
	setString(in.UserMetadata, &p.UserMetadata)
	return nil
}

// subscriptionEntry writes every element the Go SDK dereferences without a
// nil check (MessageCount and four of the CountDetails counts) and the rest
// the service returns.
func (h *handler) subscriptionEntry(rq *request, s broker.SubscriptionInfo) *entryXML {
	p := s.Properties
	d := &subscriptionXML{
		nsAttrs:                          descNS(),
		LockDuration:                     isodur.Format(p.LockDuration),
		RequiresSession:                  p.RequiresSession,
		DefaultMessageTimeToLive:         durationText(p.DefaultMessageTimeToLive, true),
		DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration,
		DeadLetteringOnFilterEvaluationExceptions: p.DeadLetteringOnFilterEvaluationExceptions,
		MessageCount:                  s.Counts.Total,
		MaxDeliveryCount:              p.MaxDeliveryCount,
		EnableBatchedOperations:       p.EnableBatchedOperations,
		Status:                        string(p.Status),
		ForwardTo:                     forwardText(rq, p.ForwardTo),
		CreatedAt:                     timeText(s.CreatedAt),
		UpdatedAt:                     timeText(s.UpdatedAt),
		AccessedAt:                    timeText(s.AccessedAt),
		CountDetails:                  countDetails(s.Counts),
		AutoDeleteOnIdle:              durationText(p.AutoDeleteOnIdle, true),
		EntityAvailabilityStatus:      "Available",
		ForwardDeadLetteredMessagesTo: forwardText(rq, p.ForwardDeadLetteredMessagesTo),
		UserMetadata:                  p.UserMetadata,
	}
	return h.entry(rq, subscriptionPath(s.Topic, s.Name), s.Name, s.CreatedAt, s.UpdatedAt, contentXML{Subscription: d})
}
