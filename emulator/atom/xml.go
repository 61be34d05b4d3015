package atom

import "encoding/xml"

// XML namespaces of the ATOM management protocol.
const (
	nsAtom     = "http://www.w3.org/2005/Atom"
	nsConnect  = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsInstance = "http://www.w3.org/2001/XMLSchema-instance"
	nsCounts   = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
	nsSchema   = "http://www.w3.org/2001/XMLSchema"
)

// ---- responses ----
//
// Element order follows what Service Bus sends, because some clients (.NET's
// DataContract-based ones) are order-sensitive. Prefixed names ("i:type",
// "d2p1:...") are written literally, with the prefix declared on an ancestor,
// exactly as the service does.

type feedXML struct {
	XMLName xml.Name    `xml:"feed"`
	Xmlns   string      `xml:"xmlns,attr"`
	Title   textXML     `xml:"title"`
	ID      string      `xml:"id"`
	Updated string      `xml:"updated"`
	Link    linkXML     `xml:"link"`
	Entries []*entryXML `xml:"entry"`
}

type entryXML struct {
	XMLName   xml.Name   `xml:"entry"`
	Xmlns     string     `xml:"xmlns,attr,omitempty"` // only on a top-level entry
	ID        string     `xml:"id"`
	Title     textXML    `xml:"title"`
	Published string     `xml:"published,omitempty"`
	Updated   string     `xml:"updated"`
	Author    authorXML  `xml:"author"`
	Link      linkXML    `xml:"link"`
	Content   contentXML `xml:"content"`
}

type textXML struct {
	Type string `xml:"type,attr"`
	Text string `xml:",chardata"`
}

type linkXML struct {
	Rel  string `xml:"rel,attr"`
	Href string `xml:"href,attr"`
}

type authorXML struct {
	Name string `xml:"name"`
}

type contentXML struct {
	Type         string           `xml:"type,attr"`
	Queue        *queueXML        `xml:"QueueDescription"`
	Topic        *topicXML        `xml:"TopicDescription"`
	Subscription *subscriptionXML `xml:"SubscriptionDescription"`
	Rule         *ruleXML         `xml:"RuleDescription"`
	Namespace    *namespaceXML    `xml:"NamespaceInfo"`
}

// nsAttrs declares the two namespaces every description element carries.
type nsAttrs struct {
	Xmlns  string `xml:"xmlns,attr"`
	XmlnsI string `xml:"xmlns:i,attr"`
}

func descNS() nsAttrs { return nsAttrs{Xmlns: nsConnect, XmlnsI: nsInstance} }

type countDetailsXML struct {
	XmlnsD2P1          string `xml:"xmlns:d2p1,attr"`
	Active             int32  `xml:"d2p1:ActiveMessageCount"`
	DeadLetter         int32  `xml:"d2p1:DeadLetterMessageCount"`
	Scheduled          int32  `xml:"d2p1:ScheduledMessageCount"`
	Transfer           int32  `xml:"d2p1:TransferMessageCount"`
	TransferDeadLetter int32  `xml:"d2p1:TransferDeadLetterMessageCount"`
}

// authRulesXML is an entity's <AuthorizationRules>, written (empty or not)
// on every queue and topic as the service does.
type authRulesXML struct {
	Rules []authRuleXML `xml:"AuthorizationRule"`
}

type authRuleXML struct {
	Type         string   `xml:"i:type,attr"`
	ClaimType    string   `xml:"ClaimType"`
	ClaimValue   string   `xml:"ClaimValue"`
	Rights       []string `xml:"Rights>AccessRights"`
	KeyName      string   `xml:"KeyName"`
	CreatedTime  string   `xml:"CreatedTime,omitempty"`
	ModifiedTime string   `xml:"ModifiedTime,omitempty"`
	PrimaryKey   string   `xml:"PrimaryKey"`
	SecondaryKey string   `xml:"SecondaryKey"`
}

type queueXML struct {
	nsAttrs
	LockDuration                        string          `xml:"LockDuration"`
	MaxSizeInMegabytes                  int32           `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          bool            `xml:"RequiresDuplicateDetection"`
	RequiresSession                     bool            `xml:"RequiresSession"`
	DefaultMessageTimeToLive            string          `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration    bool            `xml:"DeadLetteringOnMessageExpiration"`
	DuplicateDetectionHistoryTimeWindow string          `xml:"DuplicateDetectionHistoryTimeWindow"`
	MaxDeliveryCount                    int32           `xml:"MaxDeliveryCount"`
	EnableBatchedOperations             bool            `xml:"EnableBatchedOperations"`
	SizeInBytes                         int64           `xml:"SizeInBytes"`
	MessageCount                        int64           `xml:"MessageCount"`
	IsAnonymousAccessible               bool            `xml:"IsAnonymousAccessible"`
	AuthorizationRules                  authRulesXML    `xml:"AuthorizationRules"`
	Status                              string          `xml:"Status"`
	ForwardTo                           string          `xml:"ForwardTo,omitempty"`
	CreatedAt                           string          `xml:"CreatedAt"`
	UpdatedAt                           string          `xml:"UpdatedAt"`
	AccessedAt                          string          `xml:"AccessedAt"`
	SupportOrdering                     bool            `xml:"SupportOrdering"`
	CountDetails                        countDetailsXML `xml:"CountDetails"`
	AutoDeleteOnIdle                    string          `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  bool            `xml:"EnablePartitioning"`
	EntityAvailabilityStatus            string          `xml:"EntityAvailabilityStatus"`
	ForwardDeadLetteredMessagesTo       string          `xml:"ForwardDeadLetteredMessagesTo,omitempty"`
	EnableExpress                       bool            `xml:"EnableExpress"`
	UserMetadata                        string          `xml:"UserMetadata,omitempty"`
	MaxMessageSizeInKilobytes           int64           `xml:"MaxMessageSizeInKilobytes"`
}

type topicXML struct {
	nsAttrs
	DefaultMessageTimeToLive            string          `xml:"DefaultMessageTimeToLive"`
	MaxSizeInMegabytes                  int32           `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          bool            `xml:"RequiresDuplicateDetection"`
	DuplicateDetectionHistoryTimeWindow string          `xml:"DuplicateDetectionHistoryTimeWindow"`
	EnableBatchedOperations             bool            `xml:"EnableBatchedOperations"`
	SizeInBytes                         int64           `xml:"SizeInBytes"`
	FilteringMessagesBeforePublishing   bool            `xml:"FilteringMessagesBeforePublishing"`
	IsAnonymousAccessible               bool            `xml:"IsAnonymousAccessible"`
	AuthorizationRules                  authRulesXML    `xml:"AuthorizationRules"`
	Status                              string          `xml:"Status"`
	CreatedAt                           string          `xml:"CreatedAt"`
	UpdatedAt                           string          `xml:"UpdatedAt"`
	AccessedAt                          string          `xml:"AccessedAt"`
	SupportOrdering                     bool            `xml:"SupportOrdering"`
	CountDetails                        countDetailsXML `xml:"CountDetails"`
	SubscriptionCount                   int32           `xml:"SubscriptionCount"`
	AutoDeleteOnIdle                    string          `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  bool            `xml:"EnablePartitioning"`
	EntityAvailabilityStatus            string          `xml:"EntityAvailabilityStatus"`
	EnableSubscriptionPartitioning      bool            `xml:"EnableSubscriptionPartitioning"`
	EnableExpress                       bool            `xml:"EnableExpress"`
	UserMetadata                        string          `xml:"UserMetadata,omitempty"`
	MaxMessageSizeInKilobytes           int64           `xml:"MaxMessageSizeInKilobytes"`
	SQLFilterCount                      int32           `xml:"SqlFilterCount"`
	CorrelationFilterCount              int32           `xml:"CorrelationFilterCount"`
}

type subscriptionXML struct {
	nsAttrs
	LockDuration                              string          `xml:"LockDuration"`
	RequiresSession                           bool            `xml:"RequiresSession"`
	DefaultMessageTimeToLive                  string          `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration          bool            `xml:"DeadLetteringOnMessageExpiration"`
	DeadLetteringOnFilterEvaluationExceptions bool            `xml:"DeadLetteringOnFilterEvaluationExceptions"`
	MessageCount                              int64           `xml:"MessageCount"`
	MaxDeliveryCount                          int32           `xml:"MaxDeliveryCount"`
	EnableBatchedOperations                   bool            `xml:"EnableBatchedOperations"`
	Status                                    string          `xml:"Status"`
	ForwardTo                                 string          `xml:"ForwardTo,omitempty"`
	CreatedAt                                 string          `xml:"CreatedAt"`
	UpdatedAt                                 string          `xml:"UpdatedAt"`
	AccessedAt                                string          `xml:"AccessedAt"`
	CountDetails                              countDetailsXML `xml:"CountDetails"`
	AutoDeleteOnIdle                          string          `xml:"AutoDeleteOnIdle"`
	EntityAvailabilityStatus                  string          `xml:"EntityAvailabilityStatus"`
	ForwardDeadLetteredMessagesTo             string          `xml:"ForwardDeadLetteredMessagesTo,omitempty"`
	UserMetadata                              string          `xml:"UserMetadata,omitempty"`
}

type ruleXML struct {
	nsAttrs
	Filter    filterXML `xml:"Filter"`
	Action    actionXML `xml:"Action"`
	CreatedAt string    `xml:"CreatedAt"`
	Name      string    `xml:"Name"`
}

type filterXML struct {
	Type               string  `xml:"i:type,attr"`
	CorrelationID      string  `xml:"CorrelationId,omitempty"`
	MessageID          string  `xml:"MessageId,omitempty"`
	To                 string  `xml:"To,omitempty"`
	ReplyTo            string  `xml:"ReplyTo,omitempty"`
	Label              string  `xml:"Label,omitempty"`
	SessionID          string  `xml:"SessionId,omitempty"`
	ReplyToSessionID   string  `xml:"ReplyToSessionId,omitempty"`
	ContentType        string  `xml:"ContentType,omitempty"`
	Properties         *kvsXML `xml:"Properties,omitempty"`
	SQLExpression      string  `xml:"SqlExpression,omitempty"`
	CompatibilityLevel int     `xml:"CompatibilityLevel,omitempty"`
	Parameters         *kvsXML `xml:"Parameters,omitempty"`
}

type actionXML struct {
	Type               string  `xml:"i:type,attr"`
	SQLExpression      string  `xml:"SqlExpression,omitempty"`
	CompatibilityLevel int     `xml:"CompatibilityLevel,omitempty"`
	Parameters         *kvsXML `xml:"Parameters,omitempty"`
}

type kvsXML struct {
	Items []kvXML `xml:"KeyValueOfstringanyType"`
}

type kvXML struct {
	Key   string     `xml:"Key"`
	Value kvValueXML `xml:"Value"`
}

type kvValueXML struct {
	Type  string `xml:"i:type,attr"`
	Xmlns string `xml:"xmlns:d6p1,attr"`
	Text  string `xml:",chardata"`
}

type namespaceXML struct {
	nsAttrs
	Alias         string `xml:"Alias,omitempty"`
	CreatedTime   string `xml:"CreatedTime"`
	MessagingSKU  string `xml:"MessagingSKU"`
	ModifiedTime  string `xml:"ModifiedTime"`
	Name          string `xml:"Name"`
	NamespaceType string `xml:"NamespaceType"`
}

type errorXML struct {
	XMLName xml.Name `xml:"Error"`
	Code    int      `xml:"Code"`
	Detail  string   `xml:"Detail"`
}

// ---- requests ----
//
// Pointers tell a present element from an absent one. Element names are
// matched whatever their namespace; attributes are collected raw and matched
// by local name, because clients declare the XMLSchema-instance prefix in
// different ways (Go's encoder invents its own prefix).

type entryIn struct {
	XMLName xml.Name  `xml:"entry"`
	Content contentIn `xml:"content"`
}

type contentIn struct {
	Queue        *queueIn        `xml:"QueueDescription"`
	Topic        *topicIn        `xml:"TopicDescription"`
	Subscription *subscriptionIn `xml:"SubscriptionDescription"`
	Rule         *ruleIn         `xml:"RuleDescription"`
}

type queueIn struct {
	LockDuration                        *string      `xml:"LockDuration"`
	MaxSizeInMegabytes                  *int32       `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          *bool        `xml:"RequiresDuplicateDetection"`
	RequiresSession                     *bool        `xml:"RequiresSession"`
	DefaultMessageTimeToLive            *string      `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration    *bool        `xml:"DeadLetteringOnMessageExpiration"`
	DuplicateDetectionHistoryTimeWindow *string      `xml:"DuplicateDetectionHistoryTimeWindow"`
	MaxDeliveryCount                    *int32       `xml:"MaxDeliveryCount"`
	EnableBatchedOperations             *bool        `xml:"EnableBatchedOperations"`
	Status                              *string      `xml:"Status"`
	AutoDeleteOnIdle                    *string      `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  *bool        `xml:"EnablePartitioning"`
	ForwardTo                           *string      `xml:"ForwardTo"`
	ForwardDeadLetteredMessagesTo       *string      `xml:"ForwardDeadLetteredMessagesTo"`
	UserMetadata                        *string      `xml:"UserMetadata"`
	MaxMessageSizeInKilobytes           *int64       `xml:"MaxMessageSizeInKilobytes"`
	AuthorizationRules                  *authRulesIn `xml:"AuthorizationRules"`
}

// authRulesIn is a request's <AuthorizationRules>; present and empty clears
// the entity's rules, absent keeps them.
type authRulesIn struct {
	Rules []struct {
		ClaimType    string   `xml:"ClaimType"`
		ClaimValue   string   `xml:"ClaimValue"`
		Rights       []string `xml:"Rights>AccessRights"`
		KeyName      string   `xml:"KeyName"`
		CreatedTime  string   `xml:"CreatedTime"`
		ModifiedTime string   `xml:"ModifiedTime"`
		PrimaryKey   string   `xml:"PrimaryKey"`
		SecondaryKey string   `xml:"SecondaryKey"`
	} `xml:"AuthorizationRule"`
}

type topicIn struct {
	DefaultMessageTimeToLive            *string      `xml:"DefaultMessageTimeToLive"`
	MaxSizeInMegabytes                  *int32       `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          *bool        `xml:"RequiresDuplicateDetection"`
	DuplicateDetectionHistoryTimeWindow *string      `xml:"DuplicateDetectionHistoryTimeWindow"`
	EnableBatchedOperations             *bool        `xml:"EnableBatchedOperations"`
	Status                              *string      `xml:"Status"`
	UserMetadata                        *string      `xml:"UserMetadata"`
	SupportOrdering                     *bool        `xml:"SupportOrdering"`
	AutoDeleteOnIdle                    *string      `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  *bool        `xml:"EnablePartitioning"`
	MaxMessageSizeInKilobytes           *int64       `xml:"MaxMessageSizeInKilobytes"`
	AuthorizationRules                  *authRulesIn `xml:"AuthorizationRules"`
}

type subscriptionIn struct {
	LockDuration                              *string `xml:"LockDuration"`
	RequiresSession                           *bool   `xml:"RequiresSession"`
	DefaultMessageTimeToLive                  *string `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration          *bool   `xml:"DeadLetteringOnMessageExpiration"`
	DeadLetteringOnFilterEvaluationExceptions *bool   `xml:"DeadLetteringOnFilterEvaluationExceptions"`
	DefaultRuleDescription                    *ruleIn `xml:"DefaultRuleDescription"`
	MaxDeliveryCount                          *int32  `xml:"MaxDeliveryCount"`
	EnableBatchedOperations                   *bool   `xml:"EnableBatchedOperations"`
	Status                                    *string `xml:"Status"`
	ForwardTo                                 *string `xml:"ForwardTo"`
	UserMetadata                              *string `xml:"UserMetadata"`
	ForwardDeadLetteredMessagesTo             *string `xml:"ForwardDeadLetteredMessagesTo"`
	AutoDeleteOnIdle                          *string `xml:"AutoDeleteOnIdle"`
}

type ruleIn struct {
	Filter *filterIn `xml:"Filter"`
	Action *actionIn `xml:"Action"`
	Name   *string   `xml:"Name"`
}

type filterIn struct {
	Attrs            []xml.Attr `xml:",any,attr"`
	CorrelationID    *string    `xml:"CorrelationId"`
	MessageID        *string    `xml:"MessageId"`
	To               *string    `xml:"To"`
	ReplyTo          *string    `xml:"ReplyTo"`
	Label            *string    `xml:"Label"`
	SessionID        *string    `xml:"SessionId"`
	ReplyToSessionID *string    `xml:"ReplyToSessionId"`
	ContentType      *string    `xml:"ContentType"`
	Properties       *kvsIn     `xml:"Properties"`
	SQLExpression    *string    `xml:"SqlExpression"`
	Parameters       *kvsIn     `xml:"Parameters"`
}

type actionIn struct {
	Attrs         []xml.Attr `xml:",any,attr"`
	SQLExpression *string    `xml:"SqlExpression"`
	Parameters    *kvsIn     `xml:"Parameters"`
}

type kvsIn struct {
	Items []kvIn `xml:"KeyValueOfstringanyType"`
}

type kvIn struct {
	Key   string `xml:"Key"`
	Value struct {
		Attrs []xml.Attr `xml:",any,attr"`
		Text  string     `xml:",chardata"`
	} `xml:"Value"`
}

// xsiType returns the local part of an i:type attribute ("TrueFilter",
// "string" from "d6p1:string"), whatever prefix declared it.
func xsiType(attrs []xml.Attr) string {
	for _, a := range attrs {
		if a.Name.Local != "type" || (a.Name.Space != nsInstance && a.Name.Space != "i" && a.Name.Space != "") {
			continue
		}
		v := a.Value
		for i := len(v) - 1; i >= 0; i-- {
			if v[i] == ':' {
				return v[i+1:]
			}
		}
		return v
	}
	return ""
}
