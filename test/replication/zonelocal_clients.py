"""confluent-kafka-python (librdkafka) producer and consumer for the
zone-local produce tests (zonelocal_clients_test.go). Only client.id
names the zone; everything else is the client's defaults but for what
each mode states.

usage: zonelocal_clients.py produce BOOTSTRAP TOPIC CLIENT_ID MODE N PARTITIONS
           MODE plain (enable.idempotence=false, acks=1), idempotent
           (enable.idempotence=true), pipelined (idempotent, linger.ms=0
           and batch.size=4096: many small requests, up to 5 in flight)
           moving (pipelined, 5 ms between rounds of one record per
           partition: a producer running while leaders move) or
           transactional (transactional.id zl-py-txn): N records per
           partition, record i to partition p keyed "<MODE>-<p>-<i>" with
           1000 random bytes, i-major.
           transactional runs three transactions of N records per
           partition: committed ("txc-<p>-<i>", i in [0, N)), aborted
           ("txa-<p>-<i>"), committed ("txc-<p>-<i>", i in [N, 2N)).
           Prints "leader <p> <id>" per partition as the client's
           metadata has it, then "<p> <offset> <key>" per delivered record
           (offset -1 when librdkafka delivered it without one: a record
           it acknowledged implicitly, after an error with the record
           possibly persisted and a later batch's success).
       zonelocal_clients.py consume BOOTSTRAP TOPIC CLIENT_ID ISOLATION COUNT
           a group member reading every partition from the start with
           isolation.level=ISOLATION until it has COUNT records and is at
           the end of every partition (a count, not the first end: the
           zone's broker serves fetches as a follower and may be a moment
           behind); prints "<p> <offset> <key>" per record.
Exits non-zero on any error.
"""
import os
import sys

import confluent_kafka as ck


def delivered(err, msg):
    if err is not None:
        sys.exit("delivery of %s failed: %s" % (msg.key().decode(), err))
    off = msg.offset()
    print("%d %d %s" % (msg.partition(), -1 if off is None else off, msg.key().decode()), flush=True)


def produce(bootstrap, topic, client_id, mode, n, partitions):
    n, partitions = int(n), int(partitions)
    conf = {"bootstrap.servers": bootstrap, "client.id": client_id}
    if mode == "plain":
        conf.update({"enable.idempotence": False, "acks": "1"})
    elif mode == "idempotent":
        conf.update({"enable.idempotence": True})
    elif mode in ("pipelined", "moving"):
        conf.update({"enable.idempotence": True, "linger.ms": 0, "batch.size": 4096})
    elif mode == "transactional":
        conf.update({"transactional.id": "zl-py-txn"})
    else:
        sys.exit("unknown mode %s" % mode)
    p = ck.Producer(conf)
    md = p.list_topics(topic, timeout=30)
    for part in sorted(md.topics[topic].partitions.values(), key=lambda pm: pm.id):
        print("leader %d %d" % (part.id, part.leader), flush=True)

    def send(prefix, first, last):
        for i in range(first, last):
            for part in range(partitions):
                while True:
                    try:
                        p.produce(topic, partition=part, key=("%s-%d-%d" % (prefix, part, i)).encode(),
                                  value=os.urandom(1000), on_delivery=delivered)
                        break
                    except BufferError:
                        p.poll(0.1)
                p.poll(0)
            if mode == "moving":
                p.poll(0.005)

    if mode != "transactional":
        send(mode, 0, n)
        if p.flush(60) != 0:
            sys.exit("records not delivered within 60 s")
        return
    p.init_transactions(60)
    for prefix, first, commit in (("txc", 0, True), ("txa", 0, False), ("txc", n, True)):
        p.begin_transaction()
        send(prefix, first, first + n)
        if commit:
            p.commit_transaction(60)
        else:
            if p.flush(60) != 0:  # the aborted records are in the log
                sys.exit("records not delivered within 60 s")
            p.abort_transaction(60)


def consume(bootstrap, topic, client_id, isolation, count):
    count = int(count)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                     "group.id": "zl-py-" + topic + "-" + isolation,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "enable.partition.eof": True, "isolation.level": isolation})
    parts = len(c.list_topics(topic, timeout=30).topics[topic].partitions)
    c.subscribe([topic])
    eof = set()
    idle = 0
    n = 0
    while n < count or len(eof) < parts:
        m = c.poll(1.0)
        if m is None:
            idle += 1
            if idle > 60:
                sys.exit("%d of %d records, at the end of %d of %d partitions, nothing for 60 s" % (n, count, len(eof), parts))
            continue
        idle = 0
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            sys.exit("consume: %s" % m.error())
        eof.discard(m.partition())
        n += 1
        print("%d %d %s" % (m.partition(), m.offset(), m.key().decode()), flush=True)
    c.close()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"produce": produce, "consume": consume}[cmd](*args)


if __name__ == "__main__":
    main()
