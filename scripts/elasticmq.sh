#!/usr/bin/env bash
# Runs ElasticMQ, a real SQS-compatible server (standard and FIFO queues, in memory), on 127.0.0.1:9324 for tests.
#
#   bash scripts/elasticmq.sh start    fetch jars (once), start, wait until it answers ListQueues
#   bash scripts/elasticmq.sh stop     stop the server this script started (pid file), wait for it to exit
#   bash scripts/elasticmq.sh status   say whether an SQS endpoint answers on 127.0.0.1:9324 (exit 0 yes, 3 no)
#
# The jars come from Maven Central (org.elasticmq:elasticmq-server_2.13) with `mvn` into a cache outside the repo.
# Needs Java 17+ and Maven 3.6.3+, flock and setsid (util-linux). Queues live in memory: a restart empties them.
# What it shares with scripts/kafka.sh (fetch, start, probe, stop) is scripts/lib/java-service.sh.
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
readonly SCRIPT=elasticmq.sh
readonly SERVICE="ElasticMQ $ELASTICMQ_VERSION"
readonly ARTIFACT="org.elasticmq:elasticmq-server_2.13:$ELASTICMQ_VERSION"
readonly HOST=127.0.0.1
readonly PORT=9324
readonly SERVICE_HOME="${QUEUEBOX_ELASTICMQ_HOME:-$HOME/.cache/queuebox/elasticmq-$ELASTICMQ_VERSION}"
readonly HEAP_OPTS="${QUEUEBOX_ELASTICMQ_HEAP:--Xms64m -Xmx384m}"
readonly START_TIMEOUT="${QUEUEBOX_ELASTICMQ_START_TIMEOUT:-90}"
readonly STOP_GRACE=30
readonly PROBE="SQS ListQueues"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly TEMPLATES="$SCRIPT_DIR/elasticmq"
readonly LIB_DIR="$SERVICE_HOME/lib"
readonly CONF="$SERVICE_HOME/elasticmq.conf"
readonly PID_FILE="$SERVICE_HOME/elasticmq.pid"
readonly LOG_FILE="$SERVICE_HOME/elasticmq.log"
readonly CMDLINE_MARK="-Dconfig.file=$CONF"

# shellcheck source=lib/java-service.sh
source "$SCRIPT_DIR/lib/java-service.sh"

# The real probe: an SQS ListQueues call (query protocol) over plain HTTP; an SQS endpoint answers with a
# ListQueuesResponse document. Bounded by `timeout`, so a half-started server cannot hang it.
answers() {
  port_open "$HOST" "$PORT" || return 1
  timeout 5 bash -c '
    exec 3<>"/dev/tcp/$1/$2"
    printf "GET /?Action=ListQueues HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$1" "$2" >&3
    cat <&3' _ "$HOST" "$PORT" 2>/dev/null | grep -q 'ListQueuesResponse'
}

render() { # template → file, filling the @NAME@ placeholders
  sed -e "s|@ELASTICMQ_VERSION@|$ELASTICMQ_VERSION|g" -e "s|@HOST@|$HOST|g" -e "s|@PORT@|$PORT|g" "$1" >"$2.tmp"
  mv "$2.tmp" "$2"
}

cmd_start() {
  require_java17
  if start_lock_and_check ""; then return 0; fi

  # An SQS endpoint started some other way (another cache, a container) is as good for tests.
  if port_open "$HOST" "$PORT"; then
    if answers; then
      say "an SQS endpoint already answers on $HOST:$PORT (not started by this script); nothing to do"
      return 0
    fi
    fail "something listens on $HOST:$PORT but does not answer SQS ListQueues"
  fi

  ensure_jars "$TEMPLATES/pom.xml.in" "about 20 s"
  render "$TEMPLATES/elasticmq.conf.in" "$CONF"

  say "starting $SERVICE on http://$HOST:$PORT"
  # Small heap and C1 only: it serves tests on a shared 2-core machine.
  # shellcheck disable=SC2086 # HEAP_OPTS holds several JVM flags
  launch "$JAVA" $HEAP_OPTS -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dconfig.file="$CONF" -cp "$LIB_DIR/*" org.elasticmq.server.Main
}

dispatch "${1:-}"
