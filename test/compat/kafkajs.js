// Producer, consumer-group member and transactional producer for the
// compat suite, with KafkaJS (installed by `make test-deps` into
// $STRATA_KAFKAJS/node_modules).
//
// usage: node kafkajs.js version
//        node kafkajs.js produce BOOTSTRAP TOPIC < lines(key:value)
//        node kafkajs.js consume BOOTSTRAP GROUP TOPIC CLIENT_ID
//        node kafkajs.js txn BOOTSTRAP TOPIC TXNID TXNS PER_TXN
//
// produce uses acks=all (stated: KafkaJS's default is -1 too) and the
// client's defaults otherwise, and exits 0 once every record is acked. A
// consumer prints "partition offset key" per record and, on SIGTERM,
// disconnects (committing what it consumed and leaving the group) and
// exits 0. txn runs TXNS transactions of PER_TXN records, alternately
// committed ("c-<i>") and aborted ("a-<i>"), and prints "ok".
'use strict';
const path = require('path');

// KafkaJS from the directory make test-deps installs it into.
const kafkajsDir = path.join(process.env.STRATA_KAFKAJS || '', 'node_modules', 'kafkajs');
const { Kafka, logLevel } = require(kafkajsDir);

const [cmd, ...args] = process.argv.slice(2);

function client(bootstrap, clientId) {
  return new Kafka({ brokers: [bootstrap], clientId: clientId || 'kafkajs-compat', logLevel: logLevel.WARN });
}

function readLines() {
  return new Promise((resolve) => {
    let data = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (c) => { data += c; });
    process.stdin.on('end', () => resolve(data.split('\n').filter((l) => l.length > 0)));
  });
}

async function produce(bootstrap, topic) {
  const messages = (await readLines()).map((l) => {
    const i = l.indexOf(':');
    return { key: l.slice(0, i), value: l.slice(i + 1) };
  });
  const p = client(bootstrap).producer();
  await p.connect();
  for (let i = 0; i < messages.length; i += 500) {
    await p.send({ topic, acks: -1, messages: messages.slice(i, i + 500) });
  }
  await p.disconnect();
}

async function consume(bootstrap, group, topic, clientId) {
  const c = client(bootstrap, clientId).consumer({ groupId: group });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  let stopping = false;
  process.on('SIGTERM', async () => {
    if (stopping) return;
    stopping = true;
    try {
      await c.disconnect();
      process.exit(0);
    } catch (e) {
      console.error('disconnect:', e);
      process.exit(1);
    }
  });
  await c.run({
    eachMessage: async ({ partition, message }) => {
      process.stdout.write(`${partition} ${message.offset} ${message.key.toString()}\n`);
    },
  });
}

async function txn(bootstrap, topic, txnId, txns, perTxn) {
  const p = client(bootstrap).producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  let n = 0;
  for (let t = 0; t < txns; t++) {
    const commit = t % 2 === 0;
    const tx = await p.transaction();
    const messages = [];
    for (let i = 0; i < perTxn; i++, n++) {
      messages.push({ key: String(n % 7), value: `${commit ? 'c' : 'a'}-${n}` });
    }
    await tx.send({ topic, acks: -1, messages });
    if (commit) {
      await tx.commit();
    } else {
      await tx.abort();
    }
  }
  await p.disconnect();
  console.log('ok');
}

async function main() {
  switch (cmd) {
    case 'version':
      console.log(`kafkajs ${require(path.join(kafkajsDir, 'package.json')).version} (node ${process.version})`);
      return;
    case 'produce':
      return produce(args[0], args[1]);
    case 'consume':
      return consume(args[0], args[1], args[2], args[3]);
    case 'txn':
      return txn(args[0], args[1], args[2], Number(args[3]), Number(args[4]));
    default:
      throw new Error(`unknown command ${cmd}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
