"""Secured produce-and-consume check for the compat suite (security_test.go).

usage: secure_clients.py {confluent|kafkapython} BOOTSTRAP TOPIC CAFILE MECHANISM USER PASSWORD

Produces 10 records (acks=all) over SASL_SSL with the given mechanism, reads them back
from the beginning and prints "ok 10"; any client error exits non-zero with
the error on stderr.
"""
import sys
import time

N = 10


def confluent(bootstrap, topic, ca, mech, user, password):
    import confluent_kafka as ck
    errors = []
    common = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanisms": mech,
              "sasl.username": user, "sasl.password": password, "ssl.ca.location": ca,
              "error_cb": lambda e: errors.append(e)}
    p = ck.Producer(dict(common, acks="all"))
    for i in range(N):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    left = p.flush(30)
    if left or errors:
        sys.exit("produce failed: %d unsent, errors %r" % (left, errors[:3]))
    c = ck.Consumer(dict(common, **{"group.id": "secure-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, deadline = 0, time.time() + 60
    while got < N and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    if got < N or errors:
        sys.exit("consumed %d of %d, errors %r" % (got, N, errors[:3]))
    print("ok %d" % got)


def kafkapython(bootstrap, topic, ca, mech, user, password):
    import kafka
    common = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL", sasl_mechanism=mech,
                  sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=ca)
    p = kafka.KafkaProducer(acks="all", **common)
    for f in [p.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]:
        f.get(timeout=30)
    p.close()
    c = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000, **common)
    got = sum(1 for _ in zip(range(N), c))
    c.close()
    if got < N:
        sys.exit("consumed %d of %d" % (got, N))
    print("ok %d" % got)


def kafkapython_acls(bootstrap, topic, ca, mech, user, password):
    """CreateAcls, DescribeAcls and DeleteAcls through kafka-python's admin
    client (v0/v1 of the ACL APIs): a literal and a prefixed grant for
    User:bob, listed, one deleted, listed again."""
    from kafka.admin import (KafkaAdminClient, ACL, ACLFilter, ResourcePattern, ResourcePatternFilter,
                             ACLOperation, ACLPermissionType, ResourceType, ACLResourcePatternType)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_SSL", sasl_mechanism=mech,
                             sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=ca)
    literal = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, topic))
    prefixed = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                   ResourcePattern(ResourceType.TOPIC, topic + "-", ACLResourcePatternType.PREFIXED))
    res = admin.create_acls([literal, prefixed])
    if res["failed"] or len(res["succeeded"]) != 2:
        sys.exit("create_acls: %r" % (res,))
    bobs = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    acls, err = admin.describe_acls(bobs)
    if err.errno != 0 or len(acls) != 2:
        sys.exit("describe_acls: %r %r" % (acls, err))
    only_prefixed = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                              ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.PREFIXED))
    deleted = admin.delete_acls([only_prefixed])
    if len(deleted) != 1 or deleted[0][2].errno != 0 or len(deleted[0][1]) != 1:
        sys.exit("delete_acls: %r" % (deleted,))
    acls, err = admin.describe_acls(bobs)
    if err.errno != 0 or len(acls) != 1 or acls[0].resource_pattern.resource_name != topic:
        sys.exit("describe_acls after delete: %r %r" % (acls, err))
    admin.close()
    print("ok acls")


def main():
    client, args = sys.argv[1], sys.argv[2:]
    {"confluent": confluent, "kafkapython": kafkapython, "kafkapython-acls": kafkapython_acls}[client](*args)


if __name__ == "__main__":
    main()
