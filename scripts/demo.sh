#!/usr/bin/env bash
# demo.sh — the main job end to end on the real local stack:
#   MariaDB binlog → cdc-outbox → Kafka, checkpoint in Redis,
#   with a SIGKILL of the publisher mid-stream and a restart from the checkpoint.
# Ends with a summary; exits non-zero if anything was lost or reordered.
set -euo pipefail
cd "$(dirname "$0")/.."
STACK=scripts/dev-stack.sh
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. Local stack (MariaDB with ROW binlog, Redis with AOF, Kafka KRaft)"
$STACK up
eval "$($STACK env)"

say "2. Build"
make --no-print-directory build
go build -o bin/imdemo ./examples/imdemo
bin/cdc-outbox --version

RUN=$(date +%Y%m%d%H%M%S)
WORK="$CDC_STACK_DIR/demo/$RUN"
mkdir -p "$WORK"
TOPIC="demo.im.events.$RUN"
KEY="cdc-outbox:checkpoint:demo-$RUN"

# The demo's own user, cdc_outbox_demo, with the grants of
# schema/grants-mariadb.sql: a cdc_outbox user you created for your own
# publisher ("Using it on your database") keeps its password; this one is
# the demo's, so its password is (re)set on every run.
DEMO_USER=cdc_outbox_demo
DEMO_PASSWORD=cdc-outbox-demo
say "3. Schema, least-privilege user $DEMO_USER (schema/grants-mariadb.sql), topic $TOPIC (6 partitions)"
$STACK mysql im < schema/mariadb.sql
sed -e "s/'cdc_outbox'@/'$DEMO_USER'@/g" -e "s/'change-me'/'$DEMO_PASSWORD'/" schema/grants-mariadb.sql | $STACK mysql im
$STACK mysql im -e "ALTER USER '$DEMO_USER'@'%' IDENTIFIED BY '$DEMO_PASSWORD'"
$STACK mysql im -e "TRUNCATE im_message; TRUNCATE im_event_outbox"
$STACK kafka-topics --create --topic "$TOPIC" --partitions 6 >/dev/null
# A broker started a moment ago may answer metadata before it leads the new
# topic's partitions, and the publisher refuses a missing router.topic at
# once: wait until every partition has a leader.
for _ in $(seq 1 30); do
  leaders=$($STACK kafka-topics --describe --topic "$TOPIC" 2>/dev/null | grep -c 'Leader: [0-9]' || true)
  [ "$leaders" = 6 ] && break
  sleep 1
done
[ "$leaders" = 6 ] || { echo "topic $TOPIC: $leaders of 6 partitions have a leader after 30 s"; exit 1; }
echo "ok"

# The example config, with this run's topic and checkpoint key from the environment.
export CDC_OUTBOX_SOURCE_ADDR="$CDC_MYSQL_ADDR"
export CDC_OUTBOX_SOURCE_USER="$DEMO_USER"
export CDC_OUTBOX_SOURCE_PASSWORD="$DEMO_PASSWORD"
export CDC_OUTBOX_KAFKA_BROKERS="$CDC_KAFKA_BROKERS"
export CDC_OUTBOX_CHECKPOINT_ADDR="$CDC_REDIS_ADDR"
export CDC_OUTBOX_ROUTER_TOPIC="$TOPIC"
export CDC_OUTBOX_CHECKPOINT_KEY="$KEY"
export CDC_OUTBOX_LOG_FORMAT=console
# This host's own instance file (ha.instance-file): the publisher restarted
# after the kill -9 below takes its dead predecessor's lease at once instead
# of standing by until ha.lease-ttl expires.
export CDC_OUTBOX_HA_INSTANCE_FILE="$WORK/instance"

PUB=""
start_publisher() { # $1 = log file
  bin/cdc-outbox run --config config.example.yaml >"$1" 2>&1 &
  PUB=$!
  for _ in $(seq 1 300); do
    grep -q "streaming binlog" "$1" 2>/dev/null && return 0
    kill -0 "$PUB" 2>/dev/null || { echo "cdc-outbox exited:"; tail -20 "$1"; exit 1; }
    sleep 0.1
  done
  echo "cdc-outbox did not start:"; tail -20 "$1"; exit 1
}
cleanup() { [ -n "$PUB" ] && kill "$PUB" 2>/dev/null || true; }
trap cleanup EXIT

say "4. Start cdc-outbox (no checkpoint yet: start: latest from config.example.yaml)"
start_publisher "$WORK/publisher-1.log"
grep -E "no checkpoint|streaming binlog" "$WORK/publisher-1.log" | sed 's/^/  /'

say "5. Produce: 3000 IM messages, each with its outbox row in one transaction, 8 conversations; watch Kafka"
bin/imdemo produce --conversations 8 --count 3000 --rate 600 --plan "$WORK/plan.json" &
PROD=$!
bin/imdemo watch --topic "$TOPIC" --plan "$WORK/plan.json" --timeout 180s &
WATCH=$!

# SIGKILL the publisher mid-stream, once a checkpoint exists.
for _ in $(seq 1 200); do
  [ -n "$($STACK redis-cli GET "$KEY")" ] && break
  sleep 0.1
done
sleep 1.5
say "6. kill -9 cdc-outbox (pid $PUB) mid-stream; the producer keeps writing"
kill -9 "$PUB"; wait "$PUB" 2>/dev/null || true
echo "  checkpoint in Redis ($KEY):"
echo "  $($STACK redis-cli GET "$KEY")"
sleep 1

say "7. Restart cdc-outbox: it resumes from the Redis checkpoint"
start_publisher "$WORK/publisher-2.log"
grep -E "instance file: taking over|resuming from checkpoint" "$WORK/publisher-2.log" | sed 's/^/  /'

wait "$PROD"
status=0
wait "$WATCH" || status=$?

say "8. Graceful stop (SIGTERM: flush, checkpoint, exit 0)"
kill -TERM "$PUB"; wait "$PUB" && echo "  cdc-outbox exited 0" || { echo "  cdc-outbox exit code $?"; status=1; }
PUB=""
echo "  final checkpoint: $($STACK redis-cli GET "$KEY")"

say "9. cdc-outbox verify: the topic against the outbox table (missing, duplicated, reordered, split)"
if ! bin/cdc-outbox verify --config config.example.yaml --wait 30s 2>&1 | sed 's/^/  /'; then status=1; fi
echo "  logs: $WORK"
exit $status
