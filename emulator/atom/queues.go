package atom

import (
	"errors"
	"net/http"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

// Queues and topics share one name space and one path form ("/<name>"),
// so GET, PUT and DELETE on a bare path decide between them here.

func (h *handler) showQueueOrTopic(w http.ResponseWriter, rq *request, name string) error {
	if q, err := h.ns.Queue(name); err == nil {
		writeXML(w, http.StatusOK, h.queueEntry(rq, q))
		return nil
	} else if !errors.Is(err, broker.ErrNotFound) {
		return err
	}
	t, err := h.ns.Topic(name)
	if err != nil {
		return err
	}
	e, err := h.topicEntry(rq, t)
	if err != nil {
		return err
	}
	writeXML(w, http.StatusOK, e)
	return nil
}

func (h *handler) putQueueOrTopic(w http.ResponseWriter, rq *request, name string) error {
	e, err := readEntry(w, rq.r)
	if err != nil {
		return err
	}
	switch c := e.Content; {
	case c.Queue != nil:
		return h.putQueue(w, rq, name, c.Queue)
	case c.Topic != nil:
		return h.putTopic(w, rq, name, c.Topic)
	}
	return badRequest("the entry's <content> must hold a QueueDescription or a TopicDescription")
}

func (h *handler) deleteQueueOrTopic(w http.ResponseWriter, name string) error {
	err := h.ns.DeleteQueue(name)
	if errors.Is(err, broker.ErrNotFound) {
		err = h.ns.DeleteTopic(name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *handler) listQueues(w http.ResponseWriter, rq *request) error {
	skip, top, err := paging(rq.r)
	if err != nil {
		return err
	}
	var entries []*entryXML
	for _, q := range page(h.ns.Queues(), skip, top) {
		entries = append(entries, h.queueEntry(rq, q))
	}
	writeXML(w, http.StatusOK, h.feed(rq, "Queues", entries))
	return nil
}

func (h *handler) putQueue(w http.ResponseWriter, rq *request, name string, in *queueIn) error {
	update := isUpdate(rq.r)
	p := broker.DefaultQueueProperties()
	if update {
		cur, err := h.ns.Queue(name)
		if err != nil {
			return err
		}
		p = cur.Properties
	}
	if err := applyQueue(in, &p); err != nil {
		return err
	}
	var (
		q   broker.QueueInfo
		err error
	)
	if update {
		q, err = h.ns.UpdateQueue(name, p)
	} else {
		q, err = h.ns.CreateQueue(name, p)
	}
	if err != nil {
		return err
	}
	writeXML(w, putStatus(update), h.queueEntry(rq, q))
	return nil
}

// applyQueue overrides p with the elements present in the request.
func applyQueue(in *queueIn, p *broker.QueueProperties) error {
	if err := parseDuration("LockDuration", in.LockDuration, &p.LockDuration, false); err != nil {
		return err
	}
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
	if err := setInt32("MaxDeliveryCount", in.MaxDeliveryCount, &p.MaxDeliveryCount); err != nil {
		return err
	}
	if err := setInt64("MaxMessageSizeInKilobytes", in.MaxMessageSizeInKilobytes, &p.MaxMessageSizeInKilobytes); err != nil {
		return err
	}
	if err := parseStatus(in.Status, &p.Status); err != nil {
		return err
	}
	setBool(in.RequiresDuplicateDetection, &p.RequiresDuplicateDetection)
	setBool(in.RequiresSession, &p.RequiresSession)
	setBool(in.DeadLetteringOnMessageExpiration, &p.DeadLetteringOnMessageExpiration)
	setBool(in.EnableBatchedOperations, &p.EnableBatchedOperations)
	setForward(in.ForwardTo, &p.ForwardTo)
	setForward(in.ForwardDeadLetteredMessagesTo, &p.ForwardDeadLetteredMessagesTo)
	setString(in.UserMetadata, &p.UserMetadata)
	setAuthRules(in.AuthorizationRules, &p.AuthorizationRules)
	return nil
}

func (h *handler) queueEntry(rq *request, q broker.QueueInfo) *entryXML {
	p := q.Properties
	d := &queueXML{
		nsAttrs:                             descNS(),
		LockDuration:                        isodur.Format(p.LockDuration),
		MaxSizeInMegabytes:                  maxSizeText(p.MaxSizeInMegabytes, p.EnablePartitioning),
		RequiresDuplicateDetection:          p.RequiresDuplicateDetection,
		RequiresSession:                     p.RequiresSession,
		DefaultMessageTimeToLive:            durationText(p.DefaultMessageTimeToLive, true),
		DeadLetteringOnMessageExpiration:    p.DeadLetteringOnMessageExpiration,
		DuplicateDetectionHistoryTimeWindow: isodur.Format(p.DuplicateDetectionHistoryTimeWindow),
		MaxDeliveryCount:                    p.MaxDeliveryCount,
		EnableBatchedOperations:             p.EnableBatchedOperations,
		SizeInBytes:                         q.Counts.SizeInBytes,
		MessageCount:                        q.Counts.Total,
		AuthorizationRules:                  authRulesText(p.AuthorizationRules),
		Status:                              string(p.Status),
		ForwardTo:                           forwardText(rq, p.ForwardTo),
		CreatedAt:                           timeText(q.CreatedAt),
		UpdatedAt:                           timeText(q.UpdatedAt),
		AccessedAt:                          timeText(q.AccessedAt),
		SupportOrdering:                     true,
		CountDetails:                        countDetails(q.Counts),
		AutoDeleteOnIdle:                    durationText(p.AutoDeleteOnIdle, true),
		EnablePartitioning:                  p.EnablePartitioning,
		EntityAvailabilityStatus:            "Available",
		ForwardDeadLetteredMessagesTo:       forwardText(rq, p.ForwardDeadLetteredMessagesTo),
		UserMetadata:                        p.UserMetadata,
		MaxMessageSizeInKilobytes:           p.MaxMessageSizeInKilobytes,
	}
	return h.entry(rq, q.Name, q.Name, q.CreatedAt, q.UpdatedAt, contentXML{Queue: d})
}
