#!/usr/bin/env bash
# Installs the Debian packages the integration tests drive: kcat (librdkafka),
# the Python Kafka clients, Node.js and npm (for KafkaJS), and Burrow (the lag monitor) with the ZooKeeper
# it needs for itself (test/compat/burrow_test.go). Needs root (as on CI); otherwise says what to
# install.
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || need+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || need+=(python3-kafka)
[ -x /usr/bin/Burrow ] || need+=(burrow)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# Node.js and npm: KafkaJS (installed by make kafkajs) runs on them.
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing test packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
