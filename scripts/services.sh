#!/usr/bin/env bash
# Starts the services the tests talk to, when they are down: PostgreSQL, RabbitMQ and NATS (the machine's own,
# started with pg_ctlcluster, rabbitmq-server and nats-server), a single-node Kafka (scripts/kafka.sh), a second one
# that needs TLS and SASL (scripts/kafka-secure.sh) and ElasticMQ, an SQS-compatible server (scripts/elasticmq.sh).
# Installs PgBouncer (Debian's package) when it is missing and apt-get can: test/faults/pgbouncer.integration.test.ts
# starts private ones. Safe to run repeatedly.
# Set QUEUEBOX_SKIP_SERVICES=1 to leave services alone (e.g. when tests point at other servers by env vars).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${QUEUEBOX_SKIP_SERVICES:-}" = "1" ]; then
  echo "services: QUEUEBOX_SKIP_SERVICES=1, leaving services alone"
  exit 0
fi

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port seconds
  local i
  for ((i = 0; i < $3 * 5; i++)); do
    if answers "$2"; then echo "services: $1 answers on 127.0.0.1:$2"; return 0; fi
    sleep 0.2
  done
  echo "services: $1 did not answer on 127.0.0.1:$2 within $3 s" >&2
  return 1
}

if ! answers 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  else
    echo "services: PostgreSQL is down and not installed here; tests fall back as test/README.md says" >&2
  fi
fi
wait_for PostgreSQL 5432 60 || true

if ! answers 5672; then
  if command -v rabbitmq-server >/dev/null 2>&1; then
    echo "services: starting RabbitMQ"
    rabbitmq-server -detached
  else
    echo "services: RabbitMQ is down and not installed here" >&2
  fi
fi

if ! answers 4222; then
  if [ -x /usr/sbin/nats-server ]; then
    echo "services: starting NATS with JetStream"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  else
    echo "services: NATS is down and not installed here" >&2
  fi
fi

wait_for RabbitMQ 5672 120 || true
wait_for NATS 4222 30 || true

if [ -f scripts/kafka.sh ]; then
  bash scripts/kafka.sh start
fi

# A second, private Kafka with TLS and SASL (127.0.0.1:19092-19095) for the tests of secured Kafka destinations and
# sources; its first start makes a CA and formats storage (~15 s), so it is started here rather than by each test run.
if [ -f scripts/kafka-secure.sh ]; then
  bash scripts/kafka-secure.sh start || echo "services: the TLS + SASL Kafka (scripts/kafka-secure.sh) did not start; its tests start it themselves and fail" >&2
fi

if [ -f scripts/elasticmq.sh ]; then
  bash scripts/elasticmq.sh start
fi

# A NATS server 2.10+ for the tests of a NATS source's install metadata (Debian 12's is 2.9.10): fetched, not
# installed; those tests say they skipped when it cannot be had.
if [ -f scripts/nats-server-2.10.sh ]; then
  bash scripts/nats-server-2.10.sh >/dev/null || echo "services: no NATS server 2.10 (scripts/nats-server-2.10.sh); the NATS install-metadata tests say they skipped" >&2
fi

if [ ! -x /usr/sbin/pgbouncer ] && [ -z "${QUEUEBOX_TEST_PGBOUNCER:-}" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "services: installing PgBouncer (apt-get install pgbouncer) for the pooler tests"
    if ! (timeout 300 apt-get install -y -q pgbouncer >/dev/null 2>&1 ||
      (timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 300 apt-get install -y -q pgbouncer >/dev/null 2>&1)); then
      echo "services: PgBouncer could not be installed; the pooler tests say they skipped" >&2
    fi
  else
    echo "services: PgBouncer is not installed here (apt-get install pgbouncer); the pooler tests say they skipped" >&2
  fi
fi
