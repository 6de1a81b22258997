# shellcheck shell=bash
# What scripts/kafka.sh and scripts/elasticmq.sh share: a JVM service whose jars Maven fetches from Maven Central
# into a cache outside the repo, started detached with a pid file, probed until it answers, stopped by its pid.
# Sourced, never run. The script that sources it sets, before calling anything here:
#   SCRIPT          its own name, for messages (kafka.sh)
#   SERVICE         what it runs, for messages (Kafka 4.1.2)
#   ARTIFACT        the Maven coordinates its pom fetches, for messages (org.apache.kafka:kafka_2.13:4.1.2)
#   HOST, PORT      where the service answers
#   SERVICE_HOME    the cache dir: pom.xml, lib/, the pid file and the log
#   PID_FILE, LOG_FILE, START_TIMEOUT (seconds), STOP_GRACE (seconds before SIGKILL)
#   PROBE           what `answers` asks, for messages (a metadata request)
#   CMDLINE_MARK    a text only the service's own command line holds (pids get reused)
# and defines:
#   answers         exit 0 when the service answers its real probe, bounded in time
#   render          template file → output file, filling the script's @NAME@ placeholders

if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
readonly JAVA

say() { printf '%s: %s\n' "$SCRIPT" "$*"; }
fail() {
  printf '%s: ERROR: %s\n' "$SCRIPT" "$*" >&2
  exit 1
}

require_java17() {
  command -v "$JAVA" >/dev/null 2>&1 || fail "java not found ($SERVICE needs Java 17+)"
  local version major
  version="$("$JAVA" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  major="${version%%.*}"
  [[ "$major" == 1 ]] && major="$(cut -d. -f2 <<<"$version")"
  [[ "$major" =~ ^[0-9]+$ && "$major" -ge 17 ]] || fail "Java $version found; $SERVICE needs Java 17+"
}

# A TCP connect only tells that something listens; used as a cheap gate before the real probe.
port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# pid of the service this script started, if it is still that process (pids get reused).
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CMDLINE_MARK" || return 1
  printf '%s\n' "$pid"
}

# The jars of $SERVICE_HOME/pom.xml (rendered from the template $1) into $LIB_DIR, once per pom: a stamp holding
# the pom's hash marks a complete fetch. $2 says how long the first fetch takes, for the message.
ensure_jars() {
  render "$1" "$SERVICE_HOME/pom.xml"
  local want stamp="$LIB_DIR/.complete"
  want="$(sha256sum "$SERVICE_HOME/pom.xml" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    say "jars cached: $(find "$LIB_DIR" -name '*.jar' | wc -l) in $LIB_DIR"
    return
  fi
  command -v mvn >/dev/null 2>&1 || fail "mvn not found (needed once to fetch the $SERVICE jars)"
  say "fetching $SERVICE jars with Maven into $LIB_DIR (first run only; $2)"
  rm -rf "$LIB_DIR.tmp"
  # Into a temp dir, then swapped in: an interrupted fetch never leaves a lib/ that looks complete.
  # Output to a file, shown on failure: Debian's mvn writes stray colour codes even with -q -B.
  if ! mvn -q -B --no-transfer-progress -Dstyle.color=never -f "$SERVICE_HOME/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIB_DIR.tmp" >"$SERVICE_HOME/mvn.log" 2>&1; then
    tail -n 40 "$SERVICE_HOME/mvn.log" >&2
    rm -rf "$LIB_DIR.tmp"
    fail "Maven could not fetch $ARTIFACT (is Maven Central reachable?)"
  fi
  printf '%s\n' "$want" >"$LIB_DIR.tmp/.complete"
  rm -rf "$LIB_DIR"
  mv "$LIB_DIR.tmp" "$LIB_DIR"
  say "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars ($(du -sh "$LIB_DIR" | cut -f1))"
}

jars_cached() { [[ -f "$LIB_DIR/.complete" ]]; }

show_log_tail() {
  if [[ -f "$LOG_FILE" ]]; then
    printf -- '--- last 40 lines of %s ---\n' "$LOG_FILE" >&2
    tail -n 40 "$LOG_FILE" >&2
    printf -- '---\n' >&2
  fi
}

wait_until_answers() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  say "waiting up to ${START_TIMEOUT}s for $SERVICE to answer $PROBE on $HOST:$PORT"
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      show_log_tail
      fail "$SERVICE (pid $pid) exited during start-up"
    fi
    if answers; then
      say "$SERVICE ready on $HOST:$PORT (pid $pid, log $LOG_FILE)"
      return 0
    fi
    sleep 1
  done
  show_log_tail
  fail "$SERVICE (pid $pid) did not answer within ${START_TIMEOUT}s; it is still running: 'bash $0 stop' ends it"
}

# Takes the start lock of this cache (serialises two test runs starting at once; released when the script exits),
# then says whether the service is already up: returns 0 when there is nothing left to start (it answers, or the
# one this script started came up), 1 when it must be started. $1: run before probing (e.g. write the probe's own
# configuration), or empty.
start_lock_and_check() {
  mkdir -p "$SERVICE_HOME"
  exec 9>"$SERVICE_HOME/.lock"
  flock -w 600 9 || fail "another $SCRIPT holds $SERVICE_HOME/.lock"
  local pid
  if pid="$(running_pid)"; then
    [[ -z "$1" ]] || "$1"
    if answers; then
      say "already running: the $SERVICE started by this script (pid $pid) answers on $HOST:$PORT"
      return 0
    fi
    say "the $SERVICE started by this script (pid $pid) is running but not answering yet"
    wait_until_answers "$pid"
    return 0
  fi
  rm -f "$PID_FILE"
  return 1
}

# Runs "$@" (the JVM command) detached: setsid + nohup so it outlives this shell and a test runner's process group,
# 9>&- so it does not hold the start lock (or the next start would wait on it for as long as it runs).
launch() {
  if [[ -f "$LOG_FILE" ]]; then mv -f "$LOG_FILE" "$LOG_FILE.1"; fi
  nohup setsid "$@" >"$LOG_FILE" 2>&1 </dev/null 9>&- &
  local pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  say "pid $pid (pid file $PID_FILE)"
  wait_until_answers "$pid"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    if port_open "$HOST" "$PORT"; then
      say "no $SERVICE started by this script is running; something else listens on $HOST:$PORT (left alone)"
    else
      say "not running"
    fi
    return 0
  fi
  say "stopping $SERVICE (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= STOP_GRACE)); then
      say "still running after ${STOP_GRACE}s; sending SIGKILL"
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
    say "running: $SERVICE answers on $HOST:$PORT ($owner)"
    return 0
  fi
  if [[ "$owner" != "not started by this script" ]]; then
    say "not answering on $HOST:$PORT ($owner: starting, or stuck; see $LOG_FILE)"
  elif port_open "$HOST" "$PORT"; then
    say "not running: something listens on $HOST:$PORT but does not answer $PROBE"
  else
    say "not running (nothing answers on $HOST:$PORT)"
  fi
  return 3
}

# start|stop|status: $1 the command; cmd_start is the sourcing script's own, and $2 (optional) names its own status
# command instead of cmd_status.
dispatch() {
  case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) "${2:-cmd_status}" ;;
  *)
    printf 'usage: %s start|stop|status\n' "$0" >&2
    exit 2
    ;;
  esac
}
