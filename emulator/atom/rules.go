package atom

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

// compatibilityLevel is what the service reports for SQL filters and actions.
const compatibilityLevel = 20

func rulePath(topic, sub, rule string) string { return subscriptionPath(topic, sub) + "/Rules/" + rule }

func (h *handler) listRules(w http.ResponseWriter, rq *request, topic, sub string) error {
	skip, top, err := paging(rq.r)
	if err != nil {
		return err
	}
	rules, err := h.ns.Rules(topic, sub)
	if err != nil {
		return err
	}
	var entries []*entryXML
	for _, r := range page(rules, skip, top) {
		entries = append(entries, h.ruleEntry(rq, topic, sub, r))
	}
	writeXML(w, http.StatusOK, h.feed(rq, "Rules", entries))
	return nil
}

func (h *handler) showRule(w http.ResponseWriter, rq *request, topic, sub, name string) error {
	r, err := h.ns.Rule(topic, sub, name)
	if err != nil {
		return err
	}
	writeXML(w, http.StatusOK, h.ruleEntry(rq, topic, sub, r))
	return nil
}

func (h *handler) putRule(w http.ResponseWriter, rq *request, topic, sub, name string) error {
	e, err := readEntry(w, rq.r)
	if err != nil {
		return err
	}
	if e.Content.Rule == nil {
		return badRequest("the entry's <content> must hold a RuleDescription")
	}
	r, err := ruleFromXML(e.Content.Rule, name)
	if err != nil {
		return err
	}
	if name != "" {
		r.Name = name // the path names the rule, whatever the body says
	} else if r.Name == "" {
		r.Name = "$Default"
	}
	update := isUpdate(rq.r)
	if update {
		r, err = h.ns.UpdateRule(topic, sub, r)
	} else {
		r, err = h.ns.CreateRule(topic, sub, r)
	}
	if err != nil {
		return err
	}
	writeXML(w, putStatus(update), h.ruleEntry(rq, topic, sub, r))
	return nil
}

func (h *handler) deleteRule(w http.ResponseWriter, topic, sub, name string) error {
	if err := h.ns.DeleteRule(topic, sub, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// ruleFromXML converts a RuleDescription (or DefaultRuleDescription). A
// missing filter is the true filter, as in the service.
func ruleFromXML(in *ruleIn, name string) (broker.Rule, error) {
	r := broker.Rule{Name: name, Kind: broker.FilterTrue}
	if in.Name != nil && strings.TrimSpace(*in.Name) != "" {
		r.Name = strings.TrimSpace(*in.Name)
	}
	if f := in.Filter; f != nil {
		typ := xsiType(f.Attrs)
		switch typ {
		case "TrueFilter":
			r.Kind = broker.FilterTrue
		case "FalseFilter":
			r.Kind = broker.FilterFalse
		case "SqlFilter":
			if f.SQLExpression == nil || strings.TrimSpace(*f.SQLExpression) == "" {
				return r, badRequest("Filter: a SqlFilter needs a SqlExpression")
			}
			r.Kind, r.SQLExpression = broker.FilterSQL, *f.SQLExpression
			if f.Parameters != nil {
				params, err := propertiesFromXML(f.Parameters, "Filter parameter")
				if err != nil {
					return r, err
				}
				r.Parameters = params
			}
			if _, err := sqlfilter.ParseFilter(r.SQLExpression, r.Parameters); err != nil {
				return r, sqlError(err)
			}
		case "CorrelationFilter":
			c := &broker.CorrelationFilter{}
			setString(f.CorrelationID, &c.CorrelationID)
			setString(f.MessageID, &c.MessageID)
			setString(f.To, &c.To)
			setString(f.ReplyTo, &c.ReplyTo)
			setString(f.Label, &c.Subject)
			setString(f.SessionID, &c.SessionID)
			setString(f.ReplyToSessionID, &c.ReplyToSessionID)
			setString(f.ContentType, &c.ContentType)
			if f.Properties != nil {
				props, err := propertiesFromXML(f.Properties, "Filter property")
				if err != nil {
					return r, err
				}
				c.Properties = props
			}
			r.Kind, r.Correlation = broker.FilterCorrelation, c
		case "":
			return r, badRequest("Filter: the i:type attribute is missing (TrueFilter, FalseFilter, SqlFilter or CorrelationFilter)")
		default:
			return r, badRequest("Filter: unsupported filter type %q (want TrueFilter, FalseFilter, SqlFilter or CorrelationFilter)", typ)
		}
	}
	if a := in.Action; a != nil {
		switch typ := xsiType(a.Attrs); typ {
		case "", "EmptyRuleAction":
		case "SqlRuleAction":
			if a.SQLExpression != nil {
				r.Action = *a.SQLExpression
			}
			if a.Parameters != nil {
				params, err := propertiesFromXML(a.Parameters, "Action parameter")
				if err != nil {
					return r, err
				}
				r.ActionParameters = params
			}
			if strings.TrimSpace(r.Action) != "" {
				if _, err := sqlfilter.ParseAction(r.Action, r.ActionParameters); err != nil {
					return r, sqlError(err)
				}
			}
		default:
			return r, badRequest("Action: unsupported action type %q (want EmptyRuleAction or SqlRuleAction)", typ)
		}
	}
	return r, nil
}

// sqlError is the 400 for an expression the SQL language refuses, worded
// as Azure words it (with the line, column and token at fault).
func sqlError(err error) error {
	var se *sqlfilter.SyntaxError
	if errors.As(err, &se) {
		return badRequest("%s", se.Azure())
	}
	return badRequest("%s", err.Error())
}

// propertiesFromXML reads KeyValueOfstringanyType items, typed by i:type;
// what names them in errors ("Filter property").
func propertiesFromXML(kvs *kvsIn, what string) (map[string]any, error) {
	props := make(map[string]any, len(kvs.Items))
	for _, kv := range kvs.Items {
		text := kv.Value.Text
		var (
			v   any
			err error
		)
		switch typ := xsiType(kv.Value.Attrs); typ {
		case "string", "":
			v = text
		case "boolean":
			v, err = strconv.ParseBool(strings.TrimSpace(text))
		case "int", "long", "short", "byte", "unsignedInt", "unsignedShort", "unsignedByte":
			v, err = strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		case "double", "float", "decimal":
			v, err = strconv.ParseFloat(strings.TrimSpace(text), 64)
		case "dateTime":
			var t time.Time
			t, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(text))
			v = t.UTC()
		case "duration": // a TimeSpan parameter, as the .NET SDK writes one
			v, err = isodur.Parse(strings.TrimSpace(text))
		default:
			return nil, badRequest("%s %q: unsupported value type %q", what, kv.Key, typ)
		}
		if err != nil {
			return nil, badRequest("%s %q: %q is not a valid %s", what, kv.Key, text, xsiType(kv.Value.Attrs))
		}
		props[kv.Key] = v
	}
	return props, nil
}

func (h *handler) ruleEntry(rq *request, topic, sub string, r broker.Rule) *entryXML {
	d := &ruleXML{
		nsAttrs:   descNS(),
		Filter:    filterToXML(r),
		Action:    actionXML{Type: "EmptyRuleAction"},
		CreatedAt: timeText(r.CreatedAt),
		Name:      r.Name,
	}
	if r.Action != "" {
		d.Action = actionXML{Type: "SqlRuleAction", SQLExpression: r.Action, CompatibilityLevel: compatibilityLevel}
		if len(r.ActionParameters) > 0 {
			d.Action.Parameters = propertiesToXML(r.ActionParameters)
		}
	}
	return h.entry(rq, rulePath(topic, sub, r.Name), r.Name, r.CreatedAt, r.CreatedAt, contentXML{Rule: d})
}

func filterToXML(r broker.Rule) filterXML {
	switch r.Kind {
	case broker.FilterFalse:
		return filterXML{Type: "FalseFilter", SQLExpression: "1=0", CompatibilityLevel: compatibilityLevel}
	case broker.FilterSQL:
		f := filterXML{Type: "SqlFilter", SQLExpression: r.SQLExpression, CompatibilityLevel: compatibilityLevel}
		if len(r.Parameters) > 0 {
			f.Parameters = propertiesToXML(r.Parameters)
		}
		return f
	case broker.FilterCorrelation:
		f := filterXML{Type: "CorrelationFilter"}
		if c := r.Correlation; c != nil {
			f.CorrelationID, f.MessageID, f.To, f.ReplyTo = c.CorrelationID, c.MessageID, c.To, c.ReplyTo
			f.Label, f.SessionID, f.ReplyToSessionID, f.ContentType = c.Subject, c.SessionID, c.ReplyToSessionID, c.ContentType
			if len(c.Properties) > 0 {
				f.Properties = propertiesToXML(c.Properties)
			}
		}
		return f
	}
	return filterXML{Type: "TrueFilter", SQLExpression: "1=1", CompatibilityLevel: compatibilityLevel}
}

// propertiesToXML writes values with the XML Schema types the SDKs read
// (string, boolean, int, double, dateTime), keys sorted for stable output.
func propertiesToXML(props map[string]any) *kvsXML {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := &kvsXML{}
	for _, k := range keys {
		typ, text := "string", ""
		switch v := props[k].(type) {
		case string:
			text = v
		case bool:
			typ, text = "boolean", strconv.FormatBool(v)
		case int:
			typ, text = "int", strconv.Itoa(v)
		case int8, int16, int32, int64, uint8, uint16, uint32:
			typ, text = "int", fmt.Sprint(v)
		case uint64:
			typ, text = "int", strconv.FormatUint(v, 10)
		case float32:
			typ, text = "double", strconv.FormatFloat(float64(v), 'g', -1, 32)
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				text = strconv.FormatFloat(v, 'g', -1, 64)
				break
			}
			typ, text = "double", strconv.FormatFloat(v, 'g', -1, 64)
		case time.Time:
			typ, text = "dateTime", v.UTC().Format(time.RFC3339Nano)
		case time.Duration:
			typ, text = "duration", isodur.Format(v)
		default:
			text = fmt.Sprint(v)
		}
		out.Items = append(out.Items, kvXML{Key: k, Value: kvValueXML{Type: "d6p1:" + typ, Xmlns: nsSchema, Text: text}})
	}
	return out
}
