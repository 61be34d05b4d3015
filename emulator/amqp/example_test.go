package amqp_test

import (
	"bytes"
	"fmt"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

// A server reads the client's protocol headers and frames through one
// FrameReader and answers with AppendFrame into a reused buffer.
func Example() {
	// What a client sends: SASL header, sasl-init, AMQP header, open.
	var in []byte
	in = append(in, amqp.ProtocolHeader(amqp.ProtoSASL)...)
	in, _ = amqp.AppendFrame(in, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")}})
	in = append(in, amqp.ProtocolHeader(amqp.ProtoAMQP)...)
	in, _ = amqp.AppendFrame(in, amqp.Frame{Body: &amqp.Open{ContainerID: "client", MaxFrameSize: 65536, ChannelMax: 65535}})

	fr := amqp.NewFrameReader(bytes.NewReader(in))
	proto, _ := fr.ReadProtocolHeader()
	fmt.Println("protocol", proto)
	f, _ := fr.ReadFrame()
	fmt.Printf("%T %s\n", f.Body, f.Body.(*amqp.SASLInit).Mechanism)
	proto, _ = fr.ReadProtocolHeader()
	fmt.Println("protocol", proto)
	f, _ = fr.ReadFrame()
	open := f.Body.(*amqp.Open)
	fmt.Println("open from", open.ContainerID, "max-frame-size", open.MaxFrameSize)

	// The reply: explicit channel-max and max-frame-size.
	out, _ := amqp.AppendFrame(nil, amqp.Frame{Body: &amqp.Open{ContainerID: "emulator", MaxFrameSize: 65536, ChannelMax: 4999}})
	fmt.Printf("% x\n", out[:8])
	// A keep-alive.
	out, _ = amqp.AppendFrame(out[:0], amqp.Frame{})
	fmt.Printf("% x\n", out)
	// Output:
	// protocol 3
	// *amqp.SASLInit ANONYMOUS
	// protocol 0
	// open from client max-frame-size 65536
	// 00 00 00 27 02 00 00 00
	// 00 00 00 08 02 00 00 00
}
