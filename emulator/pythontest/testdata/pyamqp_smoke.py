"""Smoke test of the emulator with pyamqp, the pure-Python AMQP stack of
azure-servicebus from 7.9 on (Debian's python3-azure ships it inside
azure-eventhub as azure.eventhub._pyamqp, a private module used here only to
exercise the wire). pyamqp decodes each performative into a list of the fields
on the wire, reads them by position and appends a transfer's payload after the
last field, so it needs every field sent, as Azure sends them.

Run by TestPyAMQPSmoke (python_test.go) with the environment described in
python_smoke.py; prints one JSON object as its last line, or the failing step
and exits 1.
"""

import json
import logging
import os
import sys
import time
import traceback

from azure.eventhub._pyamqp import ReceiveClient, SendClient
from azure.eventhub._pyamqp._connection import Connection
from azure.eventhub._pyamqp.authentication import SASTokenAuth
from azure.eventhub._pyamqp.constants import ReceiverSettleMode
from azure.eventhub._pyamqp.endpoints import Source
from azure.eventhub._pyamqp.error import AMQPError
from azure.eventhub._pyamqp.message import Message, Properties

QUEUE = os.environ.get("SB_QUEUE", "pyamqp-queue")
result = {}
step = "setup"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Receiver(ReceiveClient):
    """Keeps each message's delivery-id (field 1 of its transfer frame, read
    by position), which receive_message_batch drops."""

    delivery_ids = {}

    def _message_received(self, frame, message):
        self.delivery_ids[id(message)] = frame[1]
        super()._message_received(frame, message)


def connect(host, port, ca, auth):
    # This pyamqp connects its SASL transport to port 5671 whatever the
    # endpoint says; the test's AMQPS port is a free one, so open the
    # connection here with the port and hand it to the client.
    conn = Connection("amqps://{}:{}".format(host, port), sasl_credential=auth.sasl, port=int(port),
                      ssl_opts={"ca_certs": ca}, network_trace=bool(os.environ.get("SB_DEBUG")))
    conn.open()
    return conn


def main():
    global step
    if os.environ.get("SB_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    host, port = os.environ["SB_AMQPS"].rsplit(":", 1)
    ca = os.environ["SB_CA"]
    key_name, key = os.environ["SB_KEY_NAME"], os.environ["SB_KEY"]
    entity = "amqps://{}/{}".format(host, QUEUE)
    audience = "sb://{}/{}".format(host, QUEUE)

    step = "send"
    auth = SASTokenAuth(audience, audience, key_name, key)
    conn = connect(host, port, ca, auth)
    sender = SendClient(host, entity, auth=auth, connection_verify=ca)
    sender.open(connection=conn)
    while not sender.client_ready():
        time.sleep(0.05)
    for i in range(3):
        sender.send_message(Message(data=[b"pyamqp-%d" % i], properties=Properties(message_id="p%d" % i)))
    # 200 kB: several transfer frames each way.
    big = bytes(range(256)) * 800
    sender.send_message(Message(data=[big], properties=Properties(message_id="big")))
    sender.close()
    conn.close()
    result["sent"] = 3

    step = "receive"
    auth = SASTokenAuth(audience, audience, key_name, key)
    conn = connect(host, port, ca, auth)
    receiver = Receiver(host, entity, auth=auth, connection_verify=ca,
                             receive_settle_mode=ReceiverSettleMode.Second, link_credit=10)
    receiver.open(connection=conn)
    while not receiver.client_ready():
        time.sleep(0.05)
    got = []
    deadline = time.time() + 15
    while len(got) < 4 and time.time() < deadline:
        got.extend(receiver.receive_message_batch(max_batch_size=10, timeout=1))
    check(len(got) == 4, "received %d of 4 messages" % len(got))
    large = [m for m in got if m.properties.message_id in (b"big", "big")]
    check(len(large) == 1 and b"".join(large[0].data) == big, "the 200 kB message came back different")
    receiver.settle_messages(receiver.delivery_ids[id(large[0])], "accepted")
    result["big_bytes"] = len(b"".join(large[0].data))
    got = [m for m in got if m is not large[0]]
    bodies = sorted(b"".join(m.data).decode() for m in got)
    check(bodies == ["pyamqp-0", "pyamqp-1", "pyamqp-2"], "bodies %r" % bodies)
    result["received"] = bodies
    annotations = got[0].message_annotations or {}
    seq = annotations.get(b"x-opt-sequence-number")
    check(isinstance(seq, int) and seq > 0, "x-opt-sequence-number %r" % seq)

    step = "settle"
    # Accept two; reject the third with Service Bus's dead-letter error, as
    # the pyamqp-based SDK dead-letters.
    by_body = {b"".join(m.data).decode(): m for m in got}
    for body in ("pyamqp-0", "pyamqp-1"):
        receiver.settle_messages(receiver.delivery_ids[id(by_body[body])], "accepted")
    receiver.settle_messages(receiver.delivery_ids[id(by_body["pyamqp-2"])], "rejected", error=AMQPError(
        condition=b"com.microsoft:dead-letter", description="pyamqp description",
        info={"DeadLetterReason": "PyamqpReason", "DeadLetterErrorDescription": "pyamqp description"}))
    receiver.close()
    conn.close()
    result["settled"] = 3

    step = "session"
    # The pyamqp-based SDK accepts a session with a plain-string filter and
    # reads the attach reply by position: the locked session id from the
    # source's filter, the lock expiry from the link properties.
    sq = os.environ.get("SB_SESSION_QUEUE", "pyamqp-sessions")
    s_entity = "amqps://{}/{}".format(host, sq)
    s_audience = "sb://{}/{}".format(host, sq)
    auth = SASTokenAuth(s_audience, s_audience, key_name, key)
    conn = connect(host, port, ca, auth)
    sender = SendClient(host, s_entity, auth=auth, connection_verify=ca)
    sender.open(connection=conn)
    while not sender.client_ready():
        time.sleep(0.05)
    for i in range(2):
        sender.send_message(Message(data=[b"alpha-%d" % i], properties=Properties(message_id="a%d" % i, group_id="alpha")))
    sender.close()
    attached = []
    receiver = Receiver(host, Source(address=s_entity, filters={b"com.microsoft:session-filter": None}),
                        auth=auth, connection_verify=ca, receive_settle_mode=ReceiverSettleMode.Second,
                        link_credit=10, on_attach=attached.append)
    receiver.open(connection=conn)
    while not receiver.client_ready():
        time.sleep(0.05)
    got = []
    deadline = time.time() + 15
    while len(got) < 2 and time.time() < deadline:
        got.extend(receiver.receive_message_batch(max_batch_size=10, timeout=1))
    check(len(attached) == 1, "on_attach ran %d times" % len(attached))
    session_id = attached[0].source.filters[b"com.microsoft:session-filter"]
    check(session_id in (b"alpha", "alpha"), "locked session %r" % session_id)
    locked_until = (attached[0].properties or {}).get(b"com.microsoft:locked-until-utc")
    check(isinstance(locked_until, int) and locked_until > 0, "locked-until-utc %r" % locked_until)
    bodies = [b"".join(m.data).decode() for m in got]
    check(bodies == ["alpha-0", "alpha-1"], "session messages %r" % bodies)
    for m in got:
        receiver.settle_messages(receiver.delivery_ids[id(m)], "accepted")
    receiver.close()
    conn.close()
    result["session"] = session_id.decode() if isinstance(session_id, bytes) else session_id
    result["session_messages"] = bodies


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report the step, then fail
        traceback.print_exc()
        print(json.dumps({"failed_step": step, "error": "%s: %s" % (type(e).__name__, e), "partial": result}))
        sys.exit(1)
    print(json.dumps(result))
