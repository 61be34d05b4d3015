package demo

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// Entity names of the demo namespace.
const (
	QueueOrders      = "orders"
	QueueEmail       = "email"
	QueueInventory   = "inventory-sync"
	QueueShipping    = "shipping-labels"
	QueueInvoices    = "invoices"
	QueueArchive     = "invoices-archive"
	TopicPayments    = "payments"
	SubLedger        = "ledger"
	SubFraudCheck    = "fraud-check"
	SubReceipts      = "receipts"
	receiptsTTL      = 5 * time.Second
	ordersMaxDeliver = 5
	fraudMaxDeliver  = 3
)

// site is what differs between the demo's namespaces beyond their rates:
// two regions of one product, set up a little differently, so that they
// fail differently.
type site struct {
	// fraudRegion is the region whose payments the fraud-check
	// subscription receives (its rule): each region scores its own cards.
	fraudRegion string
	// archiveFrozen: invoices-archive is send-disabled (a migration nobody
	// finished), so every invoice forwarded to it is parked in the invoices
	// queue's transfer dead-letter queue.
	archiveFrozen bool
}

// siteOf is the named namespace's site: prod-us scores US cards and its
// archive was never frozen (the migration was prod-eu's); any other name
// is set up as prod-eu.
func siteOf(name string) site {
	if name == NamespaceUS {
		return site{fraudRegion: "US"}
	}
	return site{fraudRegion: "EU", archiveFrozen: true}
}

// Provision creates the demo entities in ns, set up as prod-eu. Entities
// that already exist are left as they are, so Provision can run against a
// namespace that was loaded from a configuration file.
func Provision(ns *broker.Namespace) error { return provision(ns, siteOf(NamespaceEU)) }

// ProvisionNamespace is Provision for the demo namespace called name
// (NamespaceEU or NamespaceUS), set up as that region is.
func ProvisionNamespace(ns *broker.Namespace, name string) error { return provision(ns, siteOf(name)) }

func provision(ns *broker.Namespace, s site) error {
	queue := func(name string, edit func(*broker.QueueProperties)) error {
		p := broker.DefaultQueueProperties()
		edit(&p)
		_, err := ns.CreateQueue(name, p)
		if errors.Is(err, broker.ErrAlreadyExists) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create demo queue %q: %w", name, err)
		}
		return nil
	}
	sub := func(name string, edit func(*broker.SubscriptionProperties), rules ...broker.Rule) error {
		p := broker.DefaultSubscriptionProperties()
		edit(&p)
		_, err := ns.CreateSubscription(TopicPayments, name, p, rules...)
		if errors.Is(err, broker.ErrAlreadyExists) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create demo subscription %s/%s: %w", TopicPayments, name, err)
		}
		return nil
	}

	steps := []func() error{
		func() error {
			return queue(QueueOrders, func(p *broker.QueueProperties) {
				p.LockDuration = 30 * time.Second
				p.MaxDeliveryCount = ordersMaxDeliver
			})
		},
		func() error {
			return queue(QueueEmail, func(p *broker.QueueProperties) {
				p.MaxDeliveryCount = 10
				p.DeadLetteringOnMessageExpiration = true
				p.DefaultMessageTimeToLive = 14 * 24 * time.Hour
			})
		},
		func() error {
			return queue(QueueInventory, func(p *broker.QueueProperties) {
				p.RequiresSession = true
				p.LockDuration = 30 * time.Second
				p.MaxDeliveryCount = 3
			})
		},
		func() error {
			return queue(QueueShipping, func(p *broker.QueueProperties) {
				p.RequiresDuplicateDetection = true
				p.DuplicateDetectionHistoryTimeWindow = 10 * time.Minute
			})
		},
		func() error {
			// In prod-eu the archive was frozen for a migration and nobody
			// remembered that invoices auto-forward to it: every forward
			// fails, and the broker parks the invoices in the transfer
			// dead-letter queue.
			return queue(QueueArchive, func(p *broker.QueueProperties) {
				if s.archiveFrozen {
					p.Status = broker.StatusSendDisabled
				}
			})
		},
		func() error {
			return queue(QueueInvoices, func(p *broker.QueueProperties) { p.ForwardTo = QueueArchive })
		},
		func() error {
			p := broker.DefaultTopicProperties()
			_, err := ns.CreateTopic(TopicPayments, p)
			if err != nil && !errors.Is(err, broker.ErrAlreadyExists) {
				return fmt.Errorf("create demo topic %q: %w", TopicPayments, err)
			}
			return nil
		},
		func() error {
			return sub(SubLedger, func(p *broker.SubscriptionProperties) { p.MaxDeliveryCount = 10 })
		},
		func() error {
			return sub(SubFraudCheck, func(p *broker.SubscriptionProperties) {
				p.MaxDeliveryCount = fraudMaxDeliver
				p.LockDuration = 30 * time.Second
			}, broker.Rule{
				Name: strings.ToLower(s.fraudRegion) + "-cards",
				Kind: broker.FilterCorrelation,
				Correlation: &broker.CorrelationFilter{
					Properties: map[string]any{"region": s.fraudRegion},
				},
			})
		},
		func() error {
			// Nobody consumes receipts: the receipt service is "down", so its
			// messages expire and the broker dead-letters them.
			return sub(SubReceipts, func(p *broker.SubscriptionProperties) {
				p.DefaultMessageTimeToLive = receiptsTTL
				p.DeadLetteringOnMessageExpiration = true
			}, broker.Rule{
				Name:        "captured-only",
				Kind:        broker.FilterCorrelation,
				Correlation: &broker.CorrelationFilter{Subject: "PaymentCaptured"},
			})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
