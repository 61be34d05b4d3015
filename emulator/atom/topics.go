package atom

import (
	"net/http"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

func (h *handler) listTopics(w http.ResponseWriter, rq *request) error {
	skip, top, err := paging(rq.r)
	if err != nil {
		return err
	}
	var entries []*entryXML
	for _, t := range page(h.ns.Topics(), skip, top) {
		e, err := h.topicEntry(rq, t)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	writeXML(w, http.StatusOK, h.feed(rq, "Topics", entries))
	return nil
}

func (h *handler) putTopic(w http.ResponseWriter, rq *request, name string, in *topicIn) error {
	update := isUpdate(rq.r)
	p := broker.DefaultTopicProperties()
	if update {
		cur, err := h.ns.Topic(name)
		if err != nil {
			return err
		}
		p = cur.Properties
	}
	if err := applyTopic(in, &p); err != nil {
		return err
	}
	var (
		t   broker.TopicInfo
		err error
	)
	if update {
		t, err = h.ns.UpdateTopic(name, p)
	} else {
		t, err = h.ns.CreateTopic(name, p)
	}
	if err != nil {
		return err
	}
	e, err := h.topicEntry(rq, t)
	if err != nil {
		return err
	}
	writeXML(w, putStatus(update), e)
	return nil
}

func applyTopic(in *topicIn, p *broker.TopicProperties) error {
	if err := parseDuration("DefaultMessageTimeToLive", in.DefaultMessageTimeToLive, &p.DefaultMessageTimeToLive, true); err != nil {
		return err
	}
	if err := parseDuration("DuplicateDetectionHistoryTimeWindow", in.DuplicateDetectionHistoryTimeWindow, &p.DuplicateDetectionHistoryTimeWindow, false); err != nil {
		return err
	}
	if err := parseDuration("AutoDeleteOnIdle", in.AutoDeleteOnIdle, &p.AutoDeleteOnIdle, true); err != nil {
		return err
	}
	setBool(in.EnablePartitioning, &p.EnablePartitioning)
	if err := setMaxSize(in.MaxSizeInMegabytes, p.EnablePartitioning, &p.MaxSizeInMegabytes); err != nil {
		return err
	}
	if err := setInt64("MaxMessageSizeInKilobytes", in.MaxMessageSizeInKilobytes, &p.MaxMessageSizeInKilobytes); err != nil {
		return err
	}
	if err := parseStatus(in.Status, &p.Status); err != nil {
		return err
	}
	setBool(in.RequiresDuplicateDetection, &p.RequiresDuplicateDetection)
	setBool(in.EnableBatchedOperations, &p.EnableBatchedOperations)
	setBool(in.SupportOrdering, &p.SupportOrdering)
	setString(in.UserMetadata, &p.UserMetadata)
	setAuthRules(in.AuthorizationRules, &p.AuthorizationRules)
	return nil
}

// topicEntry describes a topic, counting its subscriptions' filters the way
// the service does: true, false and SQL filters are SQL filters.
func (h *handler) topicEntry(rq *request, t broker.TopicInfo) (*entryXML, error) {
	var sqlFilters, corrFilters int64
	subs, err := h.ns.Subscriptions(t.Name)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		rules, err := h.ns.Rules(t.Name, s.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		for _, r := range rules {
			if r.Kind == broker.FilterCorrelation {
				corrFilters++
			} else {
				sqlFilters++
			}
		}
	}
	p := t.Properties
	d := &topicXML{
		nsAttrs:                             descNS(),
		DefaultMessageTimeToLive:            durationText(p.DefaultMessageTimeToLive, true),
		MaxSizeInMegabytes:                  maxSizeText(p.MaxSizeInMegabytes, p.EnablePartitioning),
		RequiresDuplicateDetection:          p.RequiresDuplicateDetection,
		DuplicateDetectionHistoryTimeWindow: isodur.Format(p.DuplicateDetectionHistoryTimeWindow),
		EnableBatchedOperations:             p.EnableBatchedOperations,
		SizeInBytes:                         t.Counts.SizeInBytes,
		AuthorizationRules:                  authRulesText(p.AuthorizationRules),
		Status:                              string(p.Status),
		CreatedAt:                           timeText(t.CreatedAt),
		UpdatedAt:                           timeText(t.UpdatedAt),
		AccessedAt:                          timeText(t.AccessedAt),
		SupportOrdering:                     p.SupportOrdering,
		CountDetails:                        countDetails(t.Counts),
		SubscriptionCount:                   clamp32(int64(t.SubscriptionCount)),
		AutoDeleteOnIdle:                    durationText(p.AutoDeleteOnIdle, true),
		EnablePartitioning:                  p.EnablePartitioning,
		EntityAvailabilityStatus:            "Available",
		UserMetadata:                        p.UserMetadata,
		MaxMessageSizeInKilobytes:           p.MaxMessageSizeInKilobytes,
		SQLFilterCount:                      clamp32(sqlFilters),
		CorrelationFilterCount:              clamp32(corrFilters),
	}
	return h.entry(rq, t.Name, t.Name, t.CreatedAt, t.UpdatedAt, contentXML{Topic: d}), nil
}
