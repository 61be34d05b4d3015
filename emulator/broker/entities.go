package broker

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"
)

func checkStatus(s *EntityStatus) error {
	switch *s {
	case "":
		*s = StatusActive
	case StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled:
	default:
		return fmt.Errorf("status %q: %w", *s, ErrInvalidProperties)
	}
	return nil
}

func checkLock(d *time.Duration, mdc *int32) error {
	switch {
	case *d == 0:
		*d = defaultLockDuration
	case *d < 0 || *d > maxLockDuration:
		return fmt.Errorf("lock duration %v outside (0, 5m]: %w", *d, ErrInvalidProperties)
	}
	switch {
	case *mdc == 0:
		*mdc = defaultMaxDeliveryCount
	case *mdc < 0:
		return fmt.Errorf("max delivery count %d: %w", *mdc, ErrInvalidProperties)
	}
	return nil
}

func checkTTL(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("time to live %v: %w", d, ErrInvalidProperties)
	}
	return nil
}

func normalizeQueue(p *QueueProperties) error {
	if err := checkLock(&p.LockDuration, &p.MaxDeliveryCount); err != nil {
		return err
	}
	if err := checkAutoDelete(p.AutoDeleteOnIdle); err != nil {
		return err
	}
	if err := checkTTL(p.DefaultMessageTimeToLive); err != nil {
		return err
	}
	if p.DuplicateDetectionHistoryTimeWindow <= 0 {
		p.DuplicateDetectionHistoryTimeWindow = defaultDupWindow
	}
	if p.MaxSizeInMegabytes <= 0 {
		p.MaxSizeInMegabytes = defaultMaxSizeMB
	}
	if p.MaxMessageSizeInKilobytes <= 0 {
		p.MaxMessageSizeInKilobytes = defaultMaxMessageSizeKB
	}
	var err error
	if p.AuthorizationRules, err = normalizeRules(p.AuthorizationRules); err != nil {
		return err
	}
	return checkStatus(&p.Status)
}

func normalizeTopic(p *TopicProperties) error {
	if err := checkTTL(p.DefaultMessageTimeToLive); err != nil {
		return err
	}
	if err := checkAutoDelete(p.AutoDeleteOnIdle); err != nil {
		return err
	}
	if p.DuplicateDetectionHistoryTimeWindow <= 0 {
		p.DuplicateDetectionHistoryTimeWindow = defaultDupWindow
	}
	if p.MaxSizeInMegabytes <= 0 {
		p.MaxSizeInMegabytes = defaultMaxSizeMB
	}
	if p.MaxMessageSizeInKilobytes <= 0 {
		p.MaxMessageSizeInKilobytes = defaultMaxMessageSizeKB
	}
	var err error
	if p.AuthorizationRules, err = normalizeRules(p.AuthorizationRules); err != nil {
		return err
	}
	return checkStatus(&p.Status)
}

// normalizeRules validates an entity's authorization rules and returns a
// copy the caller cannot change, with a key generated for each one left
// empty (as the service does). Names are unique (case-insensitive), rights
// are Manage, Send and Listen, and Manage needs the other two.
func normalizeRules(in []AuthorizationRule) ([]AuthorizationRule, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := cloneRules(in)
	seen := map[string]bool{}
	for i := range out {
		r := &out[i]
		if r.KeyName == "" {
			return nil, fmt.Errorf("authorization rule %d: a KeyName is required: %w", i+1, ErrInvalidProperties)
		}
		if seen[strings.ToLower(r.KeyName)] {
			return nil, fmt.Errorf("authorization rule %q: the KeyName is used twice: %w", r.KeyName, ErrInvalidProperties)
		}
		seen[strings.ToLower(r.KeyName)] = true
		if len(r.Rights) == 0 {
			return nil, fmt.Errorf("authorization rule %q: at least one of the rights Manage, Send, Listen is required: %w", r.KeyName, ErrInvalidProperties)
		}
		for _, right := range r.Rights {
			if right != "Manage" && right != "Send" && right != "Listen" {
				return nil, fmt.Errorf("authorization rule %q: right %q is not one of Manage, Send, Listen: %w", r.KeyName, right, ErrInvalidProperties)
			}
		}
		if slices.Contains(r.Rights, "Manage") && (!slices.Contains(r.Rights, "Send") || !slices.Contains(r.Rights, "Listen")) {
			return nil, fmt.Errorf("authorization rule %q: the Manage right requires the Send and Listen rights: %w", r.KeyName, ErrInvalidProperties)
		}
		if r.PrimaryKey == "" {
			r.PrimaryKey = newSASKey()
		}
		if r.SecondaryKey == "" {
			r.SecondaryKey = newSASKey()
		}
	}
	return out, nil
}

func cloneRules(in []AuthorizationRule) []AuthorizationRule {
	if in == nil {
		return nil
	}
	out := slices.Clone(in)
	for i := range out {
		out[i].Rights = slices.Clone(out[i].Rights)
	}
	return out
}

// newSASKey returns a random 256-bit key in base64, the form of the keys
// the service generates.
func newSASKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func normalizeSubscription(p *SubscriptionProperties) error {
	if err := checkLock(&p.LockDuration, &p.MaxDeliveryCount); err != nil {
		return err
	}
	if err := checkAutoDelete(p.AutoDeleteOnIdle); err != nil {
		return err
	}
	if err := checkTTL(p.DefaultMessageTimeToLive); err != nil {
		return err
	}
	return checkStatus(&p.Status)
}

func checkName(kind, name string) error {
	if name == "" || strings.TrimSpace(name) != name || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "$") {
		return fmt.Errorf("%s name %q: %w", kind, name, ErrInvalidProperties)
	}
	return nil
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// CreateQueue creates a queue. ErrAlreadyExists when a queue or topic of
// that name (case-insensitive) exists.
func (ns *Namespace) CreateQueue(name string, p QueueProperties) (QueueInfo, error) {
	if err := checkName("queue", name); err != nil {
		return QueueInfo{}, err
	}
	if err := normalizeQueue(&p); err != nil {
		return QueueInfo{}, err
	}
	key := strings.ToLower(name)
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if _, ok := ns.queues[key]; ok {
		return QueueInfo{}, fmt.Errorf("queue %q: %w", name, ErrAlreadyExists)
	}
	if _, ok := ns.topics[key]; ok {
		return QueueInfo{}, fmt.Errorf("queue %q: a topic has that name: %w", name, ErrAlreadyExists)
	}
	if err := ns.checkQueueForward(name, p); err != nil {
		return QueueInfo{}, err
	}
	s := newStore(ns, KindQueue, name, ns.nowNano())
	s.qp = p
	s.session = p.RequiresSession
	ns.queues[key] = s
	ns.log.Debug("queue created", "entity", name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueInfo(), nil
}

func (s *store) queueInfo() QueueInfo {
	p := s.qp
	p.AuthorizationRules = cloneRules(p.AuthorizationRules)
	return QueueInfo{Name: s.name, Properties: p, CreatedAt: unixTime(s.created), UpdatedAt: unixTime(s.updated),
		AccessedAt: accessedTime(s.accessed.Load()), Counts: s.counts()}
}

// accessedTime is the zero time for an entity never accessed (0), as the
// service reports a queue or topic nobody has sent to or received from.
func accessedTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return unixTime(ns)
}

func (s *store) subscriptionInfo() SubscriptionInfo {
	return SubscriptionInfo{Topic: s.topic.name, Name: s.subName, Properties: s.sp, CreatedAt: unixTime(s.created),
		UpdatedAt: unixTime(s.updated), AccessedAt: accessedTime(s.accessed.Load()), Counts: s.counts()}
}

func (ns *Namespace) queue(name string) (*store, error) {
	ns.mu.RLock()
	s, ok := ns.queues[strings.ToLower(name)]
	ns.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", name, ErrNotFound)
	}
	return s, nil
}

// UpdateQueue replaces a queue's properties. RequiresSession cannot change.
func (ns *Namespace) UpdateQueue(name string, p QueueProperties) (QueueInfo, error) {
	if err := normalizeQueue(&p); err != nil {
		return QueueInfo{}, err
	}
	s, err := ns.queue(name)
	if err != nil {
		return QueueInfo{}, err
	}
	ns.mu.RLock()
	err = ns.checkQueueForward(s.name, p)
	ns.mu.RUnlock()
	if err != nil {
		return QueueInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return QueueInfo{}, fmt.Errorf("queue %q: %w", name, ErrNotFound)
	}
	// These refusals start with the service's own sentence (capitalised,
	// unlike other errors here) because the admin API passes them on and
	// clients match on that text.
	if p.RequiresSession != s.session {
		return QueueInfo{}, fmt.Errorf("The value for the RequiresSession property of an existing Queue cannot be changed (queue %q): %w", name, ErrInvalidProperties)
	}
	if p.EnablePartitioning != s.qp.EnablePartitioning {
		return QueueInfo{}, fmt.Errorf("Partitioning cannot be changed for Queue. Queue %q was created with EnablePartitioning %t: %w", name, s.qp.EnablePartitioning, ErrInvalidProperties)
	}
	s.qp = p
	s.updated = ns.nowNano()
	s.touch(s.updated)
	s.main.notifyAll()
	s.dlq.notifyAll()
	s.wakeWaiters()
	return s.queueInfo(), nil
}

// DeleteQueue deletes a queue and its messages; its consumers end with
// ErrEntityDeleted and its locks are lost.
func (ns *Namespace) DeleteQueue(name string) error {
	key := strings.ToLower(name)
	ns.mu.Lock()
	s, ok := ns.queues[key]
	if ok {
		delete(ns.queues, key)
	}
	ns.mu.Unlock()
	if !ok {
		return fmt.Errorf("queue %q: %w", name, ErrNotFound)
	}
	s.mu.Lock()
	s.destroy()
	s.mu.Unlock()
	ns.dropFaults(key)
	ns.log.Debug("queue deleted", "entity", s.name)
	return nil
}

// Queue returns one queue.
func (ns *Namespace) Queue(name string) (QueueInfo, error) {
	s, err := ns.queue(name)
	if err != nil {
		return QueueInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueInfo(), nil
}

// Queues returns every queue, sorted by name (case-insensitive).
func (ns *Namespace) Queues() []QueueInfo {
	ns.mu.RLock()
	stores := make([]*store, 0, len(ns.queues))
	for _, s := range ns.queues {
		stores = append(stores, s)
	}
	ns.mu.RUnlock()
	out := make([]QueueInfo, 0, len(stores))
	for _, s := range stores {
		s.mu.Lock()
		out = append(out, s.queueInfo())
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

// CreateTopic creates a topic. ErrAlreadyExists when a queue or topic of
// that name exists.
func (ns *Namespace) CreateTopic(name string, p TopicProperties) (TopicInfo, error) {
	if err := checkName("topic", name); err != nil {
		return TopicInfo{}, err
	}
	if err := normalizeTopic(&p); err != nil {
		return TopicInfo{}, err
	}
	key := strings.ToLower(name)
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if _, ok := ns.topics[key]; ok {
		return TopicInfo{}, fmt.Errorf("topic %q: %w", name, ErrAlreadyExists)
	}
	if _, ok := ns.queues[key]; ok {
		return TopicInfo{}, fmt.Errorf("topic %q: a queue has that name: %w", name, ErrAlreadyExists)
	}
	now := ns.nowNano()
	t := newTopic(ns, name, p, now)
	ns.topics[key] = t
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info(), nil
}

// info describes t. Caller holds t.mu.
func (t *topic) info() TopicInfo {
	p := t.props
	p.AuthorizationRules = cloneRules(p.AuthorizationRules)
	ti := TopicInfo{Name: t.name, Properties: p, CreatedAt: unixTime(t.created), UpdatedAt: unixTime(t.updated),
		AccessedAt: accessedTime(t.accessed.Load()), SubscriptionCount: len(t.subs)}
	for _, s := range t.subs {
		s.mu.Lock()
		c := s.counts()
		s.mu.Unlock()
		ti.Counts.Active += c.Active
		ti.Counts.DeadLetter += c.DeadLetter
		ti.Counts.TransferDeadLetter += c.TransferDeadLetter
		ti.Counts.Scheduled += c.Scheduled
		ti.Counts.Transfer += c.Transfer
		ti.Counts.Total += c.Total
		ti.Counts.SizeInBytes += c.SizeInBytes
	}
	// Scheduled messages are the topic's own until they are due.
	ti.Counts.Scheduled += int64(len(t.schedBySeq))
	ti.Counts.Total += int64(len(t.schedBySeq))
	ti.Counts.SizeInBytes += t.schedBytes
	return ti
}

func (ns *Namespace) topic(name string) (*topic, error) {
	ns.mu.RLock()
	t, ok := ns.topics[strings.ToLower(name)]
	ns.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("topic %q: %w", name, ErrNotFound)
	}
	return t, nil
}

// UpdateTopic replaces a topic's properties.
func (ns *Namespace) UpdateTopic(name string, p TopicProperties) (TopicInfo, error) {
	if err := normalizeTopic(&p); err != nil {
		return TopicInfo{}, err
	}
	t, err := ns.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted {
		return TopicInfo{}, fmt.Errorf("topic %q: %w", name, ErrNotFound)
	}
	if p.EnablePartitioning != t.props.EnablePartitioning {
		return TopicInfo{}, fmt.Errorf("Partitioning cannot be changed for Topic. Topic %q was created with EnablePartitioning %t: %w", name, t.props.EnablePartitioning, ErrInvalidProperties)
	}
	t.props = p
	t.updated = ns.nowNano()
	touch(&t.active, t.updated)
	for _, s := range t.subs {
		s.mu.Lock()
		s.topicTTL = p.DefaultMessageTimeToLive
		s.mu.Unlock()
	}
	return t.info(), nil
}

// DeleteTopic deletes a topic and its subscriptions.
func (ns *Namespace) DeleteTopic(name string) error {
	key := strings.ToLower(name)
	ns.mu.Lock()
	t, ok := ns.topics[key]
	if ok {
		delete(ns.topics, key)
	}
	ns.mu.Unlock()
	if !ok {
		return fmt.Errorf("topic %q: %w", name, ErrNotFound)
	}
	ns.dropFaults(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleted = true
	for _, s := range t.subs {
		s.mu.Lock()
		s.destroy()
		s.mu.Unlock()
	}
	return nil
}

// Topic returns one topic.
func (ns *Namespace) Topic(name string) (TopicInfo, error) {
	t, err := ns.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info(), nil
}

// Topics returns every topic, sorted by name (case-insensitive).
func (ns *Namespace) Topics() []TopicInfo {
	ns.mu.RLock()
	ts := make([]*topic, 0, len(ns.topics))
	for _, t := range ns.topics {
		ts = append(ts, t)
	}
	ns.mu.RUnlock()
	out := make([]TopicInfo, 0, len(ts))
	for _, t := range ts {
		t.mu.Lock()
		out = append(out, t.info())
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b TopicInfo) int { return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

// CreateSubscription creates a subscription. Without rules it gets the
// "$Default" true filter.
func (ns *Namespace) CreateSubscription(topicName, name string, p SubscriptionProperties, rules ...Rule) (SubscriptionInfo, error) {
	if err := checkName("subscription", name); err != nil {
		return SubscriptionInfo{}, err
	}
	if strings.Contains(name, "/") {
		return SubscriptionInfo{}, fmt.Errorf("subscription name %q: %w", name, ErrInvalidProperties)
	}
	if err := normalizeSubscription(&p); err != nil {
		return SubscriptionInfo{}, err
	}
	now := ns.nowNano()
	if len(rules) == 0 {
		rules = []Rule{{Name: "$Default", Kind: FilterTrue}}
	}
	rs := make([]Rule, 0, len(rules))
	for _, r := range rules {
		r, err := normalizeRule(r, now)
		if err != nil {
			return SubscriptionInfo{}, err
		}
		if slices.ContainsFunc(rs, func(x Rule) bool { return strings.EqualFold(x.Name, r.Name) }) {
			return SubscriptionInfo{}, fmt.Errorf("rule %q: %w", r.Name, ErrAlreadyExists)
		}
		rs = append(rs, r)
	}
	t, err := ns.topic(topicName)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	if err := ns.checkSubscriptionForward(p); err != nil {
		return SubscriptionInfo{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted {
		return SubscriptionInfo{}, fmt.Errorf("topic %q: %w", topicName, ErrNotFound)
	}
	key := strings.ToLower(name)
	if _, ok := t.subs[key]; ok {
		return SubscriptionInfo{}, fmt.Errorf("subscription %q of %q: %w", name, t.name, ErrAlreadyExists)
	}
	s := newStore(ns, KindSubscription, t.name+"/Subscriptions/"+name, now)
	s.subName = name
	s.topic = t
	s.sp = p
	s.session = p.RequiresSession
	s.topicTTL = t.props.DefaultMessageTimeToLive
	s.rules = rs
	t.subs[key] = s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subscriptionInfo(), nil
}

// subscription finds a subscription; the caller must lock t.mu for rules.
func (ns *Namespace) subscription(topicName, name string) (*topic, *store, error) {
	t, err := ns.topic(topicName)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	s, ok := t.subs[strings.ToLower(name)]
	t.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("subscription %q of %q: %w", name, topicName, ErrNotFound)
	}
	return t, s, nil
}

// UpdateSubscription replaces a subscription's properties.
func (ns *Namespace) UpdateSubscription(topicName, name string, p SubscriptionProperties) (SubscriptionInfo, error) {
	if err := normalizeSubscription(&p); err != nil {
		return SubscriptionInfo{}, err
	}
	_, s, err := ns.subscription(topicName, name)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	if err := ns.checkSubscriptionForward(p); err != nil {
		return SubscriptionInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return SubscriptionInfo{}, fmt.Errorf("subscription %q of %q: %w", name, topicName, ErrNotFound)
	}
	if p.RequiresSession != s.session {
		return SubscriptionInfo{}, fmt.Errorf("The value for the RequiresSession property of an existing Subscription cannot be changed (subscription %q): %w", name, ErrInvalidProperties)
	}
	s.sp = p
	s.updated = ns.nowNano()
	s.touch(s.updated)
	s.main.notifyAll()
	s.dlq.notifyAll()
	s.wakeWaiters()
	return s.subscriptionInfo(), nil
}

// DeleteSubscription deletes a subscription and its messages.
func (ns *Namespace) DeleteSubscription(topicName, name string) error {
	t, err := ns.topic(topicName)
	if err != nil {
		return err
	}
	key := strings.ToLower(name)
	t.mu.Lock()
	s, ok := t.subs[key]
	if ok {
		delete(t.subs, key)
	}
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("subscription %q of %q: %w", name, topicName, ErrNotFound)
	}
	s.mu.Lock()
	s.destroy()
	s.mu.Unlock()
	ns.dropFaults(strings.ToLower(s.name)) // s.name is topic/Subscriptions/sub
	return nil
}

// Subscription returns one subscription.
func (ns *Namespace) Subscription(topicName, name string) (SubscriptionInfo, error) {
	_, s, err := ns.subscription(topicName, name)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subscriptionInfo(), nil
}

// Subscriptions returns a topic's subscriptions sorted by name.
func (ns *Namespace) Subscriptions(topicName string) ([]SubscriptionInfo, error) {
	t, err := ns.topic(topicName)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	stores := make([]*store, 0, len(t.subs))
	for _, s := range t.subs {
		stores = append(stores, s)
	}
	t.mu.Unlock()
	out := make([]SubscriptionInfo, 0, len(stores))
	for _, s := range stores {
		s.mu.Lock()
		out = append(out, s.subscriptionInfo())
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b SubscriptionInfo) int { return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out, nil
}

// checkQueueForward validates a queue's forwarding targets. Caller holds
// ns.mu.
func (ns *Namespace) checkQueueForward(name string, p QueueProperties) error {
	if err := ns.checkForward("ForwardTo", p.ForwardTo, name); err != nil {
		return fmt.Errorf("queue %q: %w", name, err)
	}
	if err := ns.checkForward("ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo, name); err != nil {
		return fmt.Errorf("queue %q: %w", name, err)
	}
	return nil
}

// checkSubscriptionForward validates a subscription's forwarding targets.
func (ns *Namespace) checkSubscriptionForward(p SubscriptionProperties) error {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if err := ns.checkForward("ForwardTo", p.ForwardTo, ""); err != nil {
		return err
	}
	return ns.checkForward("ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo, "")
}
