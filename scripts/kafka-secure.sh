#!/usr/bin/env bash
# Runs a second, private single-node Apache Kafka broker (KRaft combined mode) that needs TLS and SASL, for the
# tests of a Kafka destination or source on a secured cluster (MSK with SCRAM or TLS, Confluent Cloud's SASL_SSL
# PLAIN). It never touches the broker of scripts/kafka.sh on 127.0.0.1:9092: own cache dir, own data, own ports.
#
#   bash scripts/kafka-secure.sh start    make the CA and broker certificate (once), format storage with the SCRAM
#                                         users (once), start, wait until it answers metadata
#   bash scripts/kafka-secure.sh stop     stop the broker this script started (pid file), wait for it to exit
#   bash scripts/kafka-secure.sh status   say whether it answers (exit 0 yes, 3 no)
#
# Listeners, all on 127.0.0.1:
#   19092  SASL_SSL   PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; TLS with the certificate below
#   19093  SSL        TLS only (no client certificate asked)
#   19094  PLAINTEXT  between the broker and itself, and for the tests' admin client (topics, groups)
#   19095  CONTROLLER the KRaft controller
# Users (test values, the same on every machine): queuebox / queuebox-secret for PLAIN, SCRAM-SHA-256 and
# SCRAM-SHA-512 (SCRAM credentials written at format time with `kafka-storage format --add-scram`).
# TLS: a self-signed CA (tls/ca.pem in the cache dir, what a client's `ssl.ca` is given) signs the broker's
# certificate for 127.0.0.1 and localhost; both made with openssl at the first start, kept with the data.
#
# The jars are those of scripts/kafka.sh (same version, its cache): run `bash scripts/kafka.sh start` once first
# (scripts/services.sh does), which fetches them. Needs Java 17+, openssl, flock and setsid.
#
# Environment (all optional):
#   QUEUEBOX_KAFKA_VERSION             Kafka version whose cached jars to run (default: scripts/kafka.sh's)
#   QUEUEBOX_KAFKA_HOME                scripts/kafka.sh's cache dir, where the jars are
#   QUEUEBOX_KAFKA_SECURE_HOME         this broker's dir: data/, tls/, server.properties, kafka.pid, kafka.log
#                                      (default $HOME/.cache/queuebox/kafka-secure-<version>)
#   QUEUEBOX_KAFKA_START_TIMEOUT       seconds to wait for the broker to answer (default 90)
set -euo pipefail

readonly KAFKA_VERSION="${QUEUEBOX_KAFKA_VERSION:-4.1.2}"
readonly SCRIPT=kafka-secure.sh
readonly SERVICE="Kafka $KAFKA_VERSION (TLS + SASL)"
readonly ARTIFACT="org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
readonly HOST=127.0.0.1
readonly SASL_SSL_PORT=19092
readonly SSL_PORT=19093
# The probe's port: what java-service.sh calls PORT.
readonly PORT=19094
readonly CONTROLLER_PORT=19095
readonly JARS_HOME="${QUEUEBOX_KAFKA_HOME:-$HOME/.cache/queuebox/kafka-$KAFKA_VERSION}"
readonly SERVICE_HOME="${QUEUEBOX_KAFKA_SECURE_HOME:-$HOME/.cache/queuebox/kafka-secure-$KAFKA_VERSION}"
readonly HEAP_OPTS="-Xms128m -Xmx384m"
readonly START_TIMEOUT="${QUEUEBOX_KAFKA_START_TIMEOUT:-90}"
readonly STOP_GRACE=60
readonly PROBE="a metadata request"
readonly USER_NAME=queuebox
readonly USER_PASSWORD=queuebox-secret
# The broker's PKCS#12 keystore password: a test value, the keystore never leaves the cache dir.
readonly STORE_PASSWORD=queuebox-store

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly LIB_DIR="$JARS_HOME/lib"
readonly DATA_DIR="$SERVICE_HOME/data"
readonly TLS_DIR="$SERVICE_HOME/tls"
readonly SERVER_PROPS="$SERVICE_HOME/server.properties"
readonly ADMIN_PROPS="$SERVICE_HOME/admin.properties"
readonly LOG4J_CONF="$SERVICE_HOME/log4j2.properties"
readonly PID_FILE="$SERVICE_HOME/kafka.pid"
readonly LOG_FILE="$SERVICE_HOME/kafka.log"
readonly CMDLINE_MARK="kafka.Kafka $SERVER_PROPS"

# shellcheck source=lib/java-service.sh
source "$SCRIPT_DIR/lib/java-service.sh"

answers() {
  port_open "$HOST" "$PORT" || return 1
  jars_cached || return 1
  timeout 30 "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=ERROR \
    -cp "$LIB_DIR/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$PORT" --command-config "$ADMIN_PROPS" --list >/dev/null 2>&1
}

# The CA and the broker's certificate (SAN 127.0.0.1 and localhost), once: clients are given tls/ca.pem.
ensure_tls() {
  if [[ -f "$TLS_DIR/broker.p12" && -f "$TLS_DIR/ca.pem" ]]; then return; fi
  command -v openssl >/dev/null 2>&1 || fail "openssl not found (needed once to make the test CA)"
  say "making a self-signed CA and the broker certificate in $TLS_DIR"
  rm -rf "$TLS_DIR.tmp"
  mkdir -p "$TLS_DIR.tmp"
  (
    cd "$TLS_DIR.tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=QueueBox test CA" \
      -keyout ca.key -out ca.pem >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout broker.key -out broker.csr >/dev/null 2>&1
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'extendedKeyUsage=serverAuth' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile broker.ext -out broker.pem >/dev/null 2>&1
    openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
      -passout "pass:$STORE_PASSWORD" -out broker.p12 >/dev/null 2>&1
    rm -f broker.csr broker.ext ca.srl
  ) || fail "openssl could not make the test certificates"
  rm -rf "$TLS_DIR"
  mv "$TLS_DIR.tmp" "$TLS_DIR"
}

write_config() {
  mkdir -p "$SERVICE_HOME"
  cat >"$SERVER_PROPS.tmp" <<EOF
# Written by scripts/kafka-secure.sh on every start: edit the script, not this copy.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=SASL_SSL://$HOST:$SASL_SSL_PORT,SSL://$HOST:$SSL_PORT,PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=SASL_SSL://$HOST:$SASL_SSL_PORT,SSL://$HOST:$SSL_PORT,PLAINTEXT://$HOST:$PORT
listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA_DIR

ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/broker.p12
ssl.keystore.password=$STORE_PASSWORD
ssl.key.password=$STORE_PASSWORD
ssl.client.auth=none

sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$USER_NAME="$USER_PASSWORD";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;

default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
offsets.topic.num.partitions=2
transaction.state.log.num.partitions=2
group.initial.rebalance.delay.ms=0
num.partitions=1
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.hours=24
log.segment.bytes=16777216
EOF
  mv "$SERVER_PROPS.tmp" "$SERVER_PROPS"
  cp "$SCRIPT_DIR/kafka/log4j2.properties" "$LOG4J_CONF"
  printf '%s\n' 'request.timeout.ms=5000' 'default.api.timeout.ms=10000' >"$ADMIN_PROPS"
}

# Formatted once, with the SCRAM users: KRaft keeps SCRAM credentials in the metadata log, so --add-scram at
# format time is how a broker gets its first users without another listener to create them through.
ensure_formatted() {
  if [[ -f "$DATA_DIR/meta.properties" ]]; then return; fi
  local cluster_id out
  cluster_id="$("$JAVA" -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=ERROR \
    -cp "$LIB_DIR/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  [[ -n "$cluster_id" ]] || fail "kafka.tools.StorageTool random-uuid printed no cluster id"
  say "formatting storage in $DATA_DIR with the SCRAM users (cluster id $cluster_id)"
  mkdir -p "$DATA_DIR"
  if ! out="$("$JAVA" -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=WARN \
    -cp "$LIB_DIR/*" kafka.tools.StorageTool format --ignore-formatted \
    --cluster-id "$cluster_id" --config "$SERVER_PROPS" \
    --add-scram "SCRAM-SHA-256=[name=$USER_NAME,password=$USER_PASSWORD]" \
    --add-scram "SCRAM-SHA-512=[name=$USER_NAME,password=$USER_PASSWORD]" 2>&1)"; then
    printf '%s\n' "$out" >&2
    rm -rf "$DATA_DIR"
    fail "formatting $DATA_DIR failed"
  fi
}

cmd_start() {
  require_java17
  jars_cached || fail "no Kafka jars in $LIB_DIR: run 'bash scripts/kafka.sh start' once (it fetches them)"
  if start_lock_and_check write_config; then return 0; fi
  local port
  for port in "$SASL_SSL_PORT" "$SSL_PORT" "$PORT" "$CONTROLLER_PORT"; do
    if port_open "$HOST" "$port"; then fail "port $port is taken by another process"; fi
  done
  ensure_tls
  write_config
  ensure_formatted
  say "starting $SERVICE: SASL_SSL $HOST:$SASL_SSL_PORT, SSL $HOST:$SSL_PORT, PLAINTEXT $HOST:$PORT"
  # shellcheck disable=SC2086 # HEAP_OPTS holds several JVM flags
  launch "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=WARN \
    -Dkafka.logs.dir="$SERVICE_HOME" \
    -cp "$LIB_DIR/*" kafka.Kafka "$SERVER_PROPS"
}

secure_status() {
  if ! jars_cached; then
    say "not running here: no Kafka jars in $LIB_DIR"
    return 3
  fi
  [[ -f "$ADMIN_PROPS" && -f "$LOG4J_CONF" ]] || write_config
  cmd_status
}

dispatch "${1:-}" secure_status
