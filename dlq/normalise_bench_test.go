package dlq

import "testing"

// normaliseSamples are dead-letter descriptions of the kinds real DLQs hold
// (the synthetic catalog's templates, filled in).
var normaliseSamples = []string{
	"Message could not be consumed after 10 delivery attempts.",
	"The message expired and was dead lettered.",
	"Unexpected character encountered while parsing value: <. Path '', line 1, position 17.",
	"Order 48213: quantity must be greater than 0 (got -3)",
	"Execution Timeout Expired. The timeout period elapsed prior to completion of the operation (30012 ms) on server sql-7.",
	"POST https://api.partner.example/v2/orders/77123 returned 503 Service Unavailable after 30211 ms",
	"GET https://inventory.internal/items/3f2a9c1e-77b4-4c1d-9a0e-5b6c7d8e9f01 returned 404 Not Found",
	"Card declined by issuer: code 51, trace 9f3a7c21be04d5e6a7b8",
	"550 5.1.1 <user4711@example.com>: Recipient address rejected: User unknown",
	"The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference:0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e, TrackingId:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d, Timestamp:2026-11-02 13:45:10",
	"Object reference not set to an instance of an object. at Orders.Handler.Handle(OrderCreated m) in /src/Handler.cs:line 42",
	"Entity 'Order' with key 1234 was modified by another process (etag 0x8DC4A1B2C3D4E5F)",
}

// BenchmarkNormaliseDescription measures the failure-group normalisation
// the catalog runs for every new dead letter (ApplyPage, groupTally).
func BenchmarkNormaliseDescription(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		NormaliseDescription(normaliseSamples[i%len(normaliseSamples)])
	}
}
