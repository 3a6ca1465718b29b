"""Producer and consumer-group member for the compat suite.

usage: clients.py {confluent|kafkapython} produce BOOTSTRAP TOPIC < lines(key:value)
       clients.py {confluent|kafkapython} consume BOOTSTRAP GROUP TOPIC CLIENT_ID
       clients.py {confluent|kafkapython} version

A consumer prints "partition offset key" per record (flushed) and, on
SIGTERM, commits synchronously, closes (leaving the group) and exits 0.
Producers use acks=all (stated: kafka-python's default is acks=1) and the
client's defaults otherwise; produce exits 0 once every record is acked.
"""
import signal
import sys

running = True


def stop(_sig, _frame):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)


def records():
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line:
            k, v = line.split(":", 1)
            yield k.encode(), v.encode()


def confluent(cmd, args):
    import confluent_kafka as ck
    if cmd == "version":
        print("confluent-kafka-python %s (librdkafka %s)" % (ck.version()[0], ck.libversion()[0]))
        return
    if cmd == "produce":
        bootstrap, topic = args
        p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        errors = []

        def report(err, _msg):
            if err is not None:
                errors.append(err)

        for k, v in records():
            while True:
                try:
                    p.produce(topic, key=k, value=v, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        if p.flush(60) != 0 or errors:
            sys.exit("produce failed: %r" % errors[:5])
        return
    bootstrap, group, topic, client_id = args
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                     "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    while running:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            print("error: %s" % m.error(), file=sys.stderr)
            continue
        print("%d %d %s" % (m.partition(), m.offset(), m.key().decode()), flush=True)
    try:
        c.commit(asynchronous=False)
    except ck.KafkaException as e:  # nothing to commit
        print("commit: %s" % e, file=sys.stderr)
    c.close()


def kafkapython(cmd, args):
    import kafka
    if cmd == "version":
        print("kafka-python %s" % kafka.__version__)
        return
    if cmd == "produce":
        bootstrap, topic = args
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        futures = [p.send(topic, key=k, value=v) for k, v in records()]
        p.flush(60)
        for f in futures:
            f.get(timeout=60)
        p.close()
        return
    bootstrap, group, topic, client_id = args
    c = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                            auto_offset_reset="earliest")
    while running:
        for _tp, msgs in c.poll(timeout_ms=200).items():
            for m in msgs:
                print("%d %d %s" % (m.partition, m.offset, m.key.decode()), flush=True)
    c.commit()
    c.close()


def main():
    client, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"confluent": confluent, "kafkapython": kafkapython}[client](cmd, args)


if __name__ == "__main__":
    main()
