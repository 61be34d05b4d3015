package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

// namePattern is Microsoft's pattern for namespace, entity and rule names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$`)

// Validate checks a Config (for example one built by hand) against the
// limits described in the package documentation. Zero durations and a zero
// MaxDeliveryCount count as "the default" here. It returns every problem,
// joined.
func (c *Config) Validate() error {
	return errors.Join(c.validate(nil)...)
}

type validator struct {
	locate func(path string) (line, col int) // nil for hand-built configs
	errs   []error
}

func (v *validator) fail(path, format string, args ...any) {
	e := &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	if v.locate != nil {
		e.Line, e.Column = v.locate(path)
	}
	v.errs = append(v.errs, e)
}

// parsed reports whether zero values were written explicitly in a file
// (Parse fills defaults, so a zero there was written by the user).
func (v *validator) parsed() bool { return v.locate != nil }

func (c *Config) validate(locate func(string) (int, int)) []error {
	v := &validator{locate: locate}
	nss := c.UserConfig.Namespaces
	if len(nss) != 1 {
		v.fail("UserConfig.Namespaces", "dlqdash emulator serves exactly one namespace; found %d", len(nss))
		return v.errs
	}
	ns := nss[0]
	base := "UserConfig.Namespaces[0]"
	v.name(base+".Name", ns.Name, MaxEntityNameLength)

	// Queues and topics share one name space.
	entities := map[string]string{} // lower-case name → path of its first use
	claim := func(path, name, what string) {
		key := strings.ToLower(name)
		if prev, ok := entities[key]; ok {
			v.fail(path, "%s name %q is already used by %s", what, name, prev)
			return
		}
		entities[key] = path
	}
	for i, q := range ns.Queues {
		p := fmt.Sprintf("%s.Queues[%d]", base, i)
		if v.name(p+".Name", q.Name, MaxEntityNameLength) {
			claim(p+".Name", q.Name, "queue")
		}
	}
	for i, t := range ns.Topics {
		p := fmt.Sprintf("%s.Topics[%d]", base, i)
		if v.name(p+".Name", t.Name, MaxEntityNameLength) {
			claim(p+".Name", t.Name, "topic")
		}
	}
	forward := func(path, target, self string) {
		if target == "" {
			return
		}
		if strings.EqualFold(target, self) {
			v.fail(path, "an entity cannot forward to itself")
			return
		}
		if _, ok := entities[strings.ToLower(target)]; !ok {
			v.fail(path, "%q is not a queue or topic of this namespace", target)
		}
	}

	for i, q := range ns.Queues {
		p := fmt.Sprintf("%s.Queues[%d].Properties", base, i)
		qp := q.Properties
		v.lock(p+".LockDuration", qp.LockDuration)
		v.maxDelivery(p+".MaxDeliveryCount", qp.MaxDeliveryCount)
		v.ttl(p+".DefaultMessageTimeToLive", qp.DefaultMessageTimeToLive)
		v.dupWindow(p+".DuplicateDetectionHistoryTimeWindow", qp.DuplicateDetectionHistoryTimeWindow)
		forward(p+".ForwardTo", qp.ForwardTo, q.Name)
		forward(p+".ForwardDeadLetteredMessagesTo", qp.ForwardDeadLetteredMessagesTo, q.Name)
	}
	for i, t := range ns.Topics {
		p := fmt.Sprintf("%s.Topics[%d]", base, i)
		v.ttl(p+".Properties.DefaultMessageTimeToLive", t.Properties.DefaultMessageTimeToLive)
		v.dupWindow(p+".Properties.DuplicateDetectionHistoryTimeWindow", t.Properties.DuplicateDetectionHistoryTimeWindow)
		subs := map[string]string{}
		for j, s := range t.Subscriptions {
			sp := fmt.Sprintf("%s.Subscriptions[%d]", p, j)
			if v.name(sp+".Name", s.Name, MaxSubscriptionNameLength) {
				if prev, ok := subs[strings.ToLower(s.Name)]; ok {
					v.fail(sp+".Name", "subscription name %q is already used by %s", s.Name, prev)
				} else {
					subs[strings.ToLower(s.Name)] = sp + ".Name"
				}
			}
			pp := sp + ".Properties"
			v.lock(pp+".LockDuration", s.Properties.LockDuration)
			v.maxDelivery(pp+".MaxDeliveryCount", s.Properties.MaxDeliveryCount)
			v.ttl(pp+".DefaultMessageTimeToLive", s.Properties.DefaultMessageTimeToLive)
			forward(pp+".ForwardTo", s.Properties.ForwardTo, "")
			forward(pp+".ForwardDeadLetteredMessagesTo", s.Properties.ForwardDeadLetteredMessagesTo, "")
			rules := map[string]string{}
			for k, r := range s.Rules {
				rp := fmt.Sprintf("%s.Rules[%d]", sp, k)
				if v.name(rp+".Name", r.Name, MaxSubscriptionNameLength) {
					if prev, ok := rules[strings.ToLower(r.Name)]; ok {
						v.fail(rp+".Name", "rule name %q is already used by %s", r.Name, prev)
					} else {
						rules[strings.ToLower(r.Name)] = rp + ".Name"
					}
				}
				v.rule(rp+".Properties", r.Properties)
			}
		}
	}
	return v.errs
}

// name checks a name and reports whether it is valid.
func (v *validator) name(path, name string, maxLen int) bool {
	switch {
	case name == "":
		v.fail(path, "must not be empty")
	case len(name) > maxLen:
		v.fail(path, "%q is longer than %d characters", name, maxLen)
	case !namePattern.MatchString(name):
		v.fail(path, "%q is not a valid name: use letters, digits, '_', '-', '.' and '/', starting and ending with a letter or digit", name)
	default:
		return true
	}
	return false
}

func (v *validator) lock(path string, d Duration) {
	switch {
	case d == 0 && !v.parsed():
	case time.Duration(d) < MinLockDuration:
		v.fail(path, "%q is below the minimum lock duration %s", d, isodur.Format(MinLockDuration))
	case time.Duration(d) > MaxLockDuration:
		v.fail(path, "%q exceeds the maximum lock duration %s", d, isodur.Format(MaxLockDuration))
	}
}

func (v *validator) maxDelivery(path string, n int32) {
	if n < 1 && (n != 0 || v.parsed()) {
		v.fail(path, "must be at least 1, got %d", n)
	}
}

func (v *validator) ttl(path string, d Duration) {
	if d < 0 || (d == 0 && v.parsed()) {
		v.fail(path, "%q must be a positive duration", d)
	}
}

func (v *validator) dupWindow(path string, d Duration) {
	switch {
	case d == 0 && !v.parsed():
	case time.Duration(d) < MinDuplicateDetectionHistoryTimeWindow:
		v.fail(path, "%q is below the minimum duplicate detection window %s", d, isodur.Format(MinDuplicateDetectionHistoryTimeWindow))
	case time.Duration(d) > MaxDuplicateDetectionHistoryTimeWindow:
		v.fail(path, "%q exceeds the maximum duplicate detection window %s", d, isodur.Format(MaxDuplicateDetectionHistoryTimeWindow))
	}
}

func (v *validator) rule(path string, rp RuleProperties) {
	switch {
	case strings.EqualFold(rp.FilterType, FilterCorrelation):
		cf := rp.CorrelationFilter
		if cf == nil {
			v.fail(path+".CorrelationFilter", "required when FilterType is %q", FilterCorrelation)
		} else if cf.ContentType+cf.CorrelationID+cf.Label+cf.MessageID+cf.ReplyTo+cf.ReplyToSessionID+cf.SessionID+cf.To == "" && len(cf.Properties) == 0 {
			v.fail(path+".CorrelationFilter", "must set at least one property to match")
		}
		if rp.SQLFilter != nil {
			v.fail(path+".SqlFilter", "not allowed when FilterType is %q", FilterCorrelation)
		}
	case strings.EqualFold(rp.FilterType, FilterSQL):
		if rp.SQLFilter == nil {
			v.fail(path+".SqlFilter", "required when FilterType is %q", FilterSQL)
		} else if strings.TrimSpace(rp.SQLFilter.SQLExpression) == "" {
			v.fail(path+".SqlFilter.SqlExpression", "must not be empty")
		} else if _, err := sqlfilter.ParseFilter(rp.SQLFilter.SQLExpression, nil); err != nil {
			v.fail(path+".SqlFilter.SqlExpression", "not a valid SQL filter: %v", err)
		}
		if rp.CorrelationFilter != nil {
			v.fail(path+".CorrelationFilter", "not allowed when FilterType is %q", FilterSQL)
		}
	default:
		v.fail(path+".FilterType", "%q is not %q or %q", rp.FilterType, FilterCorrelation, FilterSQL)
	}
	if rp.Action != nil && strings.TrimSpace(rp.Action.SQLExpression) != "" {
		if _, err := sqlfilter.ParseAction(rp.Action.SQLExpression, nil); err != nil {
			v.fail(path+".Action.SqlExpression", "not a valid SQL action: %v", err)
		}
	}
}
