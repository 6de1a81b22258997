#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft combined mode) on 127.0.0.1:9092 for tests.
#
#   bash scripts/kafka.sh start    fetch jars (once), format storage (once), start, wait until it answers metadata
#   bash scripts/kafka.sh stop     stop the broker this script started (pid file), wait for it to exit
#   bash scripts/kafka.sh status   say whether a broker answers on 127.0.0.1:9092 (exit 0 yes, 3 no)
#
# No Kafka install is needed: the broker's jars come from Maven Central with `mvn` into a cache outside the repo.
# Needs Java 17+ (Kafka 4.x brokers refuse older), Maven 3.6.3+, flock and setsid (util-linux).
# What it shares with scripts/elasticmq.sh (fetch, start, probe, stop) is scripts/lib/java-service.sh.
#
# Environment (all optional):
#   QUEUEBOX_KAFKA_VERSION        Kafka version to fetch and run (default below)
#   QUEUEBOX_KAFKA_HOME           cache dir: pom, lib/, data/, server.properties, kafka.pid, kafka.log
#                                 (default $HOME/.cache/queuebox/kafka-<version>)
#   QUEUEBOX_KAFKA_HEAP           JVM heap flags (default -Xms256m -Xmx512m)
#   QUEUEBOX_KAFKA_START_TIMEOUT  seconds to wait for the broker to answer (default 90)
#   QUEUEBOX_KAFKA_LOG_LEVEL      broker root log level (default INFO)
set -euo pipefail

# 4.1.2: the newest 4.1 patch on Maven Central; checked with kafkajs 2.2.4 (idempotent produce with acks -1,
# consumer group). 4.2.0-4.4.0 resolve and run on Java 17 too (4.4.0 checked the same way):
# QUEUEBOX_KAFKA_VERSION=4.4.0 switches, in its own cache dir (formatted storage is not forward-compatible).
readonly DEFAULT_KAFKA_VERSION=4.1.2
# log4j for the broker's log backend (Maven's kafka artifacts ship none; slf4j-api alone logs nothing). Kafka 4.1.2
# itself depends on log4j-core 2.25.3, 4.4.0 on 2.25.5: one 2.25 version for api, core and the slf4j bridge.
readonly LOG4J_VERSION=2.25.5

readonly KAFKA_VERSION="${QUEUEBOX_KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}"
readonly SCRIPT=kafka.sh
readonly SERVICE="Kafka $KAFKA_VERSION"
readonly ARTIFACT="org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
readonly HOST=127.0.0.1
readonly PORT=9092
readonly CONTROLLER_PORT=9093
readonly SERVICE_HOME="${QUEUEBOX_KAFKA_HOME:-$HOME/.cache/queuebox/kafka-$KAFKA_VERSION}"
readonly HEAP_OPTS="${QUEUEBOX_KAFKA_HEAP:--Xms256m -Xmx512m}"
readonly START_TIMEOUT="${QUEUEBOX_KAFKA_START_TIMEOUT:-90}"
readonly LOG_LEVEL="${QUEUEBOX_KAFKA_LOG_LEVEL:-INFO}"
# A controlled shutdown of a combined node takes a few seconds; the broker flushes and closes its logs.
readonly STOP_GRACE=60
readonly PROBE="a metadata request"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly TEMPLATES="$SCRIPT_DIR/kafka"
readonly LIB_DIR="$SERVICE_HOME/lib"
readonly DATA_DIR="$SERVICE_HOME/data"
readonly SERVER_PROPS="$SERVICE_HOME/server.properties"
readonly ADMIN_PROPS="$SERVICE_HOME/admin.properties"
readonly LOG4J_CONF="$SERVICE_HOME/log4j2.properties"
readonly PID_FILE="$SERVICE_HOME/kafka.pid"
readonly LOG_FILE="$SERVICE_HOME/kafka.log"
readonly CMDLINE_MARK="kafka.Kafka $SERVER_PROPS"

# shellcheck source=lib/java-service.sh
source "$SCRIPT_DIR/lib/java-service.sh"

# The real probe: a metadata request (list topics) through Kafka's own admin client. Bounded by the client
# timeouts in admin.properties and by `timeout`, so a half-started broker cannot hang it.
answers() {
  port_open "$HOST" "$PORT" || return 1
  jars_cached || return 1
  timeout 30 "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=ERROR \
    -cp "$LIB_DIR/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$PORT" --command-config "$ADMIN_PROPS" --list >/dev/null 2>&1
}

render() { # template → file, filling the @NAME@ placeholders
  sed -e "s|@KAFKA_VERSION@|$KAFKA_VERSION|g" -e "s|@LOG4J_VERSION@|$LOG4J_VERSION|g" \
    -e "s|@HOST@|$HOST|g" -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CONTROLLER_PORT|g" \
    -e "s|@DATA_DIR@|$DATA_DIR|g" "$1" >"$2.tmp"
  mv "$2.tmp" "$2"
}

write_config() {
  render "$TEMPLATES/server.properties.in" "$SERVER_PROPS"
  cp "$TEMPLATES/log4j2.properties" "$LOG4J_CONF"
  # Short client timeouts for the probe: the admin client's default is to retry for 60 s.
  printf '%s\n' 'request.timeout.ms=5000' 'default.api.timeout.ms=10000' >"$ADMIN_PROPS"
}

# Formatting writes meta.properties (cluster id, node id) and the bootstrap metadata; the broker refuses to start
# on an unformatted dir. Done once per cache: the data survives stop/start.
ensure_formatted() {
  if [[ -f "$DATA_DIR/meta.properties" ]]; then
    say "storage already formatted ($DATA_DIR)"
    return
  fi
  local cluster_id
  cluster_id="$("$JAVA" -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=ERROR \
    -cp "$LIB_DIR/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  [[ -n "$cluster_id" ]] || fail "kafka.tools.StorageTool random-uuid printed no cluster id"
  say "formatting storage in $DATA_DIR (cluster id $cluster_id)"
  mkdir -p "$DATA_DIR"
  local out
  # Its output (4.4 also dumps every bootstrap record) is shown only when it fails.
  if ! out="$("$JAVA" -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=WARN \
    -cp "$LIB_DIR/*" kafka.tools.StorageTool format --ignore-formatted \
    --cluster-id "$cluster_id" --config "$SERVER_PROPS" 2>&1)"; then
    printf '%s\n' "$out" >&2
    fail "formatting $DATA_DIR failed"
  fi
}

cmd_start() {
  require_java17
  if start_lock_and_check write_config; then return 0; fi

  # Checked before anything is fetched: a Kafka started some other way is as good for tests.
  if port_open "$HOST" "$PORT"; then
    ensure_jars "$TEMPLATES/pom.xml.in" "up to a minute"
    write_config
    if answers; then
      say "a Kafka broker already answers on $HOST:$PORT (not started by this script); nothing to do"
      return 0
    fi
    fail "something listens on $HOST:$PORT but does not answer Kafka metadata requests"
  fi
  if port_open "$HOST" "$CONTROLLER_PORT"; then
    fail "port $CONTROLLER_PORT (the KRaft controller listener) is taken by another process"
  fi

  ensure_jars "$TEMPLATES/pom.xml.in" "up to a minute"
  write_config
  ensure_formatted

  say "starting $SERVICE (KRaft broker+controller) on $HOST:$PORT, controller $HOST:$CONTROLLER_PORT"
  # shellcheck disable=SC2086 # HEAP_OPTS holds several JVM flags
  launch "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel="$LOG_LEVEL" \
    -Dkafka.logs.dir="$SERVICE_HOME" \
    -cp "$LIB_DIR/*" kafka.Kafka "$SERVER_PROPS"
}

# The probe needs the broker's own jars: without them, only whether something listens can be told.
kafka_status() {
  if ! jars_cached; then
    if port_open "$HOST" "$PORT"; then
      say "something listens on $HOST:$PORT; jars not cached, so no metadata probe was made"
      return 0
    fi
    say "not running (nothing listens on $HOST:$PORT)"
    return 3
  fi
  [[ -f "$ADMIN_PROPS" && -f "$LOG4J_CONF" ]] || write_config
  cmd_status
}

dispatch "${1:-}" kafka_status
