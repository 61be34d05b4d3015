// Package pythontest holds no code, only the smoke tests of the emulator with
// the Python SDK: python_test.go runs testdata/python_smoke.py
// (azure-servicebus 7.8 over uamqp, as Debian's python3-azure ships it) and
// testdata/pyamqp_smoke.py (pyamqp, the AMQP stack of azure-servicebus 7.9 and
// later) with /usr/bin/python3 against an emulator behind TLS, and
// testdata/websocket_smoke.py (azure-servicebus 7.8 with AMQP over WebSockets,
// uamqp's own WebSocket code) against the admin listener's
// /$servicebus/websocket behind TLS.
package pythontest
