package demo

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// verdict is what a simulated consumer decided to do with one message.
type verdict struct {
	action      action
	reason      string // dead-letter reason, or the transient error for abandon
	description string
}

type action int

const (
	complete action = iota
	deadLetter
	abandon
	deferIt
)

func ok() verdict { return verdict{action: complete} }

func dead(reason, description string) verdict {
	return verdict{action: deadLetter, reason: reason, description: description}
}

func transient(reason, description string) verdict {
	return verdict{action: abandon, reason: reason, description: description}
}

// dotnetTrace renders an exception the way a .NET consumer logs it, which is
// what most dead-letter descriptions in the wild look like.
func dotnetTrace(exception, message string, frames ...string) string {
	var b strings.Builder
	b.WriteString(exception)
	b.WriteString(": ")
	b.WriteString(message)
	for _, f := range frames {
		b.WriteString("\n   at ")
		b.WriteString(f)
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

var (
	firstNames = []string{"Alice", "Bram", "Chen", "Dana", "Emre", "Fatima", "Goran", "Hana", "Ivo", "Jonas", "Keiko", "Lena"}
	cities     = []string{"Amsterdam", "Berlin", "Lisbon", "Madrid", "Oslo", "Prague", "Vienna", "Warsaw"}
	skus       = []string{"SKU-10023", "SKU-20411", "SKU-31877", "SKU-40002", "SKU-55519", "SKU-67001", "SKU-70310"}
	regions    = []string{"EU", "EU", "US", "APAC"}
)

// ---- orders: JSON ----------------------------------------------------------

type order struct {
	OrderID         string      `json:"orderId"`
	CustomerID      string      `json:"customerId"`
	PlacedAt        time.Time   `json:"placedAt"`
	Currency        string      `json:"currency"`
	Total           float64     `json:"total"`
	Lines           []orderLine `json:"lines"`
	ShippingAddress address     `json:"shippingAddress"`
}

type orderLine struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unitPrice"`
	Stock     string  `json:"stock"`
}

type address struct {
	Name       string `json:"name"`
	Street     string `json:"street"`
	City       string `json:"city"`
	PostalCode string `json:"postalCode"`
	Country    string `json:"country"`
}

func newOrder(r *rand.Rand, now time.Time, seq int) *azservicebus.Message {
	o := order{
		OrderID:    fmt.Sprintf("ORD-%06d", 100000+seq),
		CustomerID: fmt.Sprintf("cust-%04d", r.IntN(9000)),
		PlacedAt:   now.UTC().Truncate(time.Millisecond),
		Currency:   "EUR",
		ShippingAddress: address{
			Name:       firstNames[r.IntN(len(firstNames))] + " " + string(rune('A'+r.IntN(26))) + ".",
			Street:     fmt.Sprintf("%d Canal Street", 1+r.IntN(200)),
			City:       cities[r.IntN(len(cities))],
			PostalCode: fmt.Sprintf("%04d", 1000+r.IntN(8999)),
			Country:    "NL",
		},
	}
	for range 1 + r.IntN(4) {
		l := orderLine{SKU: skus[r.IntN(len(skus))], Quantity: 1 + r.IntN(5), UnitPrice: float64(100+r.IntN(9900)) / 100, Stock: "in-stock"}
		o.Lines = append(o.Lines, l)
		o.Total += float64(l.Quantity) * l.UnitPrice
	}
	truncate := false
	switch p := r.Float64(); {
	case p < 0.15:
		truncate = true // a producer bug cuts the payload
	case p < 0.23:
		o.ShippingAddress.PostalCode = ""
	case p < 0.29:
		o.CustomerID = fmt.Sprintf("cust-9%03d", r.IntN(1000)) // the hot partition whose writes time out
	case p < 0.33:
		o.Lines[0].Stock = "backorder"
	}
	body, _ := json.Marshal(o)
	if truncate {
		body = body[:len(body)/2+r.IntN(len(body)/3)]
	}
	return &azservicebus.Message{
		MessageID:   ptr(o.OrderID),
		Subject:     ptr("OrderPlaced"),
		ContentType: ptr("application/json"),
		Body:        body,
		ApplicationProperties: map[string]any{
			"tenant":        "contoso",
			"source":        "web-checkout",
			"schemaVersion": int64(2),
		},
	}
}

func processOrder(m *azservicebus.ReceivedMessage) verdict {
	var o order
	if err := json.Unmarshal(m.Body, &o); err != nil {
		return dead("DeserializationException", dotnetTrace(
			"System.Text.Json.JsonException",
			"The JSON value could not be converted to Contoso.Orders.OrderPlaced ("+err.Error()+").",
			"System.Text.Json.ThrowHelper.ReThrowWithPath(ReadStack& state, Utf8JsonReader& reader, Exception ex)",
			"System.Text.Json.JsonSerializer.Deserialize[TValue](ReadOnlySpan`1 utf8Json, JsonSerializerOptions options)",
			"Contoso.Orders.OrderPlacedHandler.HandleAsync(ServiceBusReceivedMessage message) in /src/Orders/OrderPlacedHandler.cs:line 41",
			"Azure.Messaging.ServiceBus.ServiceBusProcessor.OnMessageAsync(ServiceBusReceivedMessage message)",
		))
	}
	if o.ShippingAddress.PostalCode == "" {
		return dead("ValidationFailed", fmt.Sprintf(
			"Order %s rejected: 'ShippingAddress.PostalCode' must not be empty. (Parameter 'command')", o.OrderID))
	}
	if strings.HasPrefix(o.CustomerID, "cust-9") {
		return transient("SqlException", dotnetTrace(
			"Microsoft.Data.SqlClient.SqlException (0x80131904)",
			"Execution Timeout Expired.  The timeout period elapsed prior to completion of the operation or the server is not responding.",
			"Microsoft.Data.SqlClient.SqlCommand.ExecuteNonQueryAsync(CancellationToken cancellationToken)",
			"Contoso.Orders.OrderRepository.InsertAsync(Order order) in /src/Orders/OrderRepository.cs:line 88",
		))
	}
	for _, l := range o.Lines {
		if l.Stock == "backorder" {
			return verdict{action: deferIt, reason: "AwaitingStock"}
		}
	}
	return ok()
}

// ---- payments: XML ---------------------------------------------------------

type payment struct {
	XMLName   xml.Name `xml:"urn:contoso:payments:v3 Payment"`
	PaymentID string   `xml:"PaymentId"`
	OrderID   string   `xml:"OrderId"`
	Amount    string   `xml:"Amount"`
	Currency  string   `xml:"Currency"`
	CardBIN   string   `xml:"Card>Bin"`
	CardLast4 string   `xml:"Card>Last4"`
	Region    string   `xml:"Region"`
}

func newPayment(r *rand.Rand, seq int) (m *azservicebus.Message, region string) {
	p := payment{
		PaymentID: fmt.Sprintf("pay_%08x", r.Uint32()),
		OrderID:   fmt.Sprintf("ORD-%06d", 100000+r.IntN(900000)),
		Amount:    fmt.Sprintf("%d.%02d", 5+r.IntN(900), r.IntN(100)),
		Currency:  "EUR",
		CardBIN:   []string{"411111", "555555", "378282"}[r.IntN(3)],
		CardLast4: fmt.Sprintf("%04d", r.IntN(10000)),
		Region:    regions[r.IntN(len(regions))],
	}
	switch q := r.Float64(); {
	case q < 0.08:
		p.Amount = strings.Replace(p.Amount, ".", ",", 1) // a locale bug in the upstream service
	case q < 0.14:
		p.CardBIN = "400000" // test cards whose fraud scoring always times out
	case q < 0.18:
		p.CardBIN = "666666"
	}
	body, _ := xml.MarshalIndent(p, "", "  ")
	subject := "PaymentAuthorized"
	if r.Float64() < 0.3 {
		subject = "PaymentCaptured"
	}
	return &azservicebus.Message{
		MessageID:     ptr(p.PaymentID),
		CorrelationID: ptr(p.OrderID),
		Subject:       ptr(subject),
		ContentType:   ptr("application/xml"),
		Body:          append([]byte(xml.Header), body...),
		ApplicationProperties: map[string]any{
			"region":  p.Region,
			"gateway": "adyen",
			"attempt": int64(1),
		},
	}, p.Region
}

func parsePayment(m *azservicebus.ReceivedMessage) (payment, error) {
	var p payment
	err := xml.Unmarshal(m.Body, &p)
	return p, err
}

func processLedger(m *azservicebus.ReceivedMessage) verdict {
	p, err := parsePayment(m)
	if err != nil {
		return dead("XmlException", dotnetTrace("System.Xml.XmlException", err.Error(),
			"System.Xml.XmlTextReaderImpl.Throw(Exception e)",
			"Contoso.Ledger.PaymentPostingHandler.Handle(Message message) in /src/Ledger/PaymentPostingHandler.cs:line 27"))
	}
	if _, err := strconv.ParseFloat(p.Amount, 64); err != nil {
		return dead("XmlSchemaValidationException", dotnetTrace(
			"System.Xml.Schema.XmlSchemaValidationException",
			fmt.Sprintf("The 'urn:contoso:payments:v3:Amount' element is invalid - The value '%s' is invalid according to its datatype 'http://www.w3.org/2001/XMLSchema:decimal' - The string '%s' is not a valid Decimal value.", p.Amount, p.Amount),
			"System.Xml.Schema.XmlSchemaValidator.CheckElementSpecificConstraints(XmlSchemaObject currentElement)",
			"Contoso.Ledger.PaymentPostingHandler.Handle(Message message) in /src/Ledger/PaymentPostingHandler.cs:line 31"))
	}
	return ok()
}

func processFraudCheck(m *azservicebus.ReceivedMessage) verdict {
	p, err := parsePayment(m)
	if err != nil {
		return dead("XmlException", err.Error())
	}
	switch p.CardBIN {
	case "400000":
		return transient("HttpRequestException", dotnetTrace("System.Net.Http.HttpRequestException",
			"Response status code does not indicate success: 504 (Gateway Timeout). POST https://fraud-scoring.internal/v2/score",
			"System.Net.Http.HttpResponseMessage.EnsureSuccessStatusCode()",
			"Contoso.Fraud.ScoringClient.ScoreAsync(Payment payment) in /src/Fraud/ScoringClient.cs:line 64"))
	case "666666":
		return dead("FraudRuleViolation", fmt.Sprintf(
			"Payment %s blocked: card BIN %s is on the deny list (rule FR-112). Manual review required.", p.PaymentID, p.CardBIN))
	}
	return ok()
}

// ---- email: plain text -----------------------------------------------------

func newEmail(r *rand.Rand, seq int) *azservicebus.Message {
	name := firstNames[r.IntN(len(firstNames))]
	to := strings.ToLower(name) + "@example.com"
	switch q := r.Float64(); {
	case q < 0.10:
		to = strings.ToLower(name) + "@@example" // a form that never validated its input
	case q < 0.14:
		to = "quota-" + to // a mailbox that is full: a transient failure that never clears
	}
	order := fmt.Sprintf("ORD-%06d", 100000+r.IntN(900000))
	body := fmt.Sprintf("To: %s\nSubject: Your order %s has shipped\n\nHi %s,\n\nGood news: your order %s left our warehouse today.\nTrack it at https://shop.example.com/track/%s\n\n-- Contoso Shop\n",
		to, order, name, order, order)
	return &azservicebus.Message{
		MessageID:   ptr(fmt.Sprintf("mail-%08d", seq)),
		Subject:     ptr("OrderShippedEmail"),
		ContentType: ptr("text/plain; charset=utf-8"),
		Body:        []byte(body),
		ApplicationProperties: map[string]any{
			"template": "order-shipped",
			"locale":   "en-GB",
		},
	}
}

func newReminder(r *rand.Rand, seq int) *azservicebus.Message {
	m := newEmail(r, seq)
	m.MessageID = ptr(fmt.Sprintf("reminder-%08d", seq))
	m.Subject = ptr("ReviewReminderEmail")
	m.ApplicationProperties["template"] = "review-reminder"
	return m
}

func processEmail(m *azservicebus.ReceivedMessage) verdict {
	header, _, _ := strings.Cut(string(m.Body), "\n\n")
	var to string
	for _, line := range strings.Split(header, "\n") {
		if v, found := strings.CutPrefix(line, "To: "); found {
			to = v
		}
	}
	local, domain, found := strings.Cut(to, "@")
	if !found || local == "" || !strings.Contains(domain, ".") || strings.Contains(domain, "@") {
		return dead("SmtpFailedRecipientException", dotnetTrace("System.Net.Mail.SmtpFailedRecipientException",
			fmt.Sprintf("Mailbox unavailable. The server response was: 5.1.3 Invalid address <%s>", to),
			"System.Net.Mail.SmtpClient.Send(MailMessage message)",
			"Contoso.Notifications.EmailSender.SendAsync(EmailCommand cmd) in /src/Notifications/EmailSender.cs:line 52"))
	}
	if strings.HasPrefix(local, "quota-") {
		return transient("SmtpException", "Insufficient system storage. The server response was: 4.2.2 Mailbox full")
	}
	return ok()
}

// ---- inventory: binary, sessions -------------------------------------------

// newStockUpdate encodes a small protobuf message (field 1 sku, field 2
// quantity delta, field 3 unix time) by hand.
func newStockUpdate(r *rand.Rand, seq int, now time.Time) *azservicebus.Message {
	sku := skus[r.IntN(len(skus))]
	body := []byte{0x0a, byte(len(sku))}
	body = append(body, sku...)
	body = append(body, 0x10)
	body = appendVarint(body, uint64(1+r.IntN(500)))
	body = append(body, 0x18)
	body = appendVarint(body, uint64(now.Unix()))
	switch q := r.Float64(); {
	case q < 0.08:
		body[0] = 0x00 // a corrupted frame from the warehouse gateway
	case q < 0.12:
		body = body[:len(body)-3]
	}
	session := fmt.Sprintf("warehouse-%02d", 1+r.IntN(8))
	return &azservicebus.Message{
		MessageID:   ptr(fmt.Sprintf("stock-%08d", seq)),
		SessionID:   ptr(session),
		Subject:     ptr("StockAdjusted"),
		ContentType: ptr("application/x-protobuf"),
		Body:        body,
		ApplicationProperties: map[string]any{
			"warehouse": session,
			"proto":     "contoso.inventory.v1.StockAdjusted",
		},
	}
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

var (
	errZeroTag   = errors.New("Protocol message contained an invalid tag (zero).")
	errTruncated = errors.New("While parsing a protocol message, the input ended unexpectedly in the middle of a field.  This could mean either that the input has been truncated or that an embedded message misreported its own length.")
)

// decodeProto walks a protobuf message far enough to find the errors a real
// parser reports for our two planted defects.
func decodeProto(b []byte) error {
	for len(b) > 0 {
		key, n := varint(b)
		if n == 0 {
			return errTruncated
		}
		b = b[n:]
		if key>>3 == 0 {
			return errZeroTag
		}
		switch key & 7 {
		case 0:
			_, n := varint(b)
			if n == 0 {
				return errTruncated
			}
			b = b[n:]
		case 2:
			l, n := varint(b)
			if n == 0 || uint64(len(b)-n) < l {
				return errTruncated
			}
			b = b[n+int(l):]
		default:
			return fmt.Errorf("Protocol message tag had invalid wire type %d.", key&7)
		}
	}
	return nil
}

func varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

func processStockUpdate(m *azservicebus.ReceivedMessage) verdict {
	if err := decodeProto(m.Body); err != nil {
		return dead("InvalidProtocolBufferException", dotnetTrace("Google.Protobuf.InvalidProtocolBufferException", err.Error(),
			"Google.Protobuf.CodedInputStream.ReadTag()",
			"Contoso.Inventory.StockAdjusted.MergeFrom(CodedInputStream input)",
			"Contoso.Inventory.StockSyncHandler.Handle(ProcessSessionMessageEventArgs args) in /src/Inventory/StockSyncHandler.cs:line 33"))
	}
	return ok()
}

// ---- shipping labels: healthy ----------------------------------------------

func newLabel(r *rand.Rand, seq int) *azservicebus.Message {
	body := fmt.Sprintf(`{"shipmentId":"SHP-%07d","carrier":"%s","weightGrams":%d}`,
		seq, []string{"DHL", "PostNL", "UPS"}[r.IntN(3)], 100+r.IntN(20000))
	return &azservicebus.Message{
		MessageID:   ptr(fmt.Sprintf("label-%08d", seq)),
		Subject:     ptr("LabelRequested"),
		ContentType: ptr("application/json"),
		Body:        []byte(body),
	}
}

// ---- invoices: JSON, auto-forwarded to a frozen archive -------------------

func newInvoice(r *rand.Rand, seq int, now time.Time) *azservicebus.Message {
	id := fmt.Sprintf("INV-%07d", 2000000+seq)
	body := fmt.Sprintf(`{"invoiceId":"%s","orderId":"ORD-%06d","issuedAt":"%s","amount":%d.%02d,"currency":"EUR","pdf":"https://billing.example.com/invoices/%s.pdf"}`,
		id, 100000+r.IntN(900000), now.UTC().Format(time.RFC3339), 10+r.IntN(2000), r.IntN(100), id)
	return &azservicebus.Message{
		MessageID:   ptr(id),
		Subject:     ptr("InvoiceIssued"),
		ContentType: ptr("application/json"),
		Body:        []byte(body),
		ApplicationProperties: map[string]any{
			"tenant": "contoso",
			"source": "billing",
		},
	}
}
