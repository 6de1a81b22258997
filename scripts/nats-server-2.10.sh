#!/usr/bin/env bash
# Fetches a NATS server 2.10 (Debian trixie's package: Debian 12 ships 2.9.10, which keeps no consumer metadata) into
# ~/.cache/queuebox/nats-server-2.10/ (or QUEUEBOX_TEST_NATS_SERVER_DIR) and prints the binary's path. The machine's
# own NATS is left as it is: the tests
# of a NATS source's install metadata (packages/nats/test/shared-durable.integration.test.ts) start a private server
# from this binary. Nothing is installed: apt-get downloads the .deb with a private package list, dpkg-deb unpacks it.
# Safe to run repeatedly (a cached binary is reused). Exits 1, saying why, when it cannot be had.
set -euo pipefail
dir="${QUEUEBOX_TEST_NATS_SERVER_DIR:-$HOME/.cache/queuebox/nats-server-2.10}"
bin="$dir/x/usr/sbin/nats-server"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "nats-server-2.10: apt-get and dpkg-deb are needed to fetch Debian trixie's nats-server" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
echo "deb http://deb.debian.org/debian trixie main" >"$dir/sources.list"
opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o APT::Get::List-Cleanup=0
  -o APT::Sandbox::User=root)
if ! timeout 300 apt-get "${opts[@]}" update -qq >"$dir/apt.log" 2>&1 ||
  ! (cd "$dir" && timeout 300 apt-get "${opts[@]}" download nats-server >>"$dir/apt.log" 2>&1); then
  echo "nats-server-2.10: could not download Debian trixie's nats-server (see $dir/apt.log)" >&2
  exit 1
fi
dpkg-deb -x "$dir"/nats-server_*.deb "$dir/x"
case "$("$bin" --version 2>/dev/null)" in
  *v2.1[0-9]* | *v2.[2-9][0-9]* | *v[3-9]*) echo "$bin" ;;
  *)
    echo "nats-server-2.10: the downloaded server is $("$bin" --version 2>&1), not 2.10 or later" >&2
    exit 1
    ;;
esac
