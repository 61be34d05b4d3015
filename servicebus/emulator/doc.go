// Package emulator is a local Azure Service Bus: an AMQP 1.0 server, written from
// scratch, in front of the in-memory namespace of package broker. (Full description
// and the list of behaviour choices: see the end of this comment once written.)
package emulator
