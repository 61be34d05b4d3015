// Package amqp is the emulator's own AMQP 1.0 codec: the type system
// (primitive, compound and described values), the transport performatives
// (open, begin, attach, flow, transfer, disposition, detach, end, close), the
// delivery states, the SASL frames, and frame reading and writing.
//
// It exists so that the Service Bus emulator server can speak AMQP 1.0 to the
// real Azure SDK without depending on go-amqp's internal packages. Message
// sections themselves (header, properties, application-properties, data, ...)
// are encoded and decoded by the server with go-amqp's exported
// Message.MarshalBinary/UnmarshalBinary; this package decodes them only as
// generic values (see Unmarshal).
//
// What the package must not do:
//
//   - No I/O policy: it never dials, listens, sets deadlines, sends
//     heartbeats or negotiates anything. FrameReader only reads from the
//     io.Reader it is given; AppendFrame and AppendTransferFrames only append
//     bytes (the latter splits a transfer at the max-frame-size it is told).
//   - No broker or link semantics: it does not track sessions, windows,
//     credit, delivery ids or settlement. It encodes and decodes what it is
//     given, applying only the AMQP defaults of absent fields.
//   - It must never panic on any input and never allocate more than the
//     input can justify: every length or count is checked against the bytes
//     that remain, nesting is limited to MaxDepth, and every decoding error
//     wraps ErrMalformed.
//
// Decoded Go types for AMQP values: null→nil, boolean→bool, ubyte→uint8,
// ushort→uint16, uint→uint32, ulong→uint64, byte→int8, short→int16,
// int→int32, long→int64, float→float32, double→float64, char→Char,
// timestamp→time.Time (UTC, millisecond precision), uuid→UUID,
// binary→[]byte, string→string, symbol→Symbol, list→[]any,
// map→map[any]any, array→Array, described→*Described. Decimal types are
// rejected as unsupported.
package amqp
