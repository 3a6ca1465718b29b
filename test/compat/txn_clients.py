"""Transactional producer and isolation-level consumer for the compat suite
(confluent-kafka-python, i.e. librdkafka).

usage: txn_clients.py produce BOOTSTRAP TOPIC TXNID TXNS PER_TXN
           TXNS transactions of PER_TXN records each, alternately
           committed ("c-<i>") and aborted ("a-<i>"); prints "ok".
       txn_clients.py consume BOOTSTRAP TOPIC ISOLATION
           reads from the start to the end of every partition with
           isolation.level=ISOLATION; prints one value per line.
       txn_clients.py zombie BOOTSTRAP TOPIC TXNID
           a producer whose transactional.id is taken over by a second one
           tries to commit; prints "fenced <error name>" when refused.
"""
import sys

import confluent_kafka as ck


def producer(bootstrap, txnid):
    # acks=all: what a transactional (idempotent) producer must use,
    # stated rather than left to librdkafka to force.
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txnid, "acks": "all",
                     "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    return p


def produce(bootstrap, topic, txnid, txns, per_txn):
    p = producer(bootstrap, txnid)
    n = 0
    for t in range(int(txns)):
        commit = t % 2 == 0
        p.begin_transaction()
        for _ in range(int(per_txn)):
            prefix = "c" if commit else "a"
            p.produce(topic, key=str(n % 7).encode(), value=("%s-%d" % (prefix, n)).encode())
            n += 1
            p.poll(0)
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(60)  # the aborted records are in the log
            p.abort_transaction(60)
    print("ok")


def consume(bootstrap, topic, isolation):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader-" + isolation,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "enable.partition.eof": True, "isolation.level": isolation})
    md = c.list_topics(topic, timeout=30)
    parts = len(md.topics[topic].partitions)
    c.subscribe([topic])
    eof = set()
    idle = 0
    while len(eof) < parts:
        m = c.poll(1.0)
        if m is None:
            idle += 1
            if idle > 60:
                sys.exit("no EOF on %d of %d partitions" % (parts - len(eof), parts))
            continue
        idle = 0
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            sys.exit("consume: %s" % m.error())
        eof.discard(m.partition())
        print(m.value().decode())
    c.close()


def zombie(bootstrap, topic, txnid):
    old = producer(bootstrap, txnid)
    old.begin_transaction()
    old.produce(topic, value=b"zombie-1")
    old.flush(30)
    new = producer(bootstrap, txnid)  # bumps the epoch: old is fenced
    try:
        old.produce(topic, value=b"zombie-2")
        old.flush(30)
        old.commit_transaction(30)
    except ck.KafkaException as e:
        err = e.args[0]
        print("fenced %s fatal=%s" % (err.name(), err.fatal()))
        if not err.fatal():
            # librdkafka asks to abort; the coordinator refuses the
            # old epoch, which makes the error fatal.
            try:
                old.abort_transaction(30)
                print("abort accepted")
            except ck.KafkaException as e2:
                err2 = e2.args[0]
                print("abort refused %s fatal=%s" % (err2.name(), err2.fatal()))
        new.begin_transaction()
        new.produce(topic, value=b"after-fence")
        new.commit_transaction(30)
        return
    sys.exit("the zombie committed")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"produce": produce, "consume": consume, "zombie": zombie}[cmd](*args)


if __name__ == "__main__":
    main()
