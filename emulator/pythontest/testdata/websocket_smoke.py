"""Smoke test of the emulator's AMQP over WebSockets with the Python SDK.

Run by TestPythonSDKWebSocket (python_test.go) with Debian's
/usr/bin/python3 and its python3-azure package (azure-servicebus 7.8 over
uamqp, whose WebSocket transport is uamqp's own C code, offering the
subprotocol AMQPWSB10). The Go test puts TLS in front of the emulator's admin
listener, which serves /$servicebus/websocket, and passes:

  SB_WSS     host:port of that TLS endpoint
  SB_CA      the PEM certificate it presents
  SB_KEY_NAME, SB_KEY  the SAS key

The connection string names a host no one listens on: every connection goes
to the custom endpoint, over WebSockets. The script sends, receives,
completes, dead-letters and peeks the dead-letter queue, and prints one JSON
object of what it observed as its last line (exit 0), or the failing step
(exit 1). SB_DEBUG=1 turns on the SDK's and uamqp's frame logging.
"""

import json
import logging
import os
import sys
import traceback

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSubQueue,
    TransportType,
)

QUEUE = "ws-queue"

result = {}
step = "setup"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    global step
    debug = bool(os.environ.get("SB_DEBUG"))
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    key_name, key = os.environ["SB_KEY_NAME"], os.environ["SB_KEY"]
    conn = "Endpoint=sb://127.0.0.1:1/;SharedAccessKeyName={};SharedAccessKey={}".format(key_name, key)
    client = ServiceBusClient.from_connection_string(
        conn,
        transport_type=TransportType.AmqpOverWebsocket,
        custom_endpoint_address="sb://" + os.environ["SB_WSS"],
        connection_verify=os.environ["SB_CA"],
        logging_enable=debug,
    )
    with client:
        step = "send"
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages([ServiceBusMessage("ws-%d" % i, message_id="w%d" % i) for i in range(3)])

        step = "receive"
        with client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver:
            got = []
            while len(got) < 3:
                batch = receiver.receive_messages(max_message_count=3, max_wait_time=5)
                check(batch, "receive_messages returned nothing after %d messages" % len(got))
                got.extend(batch)
            result["received"] = sorted(m.message_id for m in got)
            got.sort(key=lambda m: m.message_id)
            receiver.complete_message(got[0])
            receiver.dead_letter_message(got[1], reason="OverWebSockets", error_description="python")
            receiver.complete_message(got[2])

        step = "peek the dead-letter queue"
        with client.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
            peeked = dlq.peek_messages(max_message_count=10)
            check(len(peeked) == 1, "peeked %d dead letters, want 1" % len(peeked))
            result["dead_letter"] = [peeked[0].message_id, peeked[0].dead_letter_reason]
    print(json.dumps(result))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        print("FAILED at step %r" % step)
        sys.exit(1)
