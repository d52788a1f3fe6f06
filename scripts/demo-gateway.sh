#!/usr/bin/env bash
# demo-gateway.sh — the IM story end to end (make demo-gateway):
#   two users chat in the browser through examples/gateway
#   page → POST /api/send → MariaDB (message + outbox row, one transaction) → binlog
#   → cdc-outbox → Kafka → gateway (package consumer: ordered, deduped) → WebSocket,
# while cdc-outbox is killed with SIGKILL and restarted and the gateway restarts.
# Open the two printed URLs in two browser tabs to watch; without a browser,
# --headless takes screenshots of both pages with Debian's chromium at the end.
#
#   scripts/demo-gateway.sh [--seconds 60] [--listen 127.0.0.1:8080] [--headless]
set -euo pipefail
cd "$(dirname "$0")/.."
STACK=scripts/dev-stack.sh
SECONDS_TOTAL=60 LISTEN=127.0.0.1:8080 HEADLESS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_TOTAL=$2; shift 2 ;;
    --listen) LISTEN=$2; shift 2 ;;
    --headless) HEADLESS=1; shift ;;
    *) echo "usage: $0 [--seconds N] [--listen host:port] [--headless]" >&2; exit 2 ;;
  esac
done
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. Local stack"
$STACK up
eval "$($STACK env)"

say "2. Build cdc-outbox and the gateway"
make --no-print-directory build
go build -o bin/gateway ./examples/gateway

RUN=$(date +%Y%m%d%H%M%S)
WORK="$CDC_STACK_DIR/demo-gateway/$RUN"
mkdir -p "$WORK"
TOPIC="demo.gateway.$RUN"
KEY="cdc-outbox:checkpoint:demo-gateway-$RUN"
say "3. Schema, topic $TOPIC (3 partitions)"
$STACK mysql im < schema/mariadb.sql
$STACK mysql im -e "TRUNCATE im_message; TRUNCATE im_event_outbox"
$STACK kafka-topics --create --topic "$TOPIC" --partitions 3 >/dev/null
echo ok

export CDC_OUTBOX_SOURCE_ADDR="$CDC_MYSQL_ADDR" CDC_OUTBOX_KAFKA_BROKERS="$CDC_KAFKA_BROKERS" \
  CDC_OUTBOX_CHECKPOINT_ADDR="$CDC_REDIS_ADDR" CDC_OUTBOX_ROUTER_TOPIC="$TOPIC" \
  CDC_OUTBOX_CHECKPOINT_KEY="$KEY" CDC_OUTBOX_LOG_FORMAT=console CDC_OUTBOX_SOURCE_USER="$CDC_MYSQL_USER" \
  CDC_OUTBOX_SOURCE_PASSWORD="$CDC_MYSQL_PASSWORD"

PUB="" GW=""
wait_log() { # $1 pid, $2 log, $3 text
  for _ in $(seq 1 300); do
    grep -q "$3" "$2" 2>/dev/null && return 0
    kill -0 "$1" 2>/dev/null || { echo "exited:"; tail -20 "$2"; exit 1; }
    sleep 0.1
  done
  echo "did not start:"; tail -20 "$2"; exit 1
}
start_publisher() {
  bin/cdc-outbox run --config config.example.yaml >"$1" 2>&1 &
  PUB=$!; wait_log "$PUB" "$1" "streaming binlog"
}
start_gateway() {
  bin/gateway -listen "$LISTEN" -topic "$TOPIC" -group "demo-gateway-$RUN" -redis "$CDC_REDIS_ADDR" >"$1" 2>&1 &
  GW=$!; wait_log "$GW" "$1" "gateway listening"
}
cleanup() {
  [ -n "$PUB" ] && kill "$PUB" 2>/dev/null || true
  [ -n "$GW" ] && kill "$GW" 2>/dev/null || true
}
trap cleanup EXIT

say "4. Start cdc-outbox and the gateway"
start_publisher "$WORK/publisher-1.log"
start_gateway "$WORK/gateway-1.log"
URL="http://$LISTEN"
echo "  open two tabs:  $URL/?user=1&peer=2   and   $URL/?user=2&peer=1"

send() { # from to text
  curl -sf -X POST "$URL/api/send" -H 'Content-Type: application/json' \
    -d "{\"from\":$1,\"to\":$2,\"text\":\"$3\"}" >/dev/null || echo "  (send failed: gateway restarting)"
}
say "5. Users 1 and 2 chat for ${SECONDS_TOTAL}s (a message every 0.5 s); cdc-outbox is killed and restarted, the gateway restarts"
n=0 end=$((SECONDS + SECONDS_TOTAL))
killed="" restarted_gw=""
while [ $SECONDS -lt $end ]; do
  n=$((n + 1))
  if [ $((n % 3)) -eq 0 ]; then send 2 1 "message $n from user 2"; else send 1 2 "message $n from user 1"; fi
  elapsed=$((SECONDS_TOTAL - (end - SECONDS)))
  if [ -z "$killed" ] && [ $elapsed -ge $((SECONDS_TOTAL / 4)) ]; then
    echo "  kill -9 cdc-outbox (pid $PUB): messages keep being committed, delivery pauses"
    kill -9 "$PUB"; wait "$PUB" 2>/dev/null || true; killed=1
    sleep 3
    start_publisher "$WORK/publisher-2.log"
    echo "  cdc-outbox restarted: $(grep -o 'resuming from checkpoint.*' "$WORK/publisher-2.log" | head -1 | cut -c1-80)"
  fi
  if [ -z "$restarted_gw" ] && [ $elapsed -ge $((SECONDS_TOTAL / 2)) ]; then
    echo "  restart the gateway: the pages reconnect and get what they missed from the outbox table"
    kill -TERM "$GW"; wait "$GW" 2>/dev/null || true
    start_gateway "$WORK/gateway-2.log"; restarted_gw=1
  fi
  sleep 0.5
done
echo "  sent $n messages"

if [ -n "$HEADLESS" ]; then
  say "6. Screenshots with headless chromium"
  command -v chromium >/dev/null || { echo "  chromium missing: apt-get install chromium"; exit 1; }
  for u in 1 2; do
    p=$((3 - u))
    chromium --headless=new --no-sandbox --disable-gpu --window-size=900,900 --virtual-time-budget=5000 \
      --screenshot="$WORK/user$u.png" "$URL/?user=$u&peer=$p" >/dev/null 2>&1 || true
    echo "  $WORK/user$u.png"
  done
fi
say "Done. Logs: $WORK (the browser check that every message appears once, in order: make test-gateway)"
