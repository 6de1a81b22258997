#!/usr/bin/env bash
# Runs ElasticMQ, a real SQS-compatible server (standard and FIFO queues, in memory), on 127.0.0.1:9324 for tests.
#
#   bash scripts/elasticmq.sh start    fetch jars (once), start, wait until it answers ListQueues
#   bash scripts/elasticmq.sh stop     stop the server this script started (pid file), wait for it to exit
#   bash scripts/elasticmq.sh status   say whether an SQS endpoint answers on 127.0.0.1:9324 (exit 0 yes, 3 no)
#
# The jars come from Maven Central (org.elasticmq:elasticmq-server_2.13) with `mvn` into a cache outside the repo.
# Needs Java 17+ and Maven 3.6.3+, flock and setsid (util-linux). Queues live in memory: a restart empties them.
#
# Environment (all optional):
#   QUEUEBOX_ELASTICMQ_VERSION        version to fetch and run (default below)
#   QUEUEBOX_ELASTICMQ_HOME           cache dir: pom, lib/, elasticmq.conf, elasticmq.pid, elasticmq.log
#                                     (default $HOME/.cache/queuebox/elasticmq-<version>)
#   QUEUEBOX_ELASTICMQ_HEAP           JVM heap flags (default -Xms64m -Xmx384m)
#   QUEUEBOX_ELASTICMQ_START_TIMEOUT  seconds to wait for the server to answer (default 90)
set -euo pipefail

# 1.7.1: the newest release on Maven Central (December 2026); runs on Java 17. 1.6.16 works the same way.
readonly DEFAULT_ELASTICMQ_VERSION=1.7.1

readonly ELASTICMQ_VERSION="${QUEUEBOX_ELASTICMQ_VERSION:-$DEFAULT_ELASTICMQ_VERSION}"
readonly HOST=127.0.0.1
readonly PORT=9324
readonly EMQ_HOME="${QUEUEBOX_ELASTICMQ_HOME:-$HOME/.cache/queuebox/elasticmq-$ELASTICMQ_VERSION}"
readonly HEAP_OPTS="${QUEUEBOX_ELASTICMQ_HEAP:--Xms64m -Xmx384m}"
readonly START_TIMEOUT="${QUEUEBOX_ELASTICMQ_START_TIMEOUT:-90}"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly TEMPLATES="$SCRIPT_DIR/elasticmq"
readonly LIB_DIR="$EMQ_HOME/lib"
readonly CONF="$EMQ_HOME/elasticmq.conf"
readonly PID_FILE="$EMQ_HOME/elasticmq.pid"
readonly LOG_FILE="$EMQ_HOME/elasticmq.log"
readonly JAR_STAMP="$LIB_DIR/.complete"

if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
readonly JAVA

say() { printf 'elasticmq.sh: %s\n' "$*"; }
fail() {
  printf 'elasticmq.sh: ERROR: %s\n' "$*" >&2
  exit 1
}

require_java17() {
  command -v "$JAVA" >/dev/null 2>&1 || fail "java not found (ElasticMQ $ELASTICMQ_VERSION needs Java 17+)"
  local version major
  version="$("$JAVA" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  major="${version%%.*}"
  [[ "$major" == 1 ]] && major="$(cut -d. -f2 <<<"$version")"
  [[ "$major" =~ ^[0-9]+$ && "$major" -ge 17 ]] || fail "Java $version found; this script runs ElasticMQ on Java 17+"
}

port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# The real probe: an SQS ListQueues call (query protocol) over plain HTTP; an SQS endpoint answers with a
# ListQueuesResponse document. Bounded by `timeout`, so a half-started server cannot hang it.
answers() {
  port_open "$HOST" "$PORT" || return 1
  timeout 5 bash -c '
    exec 3<>"/dev/tcp/$1/$2"
    printf "GET /?Action=ListQueues HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$1" "$2" >&3
    cat <&3' _ "$HOST" "$PORT" 2>/dev/null | grep -q 'ListQueuesResponse'
}

# pid of the server this script started, if it is still that process (pids get reused).
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-Dconfig.file=$CONF" || return 1
  printf '%s\n' "$pid"
}

render() { # template → file, filling the @NAME@ placeholders
  sed -e "s|@ELASTICMQ_VERSION@|$ELASTICMQ_VERSION|g" -e "s|@HOST@|$HOST|g" -e "s|@PORT@|$PORT|g" "$1" >"$2.tmp"
  mv "$2.tmp" "$2"
}

ensure_jars() {
  render "$TEMPLATES/pom.xml.in" "$EMQ_HOME/pom.xml"
  local want
  want="$(sha256sum "$EMQ_HOME/pom.xml" | cut -d' ' -f1)"
  if [[ -f "$JAR_STAMP" && "$(cat "$JAR_STAMP")" == "$want" ]]; then
    say "jars cached: $(find "$LIB_DIR" -name '*.jar' | wc -l) in $LIB_DIR"
    return
  fi
  command -v mvn >/dev/null 2>&1 || fail "mvn not found (needed once to fetch the ElasticMQ jars)"
  say "fetching ElasticMQ $ELASTICMQ_VERSION jars with Maven into $LIB_DIR (first run only; about 20 s)"
  rm -rf "$LIB_DIR.tmp"
  # Into a temp dir, then swapped in: an interrupted fetch never leaves a lib/ that looks complete.
  if ! mvn -q -B --no-transfer-progress -Dstyle.color=never -f "$EMQ_HOME/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIB_DIR.tmp" >"$EMQ_HOME/mvn.log" 2>&1; then
    tail -n 40 "$EMQ_HOME/mvn.log" >&2
    rm -rf "$LIB_DIR.tmp"
    fail "Maven could not fetch org.elasticmq:elasticmq-server_2.13:$ELASTICMQ_VERSION (is Maven Central reachable?)"
  fi
  printf '%s\n' "$want" >"$LIB_DIR.tmp/.complete"
  rm -rf "$LIB_DIR"
  mv "$LIB_DIR.tmp" "$LIB_DIR"
  say "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars ($(du -sh "$LIB_DIR" | cut -f1))"
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
  say "waiting up to ${START_TIMEOUT}s for ElasticMQ to answer ListQueues on $HOST:$PORT"
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      show_log_tail
      fail "ElasticMQ (pid $pid) exited during start-up"
    fi
    if answers; then
      say "ElasticMQ ready on http://$HOST:$PORT (pid $pid, version $ELASTICMQ_VERSION, log $LOG_FILE)"
      return 0
    fi
    sleep 1
  done
  show_log_tail
  fail "ElasticMQ (pid $pid) did not answer within ${START_TIMEOUT}s; it is still running: 'bash $0 stop' ends it"
}

cmd_start() {
  require_java17
  mkdir -p "$EMQ_HOME"
  # Serialises concurrent starts on this cache; released when the script exits.
  exec 9>"$EMQ_HOME/.lock"
  flock -w 600 9 || fail "another elasticmq.sh holds $EMQ_HOME/.lock"

  local pid
  if pid="$(running_pid)"; then
    if answers; then
      say "already running: the server started by this script (pid $pid) answers on $HOST:$PORT"
      return 0
    fi
    say "the server started by this script (pid $pid) is running but not answering yet"
    wait_until_answers "$pid"
    return
  fi
  rm -f "$PID_FILE"

  # An SQS endpoint started some other way (another cache, a container) is as good for tests.
  if port_open "$HOST" "$PORT"; then
    if answers; then
      say "an SQS endpoint already answers on $HOST:$PORT (not started by this script); nothing to do"
      return 0
    fi
    fail "something listens on $HOST:$PORT but does not answer SQS ListQueues"
  fi

  ensure_jars
  render "$TEMPLATES/elasticmq.conf.in" "$CONF"

  if [[ -f "$LOG_FILE" ]]; then mv -f "$LOG_FILE" "$LOG_FILE.1"; fi
  say "starting ElasticMQ $ELASTICMQ_VERSION on http://$HOST:$PORT"
  # setsid + nohup: the server outlives this shell and a test runner's process group; 9>&- keeps the start lock
  # out of it. Small heap and C1 only: it serves tests on a shared 2-core machine.
  # shellcheck disable=SC2086 # HEAP_OPTS holds several JVM flags
  nohup setsid "$JAVA" $HEAP_OPTS -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dconfig.file="$CONF" -cp "$LIB_DIR/*" org.elasticmq.server.Main >"$LOG_FILE" 2>&1 </dev/null 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  say "server pid $pid (pid file $PID_FILE)"
  wait_until_answers "$pid"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    if port_open "$HOST" "$PORT"; then
      say "no server started by this script is running; something else listens on $HOST:$PORT (left alone)"
    else
      say "not running"
    fi
    return 0
  fi
  say "stopping ElasticMQ (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= 30)); then
      say "still running after 30s; sending SIGKILL"
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
  if answers; then
    say "running: an SQS endpoint answers on $HOST:$PORT ($owner)"
    return 0
  fi
  if [[ "$owner" != "not started by this script" ]]; then
    say "not answering on $HOST:$PORT ($owner: starting, or stuck; see $LOG_FILE)"
  elif port_open "$HOST" "$PORT"; then
    say "not running: something listens on $HOST:$PORT but does not answer SQS ListQueues"
  else
    say "not running (nothing answers on $HOST:$PORT)"
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
