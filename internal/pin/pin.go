// Package pin holds blank imports of the pinned dependencies that no package
// imports yet, so that go.mod and go.sum stay complete while the code that
// uses them is written. It is removed once every dependency has a real
// importer (gorilla/websocket: the live-update issue).
package pin

import (
	_ "github.com/gorilla/websocket"
)
