// Package pin holds blank imports of the pinned dependencies so that go.mod
// and go.sum stay complete while the packages that use them are written.
// It is removed once every dependency has a real importer.
package pin

import (
	_ "github.com/Azure/azure-sdk-for-go/sdk/azcore"
	_ "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	_ "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	_ "github.com/Azure/go-amqp"
	_ "github.com/a-h/templ"
	_ "github.com/gorilla/websocket"
	_ "modernc.org/sqlite"
)
