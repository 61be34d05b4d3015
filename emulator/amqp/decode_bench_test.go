package amqp

import "testing"

// The decode benchmarks below parse one frame of each performative a busy
// link exchanges (flow, disposition) and of the link set-up ones (attach,
// open), so that changes to the performative decoders can be measured.

func benchParse(b *testing.B, f Frame) {
	b.Helper()
	data, err := AppendFrame(nil, f)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFrame(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseFrameFlow(b *testing.B) {
	benchParse(b, Frame{Channel: 1, Body: &Flow{NextIncomingID: ptr(uint32(1)), IncomingWindow: 5000, NextOutgoingID: 9,
		OutgoingWindow: 5000, Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(10)), LinkCredit: ptr(uint32(300))}})
}

func BenchmarkParseFrameDisposition(b *testing.B) {
	benchParse(b, Frame{Channel: 1, Body: &Disposition{Role: RoleReceiver, First: 100, Last: ptr(uint32(164)),
		Settled: true, State: &Accepted{}}})
}

func BenchmarkParseFrameDispositionRejected(b *testing.B) {
	benchParse(b, Frame{Channel: 1, Body: &Disposition{Role: RoleReceiver, First: 100, Settled: true,
		State: &Rejected{Error: &Error{Condition: "com.microsoft:message-lock-lost", Description: "The lock supplied is invalid."}}}})
}

func BenchmarkParseFrameAttach(b *testing.B) {
	benchParse(b, Frame{Channel: 1, Body: &Attach{Name: "receiver-link", Handle: 0, Role: RoleReceiver,
		SndSettleMode: ptr(SenderSettleModeUnsettled), RcvSettleMode: ptr(ReceiverSettleModeSecond),
		Source: &Source{Address: "queue1", ExpiryPolicy: "link-detach",
			Filter: map[Symbol]any{"com.microsoft:session-filter": &Described{Descriptor: uint64(0x000001370000000c), Value: "session-1"}}},
		Target:     &Target{Address: "receiver-link-target"},
		Properties: map[Symbol]any{"com.microsoft:receiver-settle-mode": uint8(1)}}})
}

func BenchmarkParseFrameOpen(b *testing.B) {
	benchParse(b, Frame{Body: &Open{ContainerID: "0123456789abcdef", Hostname: "127.0.0.1:5672", MaxFrameSize: 65536,
		ChannelMax: 65535, Properties: map[Symbol]any{"product": "MSGolangClient", "version": "v1.11.0"}}})
}
