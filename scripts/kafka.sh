#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft combined mode) on 127.0.0.1:9092 for tests.
#
#   bash scripts/kafka.sh start    fetch jars (once), format storage (once), start, wait until it answers metadata
#   bash scripts/kafka.sh stop     stop the broker this script started (pid file), wait for it to exit
#   bash scripts/kafka.sh status   say whether a broker answers on 127.0.0.1:9092 (exit 0 yes, 3 no)
#
# No Kafka install is needed: the broker's jars come from Maven Central with `mvn` into a cache outside the repo.
# Needs Java 17+ (Kafka 4.x brokers refuse older), Maven 3.6.3+, flock and setsid (util-linux).
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
readonly HOST=127.0.0.1
readonly PORT=9092
readonly CONTROLLER_PORT=9093
readonly KAFKA_HOME="${QUEUEBOX_KAFKA_HOME:-$HOME/.cache/queuebox/kafka-$KAFKA_VERSION}"
readonly HEAP_OPTS="${QUEUEBOX_KAFKA_HEAP:--Xms256m -Xmx512m}"
readonly START_TIMEOUT="${QUEUEBOX_KAFKA_START_TIMEOUT:-90}"
readonly LOG_LEVEL="${QUEUEBOX_KAFKA_LOG_LEVEL:-INFO}"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly TEMPLATES="$SCRIPT_DIR/kafka"
readonly LIB_DIR="$KAFKA_HOME/lib"
readonly DATA_DIR="$KAFKA_HOME/data"
readonly SERVER_PROPS="$KAFKA_HOME/server.properties"
readonly ADMIN_PROPS="$KAFKA_HOME/admin.properties"
readonly LOG4J_CONF="$KAFKA_HOME/log4j2.properties"
readonly PID_FILE="$KAFKA_HOME/kafka.pid"
readonly LOG_FILE="$KAFKA_HOME/kafka.log"
readonly JAR_STAMP="$LIB_DIR/.complete"

if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
readonly JAVA

say() { printf 'kafka.sh: %s\n' "$*"; }
fail() {
  printf 'kafka.sh: ERROR: %s\n' "$*" >&2
  exit 1
}

require_java17() {
  command -v "$JAVA" >/dev/null 2>&1 || fail "java not found (Kafka $KAFKA_VERSION needs Java 17+)"
  local version major
  version="$("$JAVA" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  major="${version%%.*}"
  [[ "$major" == 1 ]] && major="$(cut -d. -f2 <<<"$version")"
  [[ "$major" =~ ^[0-9]+$ && "$major" -ge 17 ]] || fail "Java $version found; Kafka $KAFKA_VERSION brokers need Java 17+"
}

# A TCP connect only tells that something listens; used as a cheap gate before the real probe.
port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# The real probe: a metadata request (list topics) through Kafka's own admin client. Bounded by the client
# timeouts in admin.properties and by `timeout`, so a half-started broker cannot hang it.
answers() {
  port_open "$HOST" "$PORT" || return 1
  [[ -f "$JAR_STAMP" ]] || return 1
  timeout 30 "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel=ERROR \
    -cp "$LIB_DIR/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$PORT" --command-config "$ADMIN_PROPS" --list >/dev/null 2>&1
}

# pid of the broker this script started, if it is still that process (pids get reused).
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $SERVER_PROPS" || return 1
  printf '%s\n' "$pid"
}

render() { # template → file, filling the @NAME@ placeholders
  sed -e "s|@KAFKA_VERSION@|$KAFKA_VERSION|g" -e "s|@LOG4J_VERSION@|$LOG4J_VERSION|g" \
    -e "s|@HOST@|$HOST|g" -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CONTROLLER_PORT|g" \
    -e "s|@DATA_DIR@|$DATA_DIR|g" "$1" >"$2.tmp"
  mv "$2.tmp" "$2"
}

ensure_jars() {
  render "$TEMPLATES/pom.xml.in" "$KAFKA_HOME/pom.xml"
  local want
  want="$(sha256sum "$KAFKA_HOME/pom.xml" | cut -d' ' -f1)"
  if [[ -f "$JAR_STAMP" && "$(cat "$JAR_STAMP")" == "$want" ]]; then
    say "jars cached: $(find "$LIB_DIR" -name '*.jar' | wc -l) in $LIB_DIR"
    return
  fi
  command -v mvn >/dev/null 2>&1 || fail "mvn not found (needed once to fetch the Kafka jars)"
  say "fetching Kafka $KAFKA_VERSION broker jars with Maven into $LIB_DIR (first run only; up to a minute)"
  rm -rf "$LIB_DIR.tmp"
  # Into a temp dir, then swapped in: an interrupted fetch never leaves a lib/ that looks complete.
  # Output to a file, shown on failure: Debian's mvn writes stray colour codes even with -q -B.
  if ! mvn -q -B --no-transfer-progress -Dstyle.color=never -f "$KAFKA_HOME/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIB_DIR.tmp" >"$KAFKA_HOME/mvn.log" 2>&1; then
    tail -n 40 "$KAFKA_HOME/mvn.log" >&2
    rm -rf "$LIB_DIR.tmp"
    fail "Maven could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION (is Maven Central reachable?)"
  fi
  printf '%s\n' "$want" >"$LIB_DIR.tmp/.complete"
  rm -rf "$LIB_DIR"
  mv "$LIB_DIR.tmp" "$LIB_DIR"
  say "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars ($(du -sh "$LIB_DIR" | cut -f1))"
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

show_log_tail() {
  if [[ -f "$LOG_FILE" ]]; then
    printf -- '--- last 40 lines of %s ---\n' "$LOG_FILE" >&2
    tail -n 40 "$LOG_FILE" >&2
    printf -- '---\n' >&2
  fi
}

wait_until_answers() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  say "waiting up to ${START_TIMEOUT}s for the broker to answer a metadata request on $HOST:$PORT"
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      show_log_tail
      fail "the broker (pid $pid) exited during start-up"
    fi
    if answers; then
      say "broker ready on $HOST:$PORT (pid $pid, Kafka $KAFKA_VERSION, log $LOG_FILE)"
      return 0
    fi
    sleep 1
  done
  show_log_tail
  fail "the broker (pid $pid) did not answer within ${START_TIMEOUT}s; it is still running: 'bash $0 stop' ends it"
}

cmd_start() {
  require_java17
  mkdir -p "$KAFKA_HOME"
  # Serialises concurrent starts (two test runs at once) on this cache; released when the script exits.
  exec 9>"$KAFKA_HOME/.lock"
  flock -w 600 9 || fail "another kafka.sh holds $KAFKA_HOME/.lock"

  local pid
  if pid="$(running_pid)"; then
    write_config
    if answers; then
      say "already running: the broker started by this script (pid $pid) answers on $HOST:$PORT"
      return 0
    fi
    say "the broker started by this script (pid $pid) is running but not answering yet"
    wait_until_answers "$pid"
    return
  fi
  rm -f "$PID_FILE"

  # Checked before anything is fetched: a Kafka started some other way is as good for tests.
  if port_open "$HOST" "$PORT"; then
    ensure_jars
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

  ensure_jars
  write_config
  ensure_formatted

  if [[ -f "$LOG_FILE" ]]; then mv -f "$LOG_FILE" "$LOG_FILE.1"; fi
  say "starting Kafka $KAFKA_VERSION (KRaft broker+controller) on $HOST:$PORT, controller $HOST:$CONTROLLER_PORT"
  # setsid + nohup: the broker outlives this shell and a test runner's process group. 9>&- keeps the start lock
  # out of the broker, or the next start would wait on it for as long as the broker runs.
  # shellcheck disable=SC2086 # HEAP_OPTS holds several JVM flags
  nohup setsid "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dqueuebox.kafka.logLevel="$LOG_LEVEL" \
    -Dkafka.logs.dir="$KAFKA_HOME" \
    -cp "$LIB_DIR/*" kafka.Kafka "$SERVER_PROPS" >"$LOG_FILE" 2>&1 </dev/null 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  say "broker pid $pid (pid file $PID_FILE)"
  wait_until_answers "$pid"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    if port_open "$HOST" "$PORT"; then
      say "no broker started by this script is running; something else listens on $HOST:$PORT (left alone)"
    else
      say "not running"
    fi
    return 0
  fi
  say "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  # A controlled shutdown of a combined node takes a few seconds; the broker flushes and closes its logs.
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= 60)); then
      say "still running after 60s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  say "stopped (after ${waited}s)"
}

cmd_status() {
  local pid owner="not started by this script"
  if pid="$(running_pid)"; then owner="pid $pid, started by this script"; fi
  if [[ ! -f "$JAR_STAMP" ]]; then
    if port_open "$HOST" "$PORT"; then
      say "something listens on $HOST:$PORT ($owner); jars not cached, so no metadata probe was made"
      return 0
    fi
    say "not running (nothing listens on $HOST:$PORT)"
    return 3
  fi
  [[ -f "$ADMIN_PROPS" && -f "$LOG4J_CONF" ]] || write_config
  if answers; then
    say "running: a Kafka broker answers on $HOST:$PORT ($owner)"
    return 0
  fi
  if [[ "$owner" != "not started by this script" ]]; then
    say "not answering on $HOST:$PORT ($owner: starting, or stuck; see $LOG_FILE)"
  elif port_open "$HOST" "$PORT"; then
    say "not running: something listens on $HOST:$PORT but does not answer Kafka metadata requests"
  else
    say "not running (no broker answers on $HOST:$PORT)"
  fi
  return 3
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
  printf 'usage: %s start|stop|status\n' "$0" >&2
  exit 2
  ;;
esac
