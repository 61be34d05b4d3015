"""Smoke test of the emulator with the Python SDK (azure-servicebus).

Run by TestPythonSDKSmoke (python_test.go) with Debian's /usr/bin/python3 and
its python3-azure package (azure-servicebus 7.8 over uamqp). The Go test puts
TLS in front of the emulator, because this SDK speaks only AMQPS and HTTPS,
and passes:

  SB_AMQPS   host:port of the AMQPS endpoint
  SB_HTTPS   host:port of the admin HTTPS endpoint
  SB_CA      the PEM certificate both endpoints present
  SB_KEY_NAME, SB_KEY  the SAS key

Each step asserts what it observes; the script prints one JSON object of
what it observed as its last line and exits 0, or prints the failing step and
exits 1. SB_DEBUG=1 turns on the SDK's and uamqp's frame logging.
"""

import datetime
import json
import logging
import os
import sys
import traceback

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageSizeExceededError
from azure.servicebus.management import ServiceBusAdministrationClient
import azure.servicebus._common._configuration as sb_configuration

QUEUE = "py-queue"
SESSION_QUEUE = "py-sessions"

result = {}
step = "setup"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def exact_batch(sender, target):
    """A batch the SDK sizes at exactly target bytes (None: its maximum)."""
    batch = sender.create_message_batch()
    target = target or batch.max_size_in_bytes

    def cost(n):  # what a message with an n-byte body adds to a batch
        probe = sender.create_message_batch()
        before = probe.size_in_bytes
        probe.add_message(ServiceBusMessage("y" * n))
        return probe.size_in_bytes - before

    filler = cost(1000)
    while batch.size_in_bytes + 2 * filler < target:
        batch.add_message(ServiceBusMessage("x" * 1000))
    need = target - batch.size_in_bytes
    n = 1000 + need - filler
    while cost(n) > need:
        n -= 1
    while cost(n) < need:
        n += 1
    batch.add_message(ServiceBusMessage("y" * n))
    check(batch.size_in_bytes == target, "batch sized %d, want %d" % (batch.size_in_bytes, target))
    return batch


def main():
    global step
    debug = bool(os.environ.get("SB_DEBUG"))
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    key_name, key = os.environ["SB_KEY_NAME"], os.environ["SB_KEY"]

    # azure-servicebus 7.8 connects to port 5671 (TransportType.Amqp) and
    # offers no setting for another port except a custom endpoint, which
    # forces WebSockets; the test's AMQPS port is a free one.
    host, port = os.environ["SB_AMQPS"].rsplit(":", 1)
    sb_configuration.DEFAULT_AMQPS_PORT = int(port)
    conn = "Endpoint=sb://{}/;SharedAccessKeyName={};SharedAccessKey={}".format(host, key_name, key)
    # The admin client talks https://<endpoint host:port>, trusting
    # REQUESTS_CA_BUNDLE (set by the Go test).
    admin_conn = "Endpoint=sb://{}/;SharedAccessKeyName={};SharedAccessKey={}".format(
        os.environ["SB_HTTPS"], key_name, key)

    step = "admin"
    admin = ServiceBusAdministrationClient.from_connection_string(admin_conn, logging_enable=debug)
    with admin:
        admin.create_queue(QUEUE, max_delivery_count=5, lock_duration=datetime.timedelta(seconds=30))
        admin.create_queue(SESSION_QUEUE, requires_session=True)
        props = admin.get_queue(QUEUE)
        check(props.name == QUEUE, "get_queue name: %r" % props.name)
        check(props.max_delivery_count == 5, "get_queue max_delivery_count: %r" % props.max_delivery_count)
        check(props.lock_duration == datetime.timedelta(seconds=30), "get_queue lock_duration: %r" % props.lock_duration)
        check(admin.get_queue(SESSION_QUEUE).requires_session, "session queue does not require sessions")
        names = sorted(q.name for q in admin.list_queues())
        check(QUEUE in names and SESSION_QUEUE in names, "list_queues: %r" % names)
        result["admin_queues"] = names
        result["admin_max_delivery_count"] = props.max_delivery_count

    client = ServiceBusClient.from_connection_string(
        conn, connection_verify=os.environ["SB_CA"], logging_enable=debug)
    with client:
        step = "send"
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage(
                "hello", message_id="m1", subject="greeting",
                application_properties={"kind": "smoke", "n": 1}))
            batch = sender.create_message_batch()
            for i in range(2, 5):
                batch.add_message(ServiceBusMessage("batch-%d" % i, message_id="m%d" % i))
            sender.send_messages(batch)
            sender.send_messages([ServiceBusMessage("list-%d" % i, message_id="m%d" % i) for i in (5, 6)])

        step = "receive"
        with client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            check(len(peeked) == 6, "peeked %d messages, want 6" % len(peeked))
            got = []
            while len(got) < 6:
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                check(batch, "receive_messages returned nothing after %d messages" % len(got))
                got.extend(batch)
            by_id = {m.message_id: m for m in got}
            check(sorted(by_id) == ["m1", "m2", "m3", "m4", "m5", "m6"], "received ids %r" % sorted(by_id))
            first = by_id["m1"]
            check(str(first) == "hello", "body %r" % str(first))
            check(first.subject == "greeting", "subject %r" % first.subject)
            props = {k.decode() if isinstance(k, bytes) else k: v for k, v in (first.application_properties or {}).items()}
            check(props.get("kind") in ("smoke", b"smoke") and props.get("n") == 1, "application properties %r" % props)
            check(first.sequence_number is not None and first.sequence_number > 0, "sequence number %r" % first.sequence_number)
            check(first.delivery_count == 0, "delivery count %r" % first.delivery_count)
            result["received"] = sorted(by_id)
            result["sequence_numbers"] = sorted(m.sequence_number for m in got)

            step = "renew lock"
            before = by_id["m2"].locked_until_utc
            after = receiver.renew_message_lock(by_id["m2"])
            check(after >= before, "renewed lock %r before old %r" % (after, before))

            step = "complete and abandon"
            for mid in ("m1", "m2", "m3"):
                receiver.complete_message(by_id[mid])
            receiver.abandon_message(by_id["m6"])

            step = "dead-letter"
            receiver.dead_letter_message(by_id["m4"], reason="SmokeReason", error_description="smoke description")

            step = "defer"
            receiver.defer_message(by_id["m5"])
            deferred_seq = by_id["m5"].sequence_number
            deferred = receiver.receive_deferred_messages([deferred_seq])
            check(len(deferred) == 1 and deferred[0].message_id == "m5", "deferred %r" % [m.message_id for m in deferred])
            receiver.complete_message(deferred[0])
            result["deferred_sequence_number"] = deferred_seq

            step = "receive abandoned"
            again = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            check(len(again) == 1 and again[0].message_id == "m6", "after abandon %r" % [m.message_id for m in again])
            check(again[0].delivery_count == 1, "delivery count after abandon %r" % again[0].delivery_count)
            receiver.complete_message(again[0])
            result["abandoned_delivery_count"] = again[0].delivery_count

        step = "dead-letter queue"
        with client.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
            dead = dlq.receive_messages(max_message_count=5, max_wait_time=5)
            check(len(dead) == 1 and dead[0].message_id == "m4", "dead letters %r" % [m.message_id for m in dead])
            check(dead[0].dead_letter_reason == "SmokeReason", "reason %r" % dead[0].dead_letter_reason)
            check(dead[0].dead_letter_error_description == "smoke description",
                  "description %r" % dead[0].dead_letter_error_description)
            result["dead_letter_reason"] = dead[0].dead_letter_reason
            result["dead_letter_description"] = dead[0].dead_letter_error_description
            dlq.complete_message(dead[0])

        step = "schedule"
        with client.get_queue_sender(QUEUE) as sender:
            later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
            seqs = sender.schedule_messages(ServiceBusMessage("later", message_id="s1"), later)
            check(len(seqs) == 1, "schedule returned %r" % seqs)
            sender.cancel_scheduled_messages(seqs)
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            check(receiver.peek_messages(max_message_count=5) == [], "a cancelled scheduled message is still there")
        result["scheduled"] = len(seqs)

        step = "sessions"
        with client.get_queue_sender(SESSION_QUEUE) as sender:
            sender.send_messages([ServiceBusMessage("s-%d" % i, session_id="alpha", message_id="a%d" % i) for i in range(3)])
            sender.send_messages(ServiceBusMessage("other", session_id="beta", message_id="b0"))
        with client.get_queue_receiver(SESSION_QUEUE, session_id="alpha", max_wait_time=5) as receiver:
            session = receiver.session
            check(session.session_id == "alpha", "session id %r" % session.session_id)
            session.set_state("step-1")
            state = session.get_state()
            check(state in (b"step-1", "step-1"), "session state %r" % state)
            ids = []
            while len(ids) < 3:
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                check(batch, "session receive returned nothing after %r" % ids)
                for m in batch:
                    check(m.session_id == "alpha", "message of session %r" % m.session_id)
                    ids.append(m.message_id)
                    receiver.complete_message(m)
            check(ids == ["a0", "a1", "a2"], "session order %r" % ids)
            session.renew_lock()
            result["session_messages"] = ids
            result["session_state"] = state.decode() if isinstance(state, bytes) else state
        with client.get_queue_receiver(SESSION_QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
            check(receiver.session.session_id == "beta", "next available session %r" % receiver.session.session_id)
            batch = receiver.receive_messages(max_message_count=5, max_wait_time=5)
            check([m.message_id for m in batch] == ["b0"], "next session messages %r" % [m.message_id for m in batch])
            receiver.complete_message(batch[0])
            result["next_session"] = receiver.session.session_id

        step = "full batch"
        # Azure refuses a delivery whose payload exceeds the link's
        # max-message-size (262,144 bytes on Standard) and takes one that
        # does not; this SDK's size accounting is the batch's size on the
        # wire. Batches sized exactly 262,136 and 262,144 bytes must pass.
        sizes, sent = [], 0
        with client.get_queue_sender(QUEUE) as sender:
            for target in (262136, None):
                batch = exact_batch(sender, target)
                sizes.append(batch.size_in_bytes)
                sent += len(batch)
                sender.send_messages(batch)
            result["batch_max_size"] = batch.max_size_in_bytes
        result["batch_sizes"] = sizes
        result["batch_messages"] = sent
        with client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                       max_wait_time=5) as receiver:
            count = 0
            while count < sent:
                got = receiver.receive_messages(max_message_count=200, max_wait_time=5)
                check(got, "received %d of the full batches' %d messages" % (count, sent))
                count += len(got)
            result["batch_received"] = count

    step = "admin delete"
    with ServiceBusAdministrationClient.from_connection_string(admin_conn) as admin:
        admin.delete_queue(SESSION_QUEUE)
        names = [q.name for q in admin.list_queues()]
        check(SESSION_QUEUE not in names, "deleted queue still listed: %r" % names)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report the step, then fail
        traceback.print_exc()
        print(json.dumps({"failed_step": step, "error": "%s: %s" % (type(e).__name__, e), "partial": result}))
        sys.exit(1)
    print(json.dumps(result))
