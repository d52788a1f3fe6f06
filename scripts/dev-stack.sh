#!/usr/bin/env bash
# dev-stack.sh — a real local MySQL/MariaDB + Redis + Kafka stack on loopback, no Docker.
#
#   scripts/dev-stack.sh up        install what is missing, start all three, wait until they answer
#   scripts/dev-stack.sh down      stop what this script started (by pid file; every flavour); data is kept
#   scripts/dev-stack.sh status    print each service up/down (exit 0 only if all are up)
#   scripts/dev-stack.sh env       print `export` lines:  eval "$(scripts/dev-stack.sh env)"
#   scripts/dev-stack.sh {start,stop,restart,kill}-{db,redis,kafka}
#                                  one service (kill-* = SIGKILL, for crash tests); db = CDC_FLAVOR's
#   scripts/dev-stack.sh {start,stop,restart,kill}-mariadb   the same for MariaDB 10.11 (the default flavour)
#   scripts/dev-stack.sh kafka-topics|kafka-console-producer|kafka-console-consumer ARGS...
#                                  Kafka CLI tools (--bootstrap-server is added if missing)
#   scripts/dev-stack.sh kafka-tool MAIN_CLASS ARGS...   any class on the Kafka classpath
#   scripts/dev-stack.sh mysql [ARGS...]                 the flavour's client, logged in as root
#   scripts/dev-stack.sh redis-cli [ARGS...]             redis-cli on our port
#   scripts/dev-stack.sh wipe      down + delete the stack dir (jar cache is kept)
#   scripts/dev-stack.sh up-secure    also start the secured servers (TLS MariaDB, TLS+ACL Redis,
#                                  SASL_SSL/mTLS Kafka; certificates generated); env then exports CDC_SECURE_*
#   scripts/dev-stack.sh down-secure  stop them
#   scripts/dev-stack.sh up-cluster | down-cluster | status-cluster
#                                  a 3-node Kafka KRaft cluster (each node broker+controller; RF 3,
#                                  min.insync.replicas 2); env then prints CDC_KAFKA_CLUSTER_BROKERS
#   scripts/dev-stack.sh {kill,stop,cont,start}-broker N
#                                  cluster node N (1-3): SIGKILL, SIGSTOP (paused), SIGCONT, start
#   scripts/dev-stack.sh cluster-topics ARGS...   TopicCommand against the cluster
#   scripts/dev-stack.sh up-redis-ha  also start Redis Sentinel (master, replica, 3 Sentinels) and a
#                                  3-master Redis Cluster; env then exports CDC_REDIS_SENTINEL_*, CDC_REDIS_CLUSTER_ADDRS
#   scripts/dev-stack.sh down-redis-ha  stop them
#   scripts/dev-stack.sh up-otel   also start an OpenTelemetry Collector (built once from test/otelcol
#                                  with the Go module proxy, cached in CDC_CACHE_DIR): OTLP receiver on
#                                  loopback, file exporter; env then exports CDC_OTEL_DIR, CDC_OTEL_GRPC_ADDR,
#                                  CDC_OTEL_HTTP_ADDR
#   scripts/dev-stack.sh down-otel  stop it
#
# Environment (defaults in brackets):
#   CDC_FLAVOR [mariadb]    the database: mariadb (10.11, host packages), mysql (9.7, Debian sid),
#                           mariadb11 (11.8, Debian 13); env prints it, tests read it
#   CDC_STACK_DIR [/tmp/cdc-outbox-stack]   all data + logs (mariadb/ mysql/ mariadb11/ redis/ kafka/ logs/)
#   CDC_CACHE_DIR [$HOME/.cache/cdc-outbox] Kafka jars and the Debian roots, kept across down/up
#   CDC_MYSQL_PORT [33306] (MariaDB 10.11)  CDC_MYSQL9_PORT [33307]  CDC_MARIADB11_PORT [33308]
#   CDC_MYSQL_ROOT_PASSWORD [root]  CDC_MYSQL_DB [im]
#   CDC_DEBIAN_MIRROR [the first Debian URI of /etc/apt/sources.list*] for debootstrap
#   CDC_MYSQL_DURABLE [0]   1 = innodb_flush_log_at_trx_commit=1 + sync_binlog=1
#   CDC_REDIS_PORT [36379]
#   CDC_REDIS_SENTINEL_MASTER_PORT [36390]  CDC_REDIS_SENTINEL_REPLICA_PORT [36391]
#   CDC_REDIS_SENTINEL_PORTS [36395,36396,36397]  CDC_REDIS_CLUSTER_PORTS [36401,36402,36403]
#   CDC_KAFKA_PORT [39092]  CDC_KAFKA_CONTROLLER_PORT [39093]  CDC_KAFKA_VERSION [4.1.1]
#   CDC_STACK_TIMEOUT [120] seconds to wait for each service
#   CDC_OTEL_GRPC_PORT [34317]  CDC_OTEL_HTTP_PORT [34318]  up-otel's OTLP receiver (gRPC, HTTP)
#   CDC_KAFKA_CLUSTER_PORT [39292]  cluster node N listens on PORT+N-1, its controller on PORT+2+N
#   CDC_KAFKA_CLUSTER_SESSION_TIMEOUT_MS [9000]  broker.session.timeout.ms (Kafka's fencing time)
#   up-secure's servers: CDC_SECURE_MYSQL_PORT [33317] (TLS MariaDB)  CDC_SECURE_REDIS_PORT [36380] (TLS Redis)
#     CDC_SECURE_KAFKA_PORT [39192] (PLAINTEXT, inter-broker)  CDC_SECURE_KAFKA_SASL_PORT [39193] (SASL_SSL)
#     CDC_SECURE_KAFKA_MTLS_PORT [39194] (SSL, client certificate required)
#     CDC_SECURE_KAFKA_EXPIRED_PORT [39195] (SSL, expired certificate)  CDC_SECURE_KAFKA_CONTROLLER_PORT [39196]
#     certificates in $CDC_STACK_DIR/secure/tls, random passwords in $CDC_STACK_DIR/secure/secrets
#     (mysql-root, redis, kafka; mode 0600); env then exports CDC_SECURE_DIR, CDC_SECURE_MYSQL_ADDR,
#     CDC_SECURE_REDIS_ADDR, CDC_SECURE_REDIS_USER, CDC_SECURE_KAFKA_{PLAINTEXT,SASL_SSL,MTLS,EXPIRED},
#     CDC_SECURE_KAFKA_USER
#
# MariaDB 10.11 and Redis come from the host's Debian packages (apt-get), MySQL 9.7 and
# MariaDB 11.8 from Debian roots made with debootstrap (cached), Kafka (KRaft, single
# combined broker+controller node) from Maven Central jars fetched with mvn. Debian's
# system services are never used (no systemctl/service); our ports differ from the defaults.
set -euo pipefail

STACK_DIR="${CDC_STACK_DIR:-/tmp/cdc-outbox-stack}"
CACHE_DIR="${CDC_CACHE_DIR:-${HOME:-/root}/.cache/cdc-outbox}"
FLAVOR="${CDC_FLAVOR:-mariadb}"
MYSQL_PORT="${CDC_MYSQL_PORT:-33306}"
MYSQL9_PORT="${CDC_MYSQL9_PORT:-33307}"
MARIADB11_PORT="${CDC_MARIADB11_PORT:-33308}"
MYSQL_ROOT_PASSWORD="${CDC_MYSQL_ROOT_PASSWORD:-root}"
MYSQL_DB="${CDC_MYSQL_DB:-im}"
MYSQL_DURABLE="${CDC_MYSQL_DURABLE:-0}"
REDIS_PORT="${CDC_REDIS_PORT:-36379}"
KAFKA_PORT="${CDC_KAFKA_PORT:-39092}"
KAFKA_CONTROLLER_PORT="${CDC_KAFKA_CONTROLLER_PORT:-39093}"
KAFKA_VERSION="${CDC_KAFKA_VERSION:-4.1.1}"
TIMEOUT="${CDC_STACK_TIMEOUT:-120}"

LOG_DIR="$STACK_DIR/logs"
REDIS_DIR="$STACK_DIR/redis"
KAFKA_DIR="$STACK_DIR/kafka"

REDIS_CONF="$REDIS_DIR/redis.conf"
REDIS_PID="$REDIS_DIR/redis.pid"
REDIS_LOG="$LOG_DIR/redis.log"

KAFKA_PROPS="$KAFKA_DIR/server.properties"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_LOG="$LOG_DIR/kafka.log"
KAFKA_HOME="$CACHE_DIR/kafka-$KAFKA_VERSION"
KAFKA_LIBS="$KAFKA_HOME/libs"

PATH="$PATH:/usr/sbin:/sbin"

log() { echo "dev-stack: $*" >&2; }
die() { echo "dev-stack: ERROR: $*" >&2; exit 1; }

run_user() { id -un; }

# ---------------------------------------------------------------- helpers

# port_open PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pid_alive PIDFILE PATTERN: true if the pid in PIDFILE runs and its command line
# contains PATTERN (guards against pid reuse). Prints the pid.
pid_alive() {
  local file=$1 pattern=$2 pid
  [[ -s $file ]] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [[ -n $pid ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -- "$pattern" >/dev/null || return 1
  echo "$pid"
}

# fail_with_log SERVICE LOGFILE MESSAGE
fail_with_log() {
  local svc=$1 file=$2 msg=$3
  echo "dev-stack: ERROR: $svc: $msg" >&2
  if [[ -f $file ]]; then
    echo "dev-stack: ---- last 40 lines of $file ----" >&2
    tail -n 40 "$file" >&2 || true
    echo "dev-stack: ----" >&2
  fi
  exit 1
}

# reserve_ports: keep the kernel from handing our ports to outgoing
# connections as their local port: they lie in ip_local_port_range
# (32768-60999 by default), and a client socket that happens to get
# 127.0.0.1:39092 makes the broker's (re)start fail with "Address already
# in use". Adds them to ip_local_reserved_ports (a bitmap; the set written
# replaces the old one, so the old one is kept in it). Needs root (CI runs
# as root); otherwise best effort.
reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
  [[ -w $f ]] || return 0
  cur=$(cat "$f" 2>/dev/null) || return 0
  # also the 3-node cluster's, the secured servers', the collector's (up-otel) and the Redis HA ports, started later
  # in a test run: reserved from the first `up` on, no client connection
  # takes one as its local port meanwhile (seen: "Address already in use"
  # for a cluster node started after the integration tests)
  echo "${cur:+$cur,}$MYSQL_PORT,$MYSQL9_PORT,$MARIADB11_PORT,$REDIS_PORT,$KAFKA_PORT,$KAFKA_CONTROLLER_PORT,$CLUSTER_PORT-$((CLUSTER_PORT + 5)),$SEC_MYSQL_PORT,$SEC_REDIS_PORT,$SEC_KAFKA_PORT,$SEC_KAFKA_SASL_PORT,$SEC_KAFKA_MTLS_PORT,$SEC_KAFKA_EXPIRED_PORT,$SEC_KAFKA_CONTROLLER_PORT,$OTEL_GRPC_PORT,$OTEL_HTTP_PORT" >"$f" 2>/dev/null || true
  reserve_ha_ports # the Redis Sentinel and Cluster ports (up-redis-ha)
}

# check_port_free SERVICE PORT: refuse to start if a foreign process owns our port.
check_port_free() {
  if port_open "$2"; then
    die "$1: 127.0.0.1:$2 is already in use by a process this script did not start (see: ss -ltnp | grep :$2); pick another port via env"
  fi
}

# stop_pid SERVICE PIDFILE PATTERN: SIGTERM, wait up to 60 s, then SIGKILL.
stop_pid() {
  local svc=$1 file=$2 pattern=$3 pid i
  if ! pid=$(pid_alive "$file" "$pattern"); then
    log "$svc: not running (by pid file)"
    rm -f "$file"
    return 0
  fi
  log "$svc: stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    [[ -d /proc/$pid ]] || break
    # a zombie that is not our child still shows in /proc; treat it as gone
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
  done
  if [[ -d /proc/$pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
    log "$svc: still running after 60 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$file"
  log "$svc: stopped"
}

kill_pid() {
  local svc=$1 file=$2 pattern=$3 pid
  if pid=$(pid_alive "$file" "$pattern"); then
    log "$svc: SIGKILL pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
    while [[ -d /proc/$pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; do sleep 0.1; done
  else
    log "$svc: not running"
  fi
}

mkdirs() {
  mkdir -p "$LOG_DIR" "$REDIS_DIR" "$KAFKA_DIR" "$CACHE_DIR"
}

# ---------------------------------------------------------------- packages

need_cmd() { command -v "$1" >/dev/null 2>&1; }

# ensure_packages: the host packages the stack needs (the selected flavour's
# database: MariaDB 10.11, or debootstrap to build the root of another).
ensure_packages() {
  local pkgs=()
  if [[ $FLAVOR == mariadb ]]; then
    need_cmd mariadbd && need_cmd mariadb-install-db || pkgs+=(mariadb-server)
    need_cmd mariadb && need_cmd mariadb-admin || pkgs+=(mariadb-client)
  elif [[ ! -f $DB_CACHE_ROOT/.complete ]]; then
    need_cmd debootstrap || pkgs+=(debootstrap)
  fi
  need_cmd redis-server && need_cmd redis-cli || pkgs+=(redis-server)
  need_cmd java || pkgs+=(default-jre-headless)
  need_cmd mvn || pkgs+=(maven)
  ensure_apt "${pkgs[@]}"
}

# ensure_apt PKG...: apt-get install on the host (as root, or with sudo -n)
ensure_apt() {
  local pkgs=("$@")
  ((${#pkgs[@]})) || return 0

  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    need_cmd sudo || die "missing packages (${pkgs[*]}) and not root; install them: apt-get install -y --no-install-recommends ${pkgs[*]}"
    sudo=(sudo -n)
  fi
  log "installing Debian packages: ${pkgs[*]} (log: $LOG_DIR/apt.log)"
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Use-Pty=0
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    log "apt package lists are empty; running apt-get update"
    "${apt[@]}" update >>"$LOG_DIR/apt.log" 2>&1 || fail_with_log apt "$LOG_DIR/apt.log" "apt-get update failed"
  fi
  if ! "${apt[@]}" install -y --no-install-recommends "${pkgs[@]}" >>"$LOG_DIR/apt.log" 2>&1; then
    log "apt-get install failed; running apt-get update and retrying"
    "${apt[@]}" update >>"$LOG_DIR/apt.log" 2>&1 || fail_with_log apt "$LOG_DIR/apt.log" "apt-get update failed"
    "${apt[@]}" install -y --no-install-recommends "${pkgs[@]}" >>"$LOG_DIR/apt.log" 2>&1 ||
      fail_with_log apt "$LOG_DIR/apt.log" "apt-get install ${pkgs[*]} failed"
  fi
  hash -r
}

# ---------------------------------------------------------------- database flavours
#
# CDC_FLAVOR selects the database server:
#   mariadb    MariaDB 10.11 from the host's Debian packages (default), $STACK_DIR/mariadb
#   mysql      MySQL 9.7 (Debian sid mysql-server-core), $STACK_DIR/mysql
#   mariadb11  MariaDB 11.8 (Debian 13 trixie mariadb-server), $STACK_DIR/mariadb11
# The last two run chrooted in a Debian root made with debootstrap (their libc is
# newer than the host's). The root is built once into $CACHE_DIR and each stack
# gets a hard-linked copy ($STACK_DIR/<flavour>/root), whose /cdc holds the
# config, datadir, binlogs and socket ($STACK_DIR/<flavour>/cdc links to it).

FLAVORS=(mariadb mysql mariadb11)

# flavor_setup NAME: set the DB_* variables for one flavour.
flavor_setup() {
  FLAVOR=$1
  case $FLAVOR in
    mariadb)
      DB_LABEL="MariaDB 10.11" DB_PORT=$MYSQL_PORT DB_TOP="$STACK_DIR/mariadb"
      DB_ROOT="" DB_HOST_DIR="$STACK_DIR/mariadb" DB_SRV_DIR="$STACK_DIR/mariadb"
      DB_SERVER=mariadbd DB_CLIENT=mariadb DB_ADMIN=mariadb-admin DB_BINLOG=mariadb-bin
      DB_LOG="$LOG_DIR/mariadb.log" ;;
    mysql)
      DB_LABEL="MySQL 9.7" DB_PORT=$MYSQL9_PORT DB_TOP="$STACK_DIR/mysql"
      DB_ROOT="$STACK_DIR/mysql/root" DB_HOST_DIR="$STACK_DIR/mysql/root/cdc" DB_SRV_DIR=/cdc
      DB_SERVER=mysqld DB_CLIENT=mysql DB_ADMIN=mysqladmin DB_BINLOG=mysql-bin
      DB_CACHE_ROOT="$CACHE_DIR/root-sid-mysql" DB_SUITE=sid
      DB_PKGS=(mysql-server-core mysql-client-core) DB_WANT_VERSION='^9\.7\.'
      DB_LOG="$LOG_DIR/mysql.log" ;;
    mariadb11)
      DB_LABEL="MariaDB 11.8" DB_PORT=$MARIADB11_PORT DB_TOP="$STACK_DIR/mariadb11"
      DB_ROOT="$STACK_DIR/mariadb11/root" DB_HOST_DIR="$STACK_DIR/mariadb11/root/cdc" DB_SRV_DIR=/cdc
      DB_SERVER=mariadbd DB_CLIENT=mariadb DB_ADMIN=mariadb-admin DB_BINLOG=mariadb-bin
      DB_CACHE_ROOT="$CACHE_DIR/root-trixie-mariadb" DB_SUITE=trixie
      DB_PKGS=(mariadb-server mariadb-client) DB_WANT_VERSION='^11\.8\.'
      DB_LOG="$LOG_DIR/mariadb11.log" ;;
    *) die "CDC_FLAVOR=$FLAVOR: want mariadb (10.11, host packages), mysql (9.7) or mariadb11 (11.8)" ;;
  esac
  DB_CNF="$DB_HOST_DIR/my.cnf" DB_CLIENT_CNF="$DB_HOST_DIR/client.cnf"
  DB_PID="$DB_HOST_DIR/mysqld.pid" DB_SOCK_SRV="$DB_SRV_DIR/mysqld.sock"
  # the binlog directory as the host sees it (tests copy files from it)
  DB_BINLOG_DIR="$DB_HOST_DIR/binlog"
}

# in_db CMD ARGS...: run a server-side binary of the flavour (chrooted if it has a root).
in_db() {
  if [[ -n $DB_ROOT ]]; then
    chroot "$DB_ROOT" "$@"
  else
    "$@"
  fi
}

# debian_mirror: the Debian mirror this machine's apt sources use (CDC_DEBIAN_MIRROR overrides).
debian_mirror() {
  if [[ -n ${CDC_DEBIAN_MIRROR:-} ]]; then echo "$CDC_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE '(https?|ftp)://[^ ]+/debian/?( |$)' | grep -v -- '-security' | head -n 1 | tr -d ' ') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

# root_build: build the flavour's cached Debian root (once; under a lock, into a
# scratch dir renamed at the end so a failed build never leaves half a root).
root_build() {
  [[ -f $DB_CACHE_ROOT/.complete ]] && return 0
  mkdir -p "$CACHE_DIR"
  need_cmd debootstrap || ensure_apt debootstrap
  local lock="$CACHE_DIR/roots.lock" blog="$LOG_DIR/root-$FLAVOR.log"
  exec 9>"$lock"
  flock 9
  if [[ -f $DB_CACHE_ROOT/.complete ]]; then exec 9>&-; return 0; fi
  local mirror base="$CACHE_DIR/debian-$DB_SUITE-base" aptopt=(-o Acquire::Check-Valid-Until=false)
  mirror=$(debian_mirror)
  if [[ ! -f $base/.complete ]]; then
    log "$FLAVOR: debootstrap --variant=minbase $DB_SUITE from $mirror into $base (log: $blog)"
    rm -rf "$base.tmp"
    debootstrap --variant=minbase "$DB_SUITE" "$base.tmp" "$mirror" >>"$blog" 2>&1 ||
      fail_with_log "$FLAVOR" "$blog" "debootstrap $DB_SUITE failed"
    touch "$base.tmp/.complete"
    mv "$base.tmp" "$base"
  fi
  log "$FLAVOR: installing ${DB_PKGS[*]} into $DB_CACHE_ROOT (log: $blog)"
  rm -rf "$DB_CACHE_ROOT.tmp"
  cp -a "$base" "$DB_CACHE_ROOT.tmp"
  rm -f "$DB_CACHE_ROOT.tmp/.complete"
  local r="$DB_CACHE_ROOT.tmp"
  cp /etc/hosts "$r/etc/hosts"
  # no service starts from package scripts inside the root
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d" && chmod 755 "$r/usr/sbin/policy-rc.d"
  # the mirror's Release files may be past their Valid-Until date
  echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99cdc-outbox"
  chroot "$r" apt-get "${aptopt[@]}" update >>"$blog" 2>&1 ||
    fail_with_log "$FLAVOR" "$blog" "apt-get update in the $DB_SUITE root failed"
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get "${aptopt[@]}" -o Dpkg::Use-Pty=0 \
    install -y --no-install-recommends "${DB_PKGS[@]}" >>"$blog" 2>&1 ||
    fail_with_log "$FLAVOR" "$blog" "apt-get install ${DB_PKGS[*]} in the $DB_SUITE root failed"
  chroot "$r" apt-get clean >>"$blog" 2>&1 || true
  rm -rf "$r/var/lib/mysql" "$r/var/lib/apt/lists/"*_Packages* 2>/dev/null || true
  local v
  v=$(chroot "$r" "/usr/sbin/$DB_SERVER" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1) || true
  [[ $v =~ $DB_WANT_VERSION ]] || fail_with_log "$FLAVOR" "$blog" "$DB_SERVER in the $DB_SUITE root is version '$v', want $DB_WANT_VERSION (the suite moved on? CDC_FLAVOR needs an update)"
  echo "$v" >"$r/.version"
  touch "$r/.complete"
  mv "$r" "$DB_CACHE_ROOT"
  exec 9>&-
  log "$FLAVOR: root ready ($DB_SERVER $v)"
}

# root_install: the stack's hard-linked copy of the cached root (the server only
# writes below /cdc and /tmp, new files, so the cache is never modified).
root_install() {
  [[ -n $DB_ROOT ]] || return 0
  root_build
  if [[ -f $DB_ROOT/.complete && $(cat "$DB_ROOT/.version" 2>/dev/null) == $(cat "$DB_CACHE_ROOT/.version") ]]; then
    return 0
  fi
  local keep=""
  if [[ -d $DB_ROOT/cdc ]]; then keep="$DB_TOP/cdc.keep"; rm -rf "$keep"; mv "$DB_ROOT/cdc" "$keep"; fi
  rm -rf "$DB_ROOT" "$DB_ROOT.tmp"
  mkdir -p "$DB_TOP"
  cp -al "$DB_CACHE_ROOT" "$DB_ROOT.tmp" 2>/dev/null || { rm -rf "$DB_ROOT.tmp"; cp -a "$DB_CACHE_ROOT" "$DB_ROOT.tmp"; }
  mv "$DB_ROOT.tmp" "$DB_ROOT"
  [[ -n $keep ]] && mv "$keep" "$DB_ROOT/cdc"
  ln -sfn root/cdc "$DB_TOP/cdc"
}

db_write_config() {
  mkdir -p "$DB_HOST_DIR/data" "$DB_HOST_DIR/binlog" "$DB_HOST_DIR/tmp"
  local flush=2 sync=0 extra="" logerr="log-error=$DB_LOG"
  if [[ $MYSQL_DURABLE == 1 ]]; then flush=1 sync=1; fi
  # a chrooted server cannot reach the host's log dir: its stderr goes there
  [[ -n $DB_ROOT ]] && logerr="# errors: stderr, appended to $DB_LOG"
  case $FLAVOR in
    mysql)
      extra="# MySQL: GTIDs on (off unless configured), no X protocol listener (port 33060),
# LOAD DATA/SELECT INTO OUTFILE anywhere, full row metadata (9.x default: MINIMAL)
gtid_mode=ON
enforce_gtid_consistency=ON
mysqlx=OFF
secure-file-priv=\"\"
binlog_expire_logs_auto_purge=ON" ;;
  esac
  cat >"$DB_CNF" <<EOF
# generated by scripts/dev-stack.sh ($DB_LABEL) — edits are overwritten on every start
[mysqld]
user=$(run_user)
datadir=$DB_SRV_DIR/data
tmpdir=$DB_SRV_DIR/tmp
socket=$DB_SOCK_SRV
pid-file=$DB_SRV_DIR/mysqld.pid
$logerr
port=$DB_PORT
bind-address=127.0.0.1
skip-name-resolve
# a private server does not read Debian's conf.d, so restore its utf8mb4 defaults
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
# binlog for CDC
server_id=1
log_bin=$DB_SRV_DIR/binlog/$DB_BINLOG
log_bin_index=$DB_SRV_DIR/binlog/$DB_BINLOG.index
binlog_format=ROW
binlog_row_image=FULL
binlog_row_metadata=FULL
binlog_expire_logs_seconds=604800
max_binlog_size=256M
max_allowed_packet=64M
# Dev speed: innodb_flush_log_at_trx_commit=2 + sync_binlog=0 still write the redo log
# and binlog to the OS at every commit, so they survive a server crash/SIGKILL
# (only an OS crash can lose the last second). CDC_MYSQL_DURABLE=1 selects 1/1.
innodb_flush_log_at_trx_commit=$flush
sync_binlog=$sync
innodb_buffer_pool_size=256M
performance_schema=OFF
max_connections=300
$extra

[client]
socket=$DB_SOCK_SRV
port=$DB_PORT
default-character-set=utf8mb4
EOF
  # root over TCP, for `$DB_CLIENT --defaults-file=client.cnf`
  (
    umask 077
    cat >"$DB_CLIENT_CNF" <<EOF
[client]
user=root
password=$MYSQL_ROOT_PASSWORD
host=127.0.0.1
port=$DB_PORT
protocol=TCP
default-character-set=utf8mb4
EOF
  )
}

db_ping() {
  in_db "$DB_ADMIN" --no-defaults --protocol=TCP -h127.0.0.1 -P"$DB_PORT" --connect-timeout=2 ping >/dev/null 2>&1
}

db_alive() { pid_alive "$DB_PID" "$DB_SERVER"; }
db_running() { db_alive >/dev/null && db_ping; }

# db_sql_tcp SQL: run as root with the configured password over TCP
db_sql_tcp() {
  in_db "$DB_CLIENT" --defaults-file="$DB_SRV_DIR/client.cnf" --batch --skip-column-names -e "$1"
}

db_provision() {
  local pw_sql db_sql plog="$LOG_DIR/$FLAVOR-provision.log"
  pw_sql=${MYSQL_ROOT_PASSWORD//\\/\\\\}
  pw_sql=${pw_sql//\'/\\\'}
  db_sql=${MYSQL_DB//\`/\`\`}
  if db_sql_tcp "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='$db_sql'" 2>/dev/null | grep 1 >/dev/null; then
    return 0
  fi
  log "$FLAVOR: provisioning root@localhost/root@127.0.0.1 password and database '$MYSQL_DB'"
  local anon=""
  # mariadb-install-db in a Debian root creates anonymous users, which shadow
  # user@% for logins from localhost
  [[ $DB_SERVER == mariadbd ]] && anon="DELETE FROM mysql.global_priv WHERE User='';"
  local sql="SET SESSION sql_log_bin=0;
$anon
ALTER USER 'root'@'localhost' IDENTIFIED BY '$pw_sql';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '$pw_sql';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '$pw_sql';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS \`$db_sql\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
FLUSH PRIVILEGES;"
  # Over the socket as root: fresh datadir has an empty root password; later runs
  # have the configured one (MYSQL_PWD keeps it off the command line).
  if MYSQL_PWD="$MYSQL_ROOT_PASSWORD" in_db "$DB_CLIENT" --no-defaults --socket="$DB_SOCK_SRV" -uroot -e "$sql" 2>>"$plog" ||
    in_db "$DB_CLIENT" --no-defaults --socket="$DB_SOCK_SRV" -uroot -e "$sql" 2>>"$plog"; then
    db_sql_tcp "SELECT 1" >/dev/null 2>>"$plog" ||
      fail_with_log "$FLAVOR" "$plog" "root@127.0.0.1 login with CDC_MYSQL_ROOT_PASSWORD fails after provisioning"
  else
    fail_with_log "$FLAVOR" "$plog" "cannot log in as root to set the password (datadir made with another CDC_MYSQL_ROOT_PASSWORD? try: $0 wipe)"
  fi
}

# db_init: a fresh datadir, made in a scratch dir and renamed, so a failed init
# never leaves half a datadir.
db_init() {
  [[ -d $DB_HOST_DIR/data/mysql ]] && return 0
  local ilog="$LOG_DIR/$FLAVOR-init.log"
  log "$FLAVOR: initializing datadir $DB_HOST_DIR/data"
  rm -rf "$DB_HOST_DIR/data.init" && mkdir -p "$DB_HOST_DIR/data.init"
  case $DB_SERVER in
    mariadbd)
      in_db mariadb-install-db --defaults-file="$DB_SRV_DIR/my.cnf" --user="$(run_user)" --datadir="$DB_SRV_DIR/data.init" \
        --auth-root-authentication-method=normal --skip-test-db >>"$ilog" 2>&1 ||
        fail_with_log "$FLAVOR" "$ilog" "mariadb-install-db failed" ;;
    mysqld)
      rmdir "$DB_HOST_DIR/data.init"
      in_db mysqld --defaults-file="$DB_SRV_DIR/my.cnf" --initialize-insecure --user="$(run_user)" \
        --datadir="$DB_SRV_DIR/data.init" --log-error="$DB_SRV_DIR/tmp/initialize.log" >>"$ilog" 2>&1 || {
        cat "$DB_HOST_DIR/tmp/initialize.log" >>"$ilog" 2>/dev/null
        fail_with_log "$FLAVOR" "$ilog" "mysqld --initialize-insecure failed"
      }
      cat "$DB_HOST_DIR/tmp/initialize.log" >>"$ilog" 2>/dev/null; rm -f "$DB_HOST_DIR/tmp/initialize.log" ;;
  esac
  rm -rf "$DB_HOST_DIR/data" && mv "$DB_HOST_DIR/data.init" "$DB_HOST_DIR/data"
}

start_db() {
  mkdirs
  root_install
  mkdir -p "$DB_HOST_DIR"
  if db_running; then
    log "$FLAVOR: already up (pid $(db_alive), 127.0.0.1:$DB_PORT)"
    db_write_config
    db_provision
    return 0
  fi
  if db_alive >/dev/null; then
    log "$FLAVOR: process exists but does not answer yet; waiting"
  else
    check_port_free "$FLAVOR" "$DB_PORT"
    db_write_config
    db_init
    rm -f "$DB_PID" "$DB_HOST_DIR/mysqld.sock"
    log "$FLAVOR: starting $DB_LABEL on 127.0.0.1:$DB_PORT (log: $DB_LOG)"
    local bin
    if [[ -n $DB_ROOT ]]; then
      # chroot execs the server, so the pid is the server's
      setsid nohup chroot "$DB_ROOT" "/usr/sbin/$DB_SERVER" --defaults-file="$DB_SRV_DIR/my.cnf" >>"$DB_LOG" 2>&1 </dev/null &
    else
      bin=$(command -v "$DB_SERVER")
      # --defaults-file must be the first option; setsid keeps it out of our process group
      setsid nohup "$bin" --defaults-file="$DB_CNF" >>"$DB_LOG" 2>&1 </dev/null &
    fi
    echo "$!" >"$DB_PID.launcher"
  fi
  local deadline=$((SECONDS + TIMEOUT))
  until db_ping; do
    if ((SECONDS >= deadline)); then
      fail_with_log "$FLAVOR" "$DB_LOG" "did not answer on 127.0.0.1:$DB_PORT within ${TIMEOUT}s"
    fi
    if [[ -f $DB_PID.launcher ]] && ! [[ -d /proc/$(cat "$DB_PID.launcher") ]]; then
      rm -f "$DB_PID.launcher"
      fail_with_log "$FLAVOR" "$DB_LOG" "$DB_SERVER exited during startup"
    fi
    sleep 0.5
  done
  # the server writes pid-file itself; fall back to the launcher pid
  if ! db_alive >/dev/null && [[ -f $DB_PID.launcher ]]; then
    cp "$DB_PID.launcher" "$DB_PID"
  fi
  rm -f "$DB_PID.launcher"
  db_provision
  log "$FLAVOR: up ($DB_LABEL, pid $(db_alive || echo '?'), 127.0.0.1:$DB_PORT, db '$MYSQL_DB')"
}

stop_db() { stop_pid "$FLAVOR" "$DB_PID" "$DB_SERVER"; }
kill_db() { kill_pid "$FLAVOR" "$DB_PID" "$DB_SERVER"; }

# ---------------------------------------------------------------- Redis

redis_write_config() {
  cat >"$REDIS_CONF" <<EOF
# generated by scripts/dev-stack.sh — edits are overwritten on every start
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize yes
pidfile $REDIS_PID
logfile $REDIS_LOG
dir $REDIS_DIR
# persistence: checkpoints must survive a restart
appendonly yes
appendfsync everysec
appenddirname appendonlydir
save 3600 1 300 100 60 10000
dbfilename dump.rdb
EOF
}

redis_ping() {
  [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
}

redis_running() { pid_alive "$REDIS_PID" redis-server >/dev/null && redis_ping; }

start_redis() {
  mkdirs
  if redis_running; then
    log "redis: already up (pid $(pid_alive "$REDIS_PID" redis-server), 127.0.0.1:$REDIS_PORT)"
    return 0
  fi
  if ! pid_alive "$REDIS_PID" redis-server >/dev/null; then
    check_port_free redis "$REDIS_PORT"
    redis_write_config
    rm -f "$REDIS_PID"
    log "redis: starting on 127.0.0.1:$REDIS_PORT (log: $REDIS_LOG)"
    # daemonize yes: redis forks and writes its own pid file
    setsid redis-server "$REDIS_CONF" >>"$REDIS_LOG" 2>&1 </dev/null ||
      fail_with_log redis "$REDIS_LOG" "redis-server failed to start"
  fi
  local deadline=$((SECONDS + TIMEOUT))
  until redis_ping; do
    ((SECONDS < deadline)) || fail_with_log redis "$REDIS_LOG" "did not answer PING on 127.0.0.1:$REDIS_PORT within ${TIMEOUT}s"
    sleep 0.2
  done
  # AOF loading answers PING with -LOADING; wait until it is really ready
  until [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" info persistence 2>/dev/null | tr -d '\r' | awk -F: '$1=="loading"{print $2}') == 0 ]]; do
    ((SECONDS < deadline)) || fail_with_log redis "$REDIS_LOG" "still loading data after ${TIMEOUT}s"
    sleep 0.2
  done
  log "redis: up (pid $(pid_alive "$REDIS_PID" redis-server || echo '?'), 127.0.0.1:$REDIS_PORT)"
}

stop_redis() { stop_pid redis "$REDIS_PID" redis-server; }

# ---------------------------------------------------------------- Kafka

kafka_fetch() {
  if [[ -f $KAFKA_LIBS/.complete ]]; then
    return 0
  fi
  mkdir -p "$KAFKA_HOME"
  log "kafka: fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION + kafka-tools and dependencies with mvn (log: $LOG_DIR/mvn.log)"
  cat >"$KAFKA_HOME/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by scripts/dev-stack.sh: fetches a Kafka broker + CLI tools -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.cdc-outbox</groupId>
  <artifactId>dev-stack-kafka</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <!-- broker+controller: kafka.Kafka; storage format: kafka.tools.StorageTool -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- CLI: org.apache.kafka.tools.TopicCommand, ConsoleProducer, consumer.ConsoleConsumer -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- slf4j 1.x -> log4j2 binding (Kafka's own distribution ships the same) -->
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
  rm -rf "$KAFKA_LIBS.tmp"
  if ! mvn -B -q -f "$KAFKA_HOME/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS.tmp" >>"$LOG_DIR/mvn.log" 2>&1; then
    fail_with_log kafka "$LOG_DIR/mvn.log" "mvn could not fetch Kafka $KAFKA_VERSION (try another CDC_KAFKA_VERSION)"
  fi
  [[ -f $KAFKA_LIBS.tmp/kafka_2.13-$KAFKA_VERSION.jar ]] || fail_with_log kafka "$LOG_DIR/mvn.log" "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
  touch "$KAFKA_LIBS.tmp/.complete"
  rm -rf "$KAFKA_LIBS"
  mv "$KAFKA_LIBS.tmp" "$KAFKA_LIBS"
  log "kafka: $(ls "$KAFKA_LIBS"/*.jar | wc -l) jars in $KAFKA_LIBS"
}

kafka_write_config() {
  mkdir -p "$KAFKA_DIR/data"
  cat >"$KAFKA_PROPS" <<EOF
# generated by scripts/dev-stack.sh — edits are overwritten on every start
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DIR/data

auto.create.topics.enable=true
num.partitions=8
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
log.retention.hours=168
num.network.threads=3
num.io.threads=4
EOF
  cat >"$KAFKA_DIR/log4j2.properties" <<EOF
# broker logging -> stdout -> $KAFKA_LOG
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
EOF
  cat >"$KAFKA_DIR/tools-log4j2.properties" <<EOF
# CLI tools: warnings only, to stderr
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

# kafka_java MAIN ARGS...: run a Kafka CLI class in the foreground
kafka_java() {
  [[ -f $KAFKA_LIBS/.complete ]] || die "kafka jars not fetched yet; run: $0 up"
  [[ -f $KAFKA_DIR/tools-log4j2.properties ]] || { mkdir -p "$KAFKA_DIR"; kafka_write_config; }
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_DIR/tools-log4j2.properties" \
    -cp "$KAFKA_LIBS/*" "$@"
}

kafka_format() {
  [[ -f $KAFKA_DIR/data/meta.properties ]] && return 0
  local cid
  if [[ -s $KAFKA_DIR/cluster.id ]]; then
    cid=$(cat "$KAFKA_DIR/cluster.id")
  else
    cid=$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$LOG_DIR/kafka-format.log" | tail -n 1)
    [[ $cid =~ ^[A-Za-z0-9_-]{22}$ ]] || fail_with_log kafka "$LOG_DIR/kafka-format.log" "StorageTool random-uuid gave '$cid'"
    echo "$cid" >"$KAFKA_DIR/cluster.id"
  fi
  log "kafka: formatting storage $KAFKA_DIR/data (cluster id $cid, static quorum 1@127.0.0.1:$KAFKA_CONTROLLER_PORT)"
  kafka_java kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$KAFKA_PROPS" \
    >>"$LOG_DIR/kafka-format.log" 2>&1 ||
    fail_with_log kafka "$LOG_DIR/kafka-format.log" "kafka.tools.StorageTool format failed"
}

kafka_metadata_ok() {
  timeout 60 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_DIR/tools-log4j2.properties" -cp "$KAFKA_LIBS/*" \
    org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" --list \
    >/dev/null 2>>"$LOG_DIR/kafka-ready.log"
}

kafka_running() { pid_alive "$KAFKA_PID" kafka.Kafka >/dev/null && port_open "$KAFKA_PORT"; }

# kafka_wait_started NAME PORT LOG OFFSET PID PIDFILE DATADIR: until the broker PID logged
# 'Kafka Server started' in LOG after byte OFFSET and PORT is open. A broker that recovers
# many partitions (a data dir left by earlier test runs, after a kill -9 or a power cut:
# about 8 ms per partition on 2 cores) keeps writing its log while it does: each growth of
# the log moves the deadline on to TIMEOUT from then, up to 5 x TIMEOUT in all.
kafka_wait_started() {
  local name=$1 port=$2 logf=$3 offset=$4 pid=$5 pidf=$6 data=$7
  local begun=$SECONDS deadline=$((SECONDS + TIMEOUT)) limit=$((SECONDS + 5 * TIMEOUT)) size last=-1 told=0
  until port_open "$port" &&
    tail -c +"$((offset + 1))" "$logf" 2>/dev/null | grep 'Kafka Server started' >/dev/null; do
    [[ -d /proc/$pid ]] || { rm -f "$pidf"; fail_with_log "$name" "$logf" "broker exited during startup"; }
    size=$(stat -c %s "$logf" 2>/dev/null || echo 0)
    if ((size != last)); then
      last=$size
      ((SECONDS + TIMEOUT <= limit)) && deadline=$((SECONDS + TIMEOUT))
    fi
    if ((!told && SECONDS - begun > 30)); then
      told=1
      log "$name: still starting after 30s ($(du -sh "$data" 2>/dev/null | cut -f1) of data in $(find "$data" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l) partition dirs to recover; '$0 wipe' starts empty)"
    fi
    ((SECONDS < deadline)) || fail_with_log "$name" "$logf" "not started within ${TIMEOUT}s of its last log line (data dir: $data; '$0 wipe' starts empty)"
    sleep 0.5
  done
}

start_kafka() {
  mkdirs
  need_cmd java || die "java not found (apt-get install default-jre-headless)"
  if kafka_running; then
    log "kafka: already up (pid $(pid_alive "$KAFKA_PID" kafka.Kafka), 127.0.0.1:$KAFKA_PORT)"
    return 0
  fi
  kafka_fetch
  local log_offset=0 pid
  if pid=$(pid_alive "$KAFKA_PID" kafka.Kafka); then
    log "kafka: process $pid exists but the port is not open yet; waiting"
  else
    check_port_free kafka "$KAFKA_PORT"
    check_port_free kafka-controller "$KAFKA_CONTROLLER_PORT"
    kafka_write_config
    kafka_format
    [[ -f $KAFKA_LOG ]] && log_offset=$(stat -c %s "$KAFKA_LOG")
    log "kafka: starting $KAFKA_VERSION (KRaft broker+controller) on 127.0.0.1:$KAFKA_PORT (log: $KAFKA_LOG)"
    setsid nohup java -Xmx512m -Xms256m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
      -Dkafka.logs.dir="$LOG_DIR" -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
      -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" >>"$KAFKA_LOG" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$KAFKA_PID"
  fi
  # 1) the server says it started and the port is open
  kafka_wait_started kafka "$KAFKA_PORT" "$KAFKA_LOG" "$log_offset" "$pid" "$KAFKA_PID" "$KAFKA_DIR/data"
  # 2) a real metadata request succeeds
  local deadline=$((SECONDS + TIMEOUT))
  until kafka_metadata_ok; do
    [[ -d /proc/$pid ]] || { rm -f "$KAFKA_PID"; fail_with_log kafka "$KAFKA_LOG" "broker exited during startup"; }
    ((SECONDS < deadline)) || fail_with_log kafka "$LOG_DIR/kafka-ready.log" "metadata request (TopicCommand --list) fails after ${TIMEOUT}s"
    sleep 1
  done
  log "kafka: up (pid $pid, 127.0.0.1:$KAFKA_PORT)"
}

stop_kafka() { stop_pid kafka "$KAFKA_PID" kafka.Kafka; }

# ---------------------------------------------------------------- secured services (up-secure)
#
# A second, separate set of servers with TLS and authentication, beside the
# plaintext stack (which other tests keep using): a MariaDB with
# require_secure_transport=ON, a TLS-only Redis with an ACL user, and a Kafka
# KRaft node with a SASL_SSL listener (PLAIN with the same user and password
# in the JAAS configuration, SCRAM-SHA-256/512 users from
# `kafka-storage format --add-scram`, OAUTHBEARER with Kafka's unsecured
# validator: unsigned JWTs with sub, iat and exp), an SSL listener requiring client certificates, an SSL listener
# presenting an expired certificate, and a PLAINTEXT one. The certificates
# are made by `go run ./internal/testcerts/gencerts` into $SEC_DIR/tls and
# the passwords are random, in $SEC_DIR/secrets (mode 0600): none is committed.

SEC_DIR="$STACK_DIR/secure"
SEC_TLS="$SEC_DIR/tls"
SEC_SECRETS="$SEC_DIR/secrets"
SEC_MYSQL_PORT="${CDC_SECURE_MYSQL_PORT:-33317}"  # not 33307: the MySQL 9.7 flavour's
SEC_REDIS_PORT="${CDC_SECURE_REDIS_PORT:-36380}"
SEC_KAFKA_PORT="${CDC_SECURE_KAFKA_PORT:-39192}"          # PLAINTEXT (inter-broker)
SEC_KAFKA_SASL_PORT="${CDC_SECURE_KAFKA_SASL_PORT:-39193}" # SASL_SSL
SEC_KAFKA_MTLS_PORT="${CDC_SECURE_KAFKA_MTLS_PORT:-39194}" # SSL, client certificate required
SEC_KAFKA_EXPIRED_PORT="${CDC_SECURE_KAFKA_EXPIRED_PORT:-39195}" # SSL, expired server certificate
SEC_KAFKA_CONTROLLER_PORT="${CDC_SECURE_KAFKA_CONTROLLER_PORT:-39196}"
SEC_MDB_DIR="$SEC_DIR/mariadb"
SEC_MDB_PID="$SEC_MDB_DIR/mysqld.pid"
SEC_MDB_LOG="$LOG_DIR/secure-mariadb.log"
SEC_REDIS_DIR="$SEC_DIR/redis"
SEC_REDIS_PID="$SEC_REDIS_DIR/redis.pid"
SEC_REDIS_LOG="$LOG_DIR/secure-redis.log"
SEC_KAFKA_DIR="$SEC_DIR/kafka"
SEC_KAFKA_PID="$SEC_KAFKA_DIR/kafka.pid"
SEC_KAFKA_LOG="$LOG_DIR/secure-kafka.log"
SEC_KAFKA_USER=cdc
SEC_REDIS_USER=cdc

# secure_secret NAME: the random password in $SEC_SECRETS/NAME (made once)
secure_secret() {
  local f="$SEC_SECRETS/$1"
  if [[ ! -s $f ]]; then
    (umask 077; mkdir -p "$SEC_SECRETS"; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$f")
  fi
  cat "$f"
}

secure_certs() {
  [[ -s $SEC_TLS/server-bundle.pem ]] && return 0
  need_cmd go || die "secure: go is needed to generate the test certificates (go run ./internal/testcerts/gencerts)"
  log "secure: generating test certificates into $SEC_TLS"
  (cd "$(dirname "$0")/.." && go run ./internal/testcerts/gencerts "$SEC_TLS") ||
    die "secure: certificate generation failed"
}

start_secure_mariadb() {
  mkdir -p "$SEC_MDB_DIR/data" "$SEC_MDB_DIR/binlog" "$SEC_MDB_DIR/tmp" "$LOG_DIR"
  local cnf="$SEC_MDB_DIR/my.cnf" sock="$SEC_MDB_DIR/mysqld.sock" pw
  pw=$(secure_secret mysql-root)
  if pid_alive "$SEC_MDB_PID" mariadbd >/dev/null && port_open "$SEC_MYSQL_PORT"; then
    log "secure mariadb: already up (127.0.0.1:$SEC_MYSQL_PORT)"
    return 0
  fi
  check_port_free secure-mariadb "$SEC_MYSQL_PORT"
  cat >"$cnf" <<EOF
# generated by scripts/dev-stack.sh up-secure
[mysqld]
user=$(run_user)
datadir=$SEC_MDB_DIR/data
tmpdir=$SEC_MDB_DIR/tmp
socket=$sock
pid-file=$SEC_MDB_PID
log-error=$SEC_MDB_LOG
port=$SEC_MYSQL_PORT
bind-address=127.0.0.1
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
server_id=11
log_bin=$SEC_MDB_DIR/binlog/mariadb-bin
binlog_format=ROW
binlog_row_image=FULL
binlog_row_metadata=FULL
innodb_flush_log_at_trx_commit=2
sync_binlog=0
innodb_buffer_pool_size=64M
performance_schema=OFF
require_secure_transport=ON
ssl_ca=$SEC_TLS/ca.pem
ssl_cert=$SEC_TLS/server.pem
ssl_key=$SEC_TLS/server-key.pem
EOF
  if [[ ! -d $SEC_MDB_DIR/data/mysql ]]; then
    log "secure mariadb: initializing datadir"
    rm -rf "$SEC_MDB_DIR/data.init" && mkdir -p "$SEC_MDB_DIR/data.init"
    mariadb-install-db --defaults-file="$cnf" --user="$(run_user)" --datadir="$SEC_MDB_DIR/data.init" \
      --auth-root-authentication-method=normal --skip-test-db >>"$LOG_DIR/secure-mariadb-install.log" 2>&1 ||
      fail_with_log secure-mariadb "$LOG_DIR/secure-mariadb-install.log" "mariadb-install-db failed"
    rm -rf "$SEC_MDB_DIR/data" && mv "$SEC_MDB_DIR/data.init" "$SEC_MDB_DIR/data"
  fi
  rm -f "$SEC_MDB_PID" "$sock"
  log "secure mariadb: starting on 127.0.0.1:$SEC_MYSQL_PORT (require_secure_transport=ON; log: $SEC_MDB_LOG)"
  setsid nohup "$(command -v mariadbd)" --defaults-file="$cnf" >>"$SEC_MDB_LOG" 2>&1 </dev/null &
  local deadline=$((SECONDS + TIMEOUT))
  until [[ -S $sock ]] && mariadb --no-defaults --socket="$sock" -uroot -p"$pw" -e 'SELECT 1' >/dev/null 2>&1 ||
    mariadb --no-defaults --socket="$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail_with_log secure-mariadb "$SEC_MDB_LOG" "did not start within ${TIMEOUT}s"
    sleep 0.5
  done
  local sql="SET SESSION sql_log_bin=0;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\` CHARACTER SET utf8mb4;
FLUSH PRIVILEGES;"
  MYSQL_PWD="$pw" mariadb --no-defaults --socket="$sock" -uroot -e "$sql" 2>/dev/null ||
    mariadb --no-defaults --socket="$sock" -uroot -e "$sql" ||
    die "secure mariadb: provisioning failed"
  log "secure mariadb: up (127.0.0.1:$SEC_MYSQL_PORT, TLS required)"
}

start_secure_redis() {
  mkdir -p "$SEC_REDIS_DIR" "$LOG_DIR"
  if pid_alive "$SEC_REDIS_PID" redis-server >/dev/null; then
    log "secure redis: already up (127.0.0.1:$SEC_REDIS_PORT)"
    return 0
  fi
  check_port_free secure-redis "$SEC_REDIS_PORT"
  local pw
  pw=$(secure_secret redis)
  (umask 077; cat >"$SEC_REDIS_DIR/redis.conf" <<EOF
# generated by scripts/dev-stack.sh up-secure
bind 127.0.0.1
port 0
tls-port $SEC_REDIS_PORT
tls-cert-file $SEC_TLS/server.pem
tls-key-file $SEC_TLS/server-key.pem
tls-ca-cert-file $SEC_TLS/ca.pem
tls-auth-clients optional
daemonize yes
pidfile $SEC_REDIS_PID
logfile $SEC_REDIS_LOG
dir $SEC_REDIS_DIR
appendonly yes
appendfsync everysec
user default off
user $SEC_REDIS_USER on >$pw ~* &* +@all
EOF
  )
  setsid redis-server "$SEC_REDIS_DIR/redis.conf" >>"$SEC_REDIS_LOG" 2>&1 </dev/null ||
    fail_with_log secure-redis "$SEC_REDIS_LOG" "redis-server failed to start (built without TLS?)"
  local deadline=$((SECONDS + TIMEOUT))
  until [[ $(REDISCLI_AUTH="$pw" redis-cli --tls --cacert "$SEC_TLS/ca.pem" -h 127.0.0.1 -p "$SEC_REDIS_PORT" --user "$SEC_REDIS_USER" ping 2>/dev/null) == PONG ]]; do
    ((SECONDS < deadline)) || fail_with_log secure-redis "$SEC_REDIS_LOG" "did not answer over TLS within ${TIMEOUT}s"
    sleep 0.2
  done
  log "secure redis: up (TLS on 127.0.0.1:$SEC_REDIS_PORT, ACL user $SEC_REDIS_USER)"
}

start_secure_kafka() {
  mkdir -p "$SEC_KAFKA_DIR/data" "$LOG_DIR"
  if pid_alive "$SEC_KAFKA_PID" kafka.Kafka >/dev/null && port_open "$SEC_KAFKA_SASL_PORT"; then
    log "secure kafka: already up (SASL_SSL 127.0.0.1:$SEC_KAFKA_SASL_PORT)"
    return 0
  fi
  kafka_fetch
  local p
  for p in "$SEC_KAFKA_PORT" "$SEC_KAFKA_SASL_PORT" "$SEC_KAFKA_MTLS_PORT" "$SEC_KAFKA_EXPIRED_PORT" "$SEC_KAFKA_CONTROLLER_PORT"; do
    check_port_free secure-kafka "$p"
  done
  [[ -f $KAFKA_DIR/tools-log4j2.properties ]] || { mkdir -p "$KAFKA_DIR"; kafka_write_config; }
  local pw props="$SEC_KAFKA_DIR/server.properties"
  pw=$(secure_secret kafka)
  (umask 077; cat >"$props" <<EOF
# generated by scripts/dev-stack.sh up-secure
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$SEC_KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$SEC_KAFKA_PORT,SASL_SSL://127.0.0.1:$SEC_KAFKA_SASL_PORT,MTLS://127.0.0.1:$SEC_KAFKA_MTLS_PORT,EXPIRED://127.0.0.1:$SEC_KAFKA_EXPIRED_PORT,CONTROLLER://127.0.0.1:$SEC_KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$SEC_KAFKA_PORT,SASL_SSL://localhost:$SEC_KAFKA_SASL_PORT,MTLS://localhost:$SEC_KAFKA_MTLS_PORT,EXPIRED://localhost:$SEC_KAFKA_EXPIRED_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,EXPIRED:SSL,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$SEC_KAFKA_DIR/data
auto.create.topics.enable=false
num.partitions=4
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
ssl.keystore.type=PEM
ssl.keystore.location=$SEC_TLS/server-bundle.pem
ssl.truststore.type=PEM
ssl.truststore.location=$SEC_TLS/ca.pem
ssl.endpoint.identification.algorithm=
listener.name.mtls.ssl.client.auth=required
listener.name.expired.ssl.keystore.location=$SEC_TLS/expired-bundle.pem
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SEC_KAFKA_USER="$pw";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
EOF
  )
  if [[ ! -f $SEC_KAFKA_DIR/data/meta.properties ]]; then
    local cid
    cid=$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$LOG_DIR/secure-kafka-format.log" | tail -n 1)
    log "secure kafka: formatting storage with SCRAM users ($SEC_KAFKA_USER)"
    kafka_java kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$props" \
      --add-scram "SCRAM-SHA-256=[name=$SEC_KAFKA_USER,password=$pw]" \
      --add-scram "SCRAM-SHA-512=[name=$SEC_KAFKA_USER,password=$pw]" >>"$LOG_DIR/secure-kafka-format.log" 2>&1 ||
      fail_with_log secure-kafka "$LOG_DIR/secure-kafka-format.log" "StorageTool format --add-scram failed"
  fi
  local log_offset=0
  [[ -f $SEC_KAFKA_LOG ]] && log_offset=$(stat -c %s "$SEC_KAFKA_LOG")
  log "secure kafka: starting (SASL_SSL :$SEC_KAFKA_SASL_PORT, mTLS :$SEC_KAFKA_MTLS_PORT, expired :$SEC_KAFKA_EXPIRED_PORT, PLAINTEXT :$SEC_KAFKA_PORT)"
  setsid nohup java -Xmx384m -Xms128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$props" >>"$SEC_KAFKA_LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$SEC_KAFKA_PID"
  kafka_wait_started secure-kafka "$SEC_KAFKA_SASL_PORT" "$SEC_KAFKA_LOG" "$log_offset" "$pid" "$SEC_KAFKA_PID" "$(dirname "$props")/data"
  log "secure kafka: up (pid $pid)"
}

cmd_up_secure() {
  local t0=$SECONDS f=/proc/sys/net/ipv4/ip_local_reserved_ports
  if [[ -w $f ]]; then
    echo "$(cat "$f"),$SEC_MYSQL_PORT,$SEC_REDIS_PORT,$SEC_KAFKA_PORT,$SEC_KAFKA_SASL_PORT,$SEC_KAFKA_MTLS_PORT,$SEC_KAFKA_EXPIRED_PORT,$SEC_KAFKA_CONTROLLER_PORT" >"$f" 2>/dev/null || true
  fi
  mkdirs
  ensure_packages
  secure_certs
  start_secure_redis
  start_secure_mariadb
  start_secure_kafka
  log "secure services up in $((SECONDS - t0))s — eval \"\$($0 env)\" exports CDC_SECURE_*"
}

cmd_down_secure() {
  stop_pid secure-kafka "$SEC_KAFKA_PID" kafka.Kafka
  stop_pid secure-mariadb "$SEC_MDB_PID" mariadbd
  stop_pid secure-redis "$SEC_REDIS_PID" redis-server
}

# secure_env: the CDC_SECURE_* variables of the integration tests, when the
# secured services are up (nothing otherwise: the secure tests then skip).
secure_env() {
  pid_alive "$SEC_KAFKA_PID" kafka.Kafka >/dev/null && pid_alive "$SEC_REDIS_PID" redis-server >/dev/null &&
    pid_alive "$SEC_MDB_PID" mariadbd >/dev/null || return 0
  printf 'export %s=%q\n' CDC_SECURE_DIR "$SEC_DIR" \
    CDC_SECURE_MYSQL_ADDR "127.0.0.1:$SEC_MYSQL_PORT" \
    CDC_SECURE_REDIS_ADDR "127.0.0.1:$SEC_REDIS_PORT" CDC_SECURE_REDIS_USER "$SEC_REDIS_USER" \
    CDC_SECURE_KAFKA_PLAINTEXT "127.0.0.1:$SEC_KAFKA_PORT" CDC_SECURE_KAFKA_SASL_SSL "localhost:$SEC_KAFKA_SASL_PORT" \
    CDC_SECURE_KAFKA_MTLS "localhost:$SEC_KAFKA_MTLS_PORT" CDC_SECURE_KAFKA_EXPIRED "localhost:$SEC_KAFKA_EXPIRED_PORT" \
    CDC_SECURE_KAFKA_USER "$SEC_KAFKA_USER"
}

# ---------------------------------------------------------------- Kafka cluster (3 nodes)
#
# A real 3-node KRaft cluster for the broker fault tests, beside the single
# node: each node is broker and controller (static quorum of the three),
# replication factor 3, min.insync.replicas 2, 512 MB heap. Its own
# directory, ports and cluster id; the commands take the node number 1-3.

CLUSTER_PORT="${CDC_KAFKA_CLUSTER_PORT:-39292}"  # not 39192: the secured Kafka's
CLUSTER_SESSION_MS="${CDC_KAFKA_CLUSTER_SESSION_TIMEOUT_MS:-9000}"
CLUSTER_DIR="$STACK_DIR/kafka-cluster"
CLUSTER_NODES=(1 2 3)

cluster_port() { echo $((CLUSTER_PORT + $1 - 1)); }
cluster_controller_port() { echo $((CLUSTER_PORT + 2 + $1)); }
cluster_node_dir() { echo "$CLUSTER_DIR/node$1"; }
cluster_pid_file() { echo "$CLUSTER_DIR/node$1/kafka.pid"; }
cluster_log() { echo "$LOG_DIR/kafka-node$1.log"; }

cluster_brokers() {
  local n out=()
  for n in "${CLUSTER_NODES[@]}"; do out+=("127.0.0.1:$(cluster_port "$n")"); done
  local IFS=,
  echo "${out[*]}"
}

cluster_check_node() {
  [[ $1 =~ ^[123]$ ]] || die "cluster node must be 1, 2 or 3 (got '${1:-}')"
}

cluster_reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
  [[ -w $f ]] || return 0
  cur=$(cat "$f" 2>/dev/null) || return 0
  echo "${cur:+$cur,}$CLUSTER_PORT-$((CLUSTER_PORT + 5))" >"$f" 2>/dev/null || true
}

cluster_write_config() {
  local n=$1 dir voters="" m
  dir=$(cluster_node_dir "$n")
  mkdir -p "$dir/data"
  for m in "${CLUSTER_NODES[@]}"; do voters+="${voters:+,}$m@127.0.0.1:$(cluster_controller_port "$m")"; done
  cat >"$dir/server.properties" <<EOP
# generated by scripts/dev-stack.sh — edits are overwritten on every start
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(cluster_port "$n"),CONTROLLER://127.0.0.1:$(cluster_controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(cluster_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

auto.create.topics.enable=false
num.partitions=6
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
broker.session.timeout.ms=$CLUSTER_SESSION_MS
# A broker hands out producer ids (InitProducerId) from blocks it asks the
# active controller for; with that controller paused the request waits this
# long (default 30 s) before the broker asks the new one, answering
# COORDINATOR_LOAD_IN_PROGRESS meanwhile (docs/delivery.md).
controller.socket.timeout.ms=5000
unclean.leader.election.enable=false
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
log.retention.hours=168
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
EOP
  # the node's log4j2 configuration and the tools' are the single node's
  [[ -f $KAFKA_DIR/log4j2.properties ]] || kafka_write_config
}

cluster_format() {
  local n=$1 dir cid
  dir=$(cluster_node_dir "$n")
  [[ -f $dir/data/meta.properties ]] && return 0
  if [[ -s $CLUSTER_DIR/cluster.id ]]; then
    cid=$(cat "$CLUSTER_DIR/cluster.id")
  else
    cid=$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$LOG_DIR/kafka-cluster-format.log" | tail -n 1)
    [[ $cid =~ ^[A-Za-z0-9_-]{22}$ ]] || fail_with_log kafka-cluster "$LOG_DIR/kafka-cluster-format.log" "StorageTool random-uuid gave '$cid'"
    echo "$cid" >"$CLUSTER_DIR/cluster.id"
  fi
  log "kafka node $n: formatting storage $dir/data (cluster id $cid)"
  kafka_java kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$dir/server.properties" \
    >>"$LOG_DIR/kafka-cluster-format.log" 2>&1 ||
    fail_with_log kafka-cluster "$LOG_DIR/kafka-cluster-format.log" "kafka.tools.StorageTool format of node $n failed"
}

# cluster_launch N: start node N in the background (no wait); prints the log offset to wait from.
cluster_launch() {
  local n=$1 dir pidf logf offset=0 pid
  dir=$(cluster_node_dir "$n") pidf=$(cluster_pid_file "$n") logf=$(cluster_log "$n")
  if pid=$(pid_alive "$pidf" kafka.Kafka); then
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == T ]] && die "kafka node $n is paused (SIGSTOP); run: $0 cont-broker $n"
    echo -1
    return 0
  fi
  check_port_free "kafka node $n" "$(cluster_port "$n")"
  check_port_free "kafka node $n controller" "$(cluster_controller_port "$n")"
  cluster_write_config "$n"
  cluster_format "$n"
  [[ -f $logf ]] && offset=$(stat -c %s "$logf")
  log "kafka node $n: starting on 127.0.0.1:$(cluster_port "$n") (controller :$(cluster_controller_port "$n"), log: $logf)"
  setsid nohup java -Xmx512m -Xms256m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dkafka.logs.dir="$LOG_DIR" -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" >>"$logf" 2>&1 </dev/null &
  echo $! >"$pidf"
  echo "$offset"
}

# cluster_wait_started N OFFSET: until node N logged its start after OFFSET and its port is open.
cluster_wait_started() {
  local n=$1 offset=$2 pidf logf pid
  pidf=$(cluster_pid_file "$n") logf=$(cluster_log "$n")
  pid=$(tr -dc '0-9' <"$pidf")
  [[ $offset == -1 ]] && offset=0
  kafka_wait_started "kafka node $n" "$(cluster_port "$n")" "$logf" "$offset" "$pid" "$pidf" "$(dirname "$pidf")/data"
  log "kafka node $n: up (pid $pid, 127.0.0.1:$(cluster_port "$n"))"
}

# cluster_wait_ready: a probe topic with replication factor 3 exists and is fully replicated
# (every node registered, unfenced and in sync).
cluster_wait_ready() {
  local deadline=$((SECONDS + TIMEOUT)) out
  until kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_brokers)" --create --if-not-exists \
    --topic __cdc_cluster_probe --partitions 3 --replication-factor 3 >/dev/null 2>>"$LOG_DIR/kafka-cluster-ready.log"; do
    ((SECONDS < deadline)) || fail_with_log kafka-cluster "$LOG_DIR/kafka-cluster-ready.log" "cannot create the probe topic after ${TIMEOUT}s"
    sleep 1
  done
  until out=$(kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_brokers)" --describe \
    --topic __cdc_cluster_probe --under-replicated-partitions 2>>"$LOG_DIR/kafka-cluster-ready.log") && [[ -z $out ]]; do
    ((SECONDS < deadline)) || fail_with_log kafka-cluster "$LOG_DIR/kafka-cluster-ready.log" "probe topic still under-replicated after ${TIMEOUT}s: $out"
    sleep 1
  done
}

cluster_node_state() {
  local n=$1 pid st
  if ! pid=$(pid_alive "$(cluster_pid_file "$n")" kafka.Kafka); then echo down; return; fi
  st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  case $st in
    T | t) echo "paused pid $pid" ;;
    Z) echo down ;;
    *) if port_open "$(cluster_port "$n")"; then echo "up pid $pid"; else echo "starting pid $pid"; fi ;;
  esac
}

cluster_up_all() {
  local n
  for n in "${CLUSTER_NODES[@]}"; do [[ $(cluster_node_state "$n") == up* ]] || return 1; done
}

cmd_up_cluster() {
  local t0=$SECONDS n offsets=()
  cluster_reserve_ports
  mkdirs
  mkdir -p "$CLUSTER_DIR"
  ensure_packages
  need_cmd java || die "java not found (apt-get install default-jre-headless)"
  kafka_fetch
  for n in "${CLUSTER_NODES[@]}"; do offsets+=("$(cluster_launch "$n")"); done
  # the nodes elect a controller only together: start all, then wait for each
  for n in "${CLUSTER_NODES[@]}"; do cluster_wait_started "$n" "${offsets[$((n - 1))]}"; done
  cluster_wait_ready
  log "kafka cluster: up in $((SECONDS - t0))s ($(cluster_brokers), RF 3, min.insync.replicas 2, broker.session.timeout.ms $CLUSTER_SESSION_MS)"
}

cmd_down_cluster() {
  local n pid
  for n in "${CLUSTER_NODES[@]}"; do
    # a paused node cannot take SIGTERM
    pid=$(pid_alive "$(cluster_pid_file "$n")" kafka.Kafka) && kill -CONT "$pid" 2>/dev/null || true
  done
  # the controllers need a quorum to shut down cleanly: stop them at once
  for n in "${CLUSTER_NODES[@]}"; do stop_pid "kafka node $n" "$(cluster_pid_file "$n")" kafka.Kafka & done
  wait
}

cmd_status_cluster() {
  local n all=0 st
  for n in "${CLUSTER_NODES[@]}"; do
    st=$(cluster_node_state "$n")
    echo "kafka node $n: $st  127.0.0.1:$(cluster_port "$n")"
    [[ $st == up* ]] || all=1
  done
  return $all
}

cmd_broker() {
  local op=$1 n=$2 pidf pid
  cluster_check_node "$n"
  pidf=$(cluster_pid_file "$n")
  case $op in
    kill) kill_pid "kafka node $n" "$pidf" kafka.Kafka ;;
    stop)
      pid=$(pid_alive "$pidf" kafka.Kafka) || die "kafka node $n: not running"
      kill -STOP "$pid"
      log "kafka node $n: paused (SIGSTOP pid $pid)" ;;
    cont)
      pid=$(pid_alive "$pidf" kafka.Kafka) || die "kafka node $n: not running"
      kill -CONT "$pid"
      log "kafka node $n: resumed (SIGCONT pid $pid)" ;;
    start)
      cluster_reserve_ports
      local offset
      offset=$(cluster_launch "$n")
      cluster_wait_started "$n" "$offset" ;;
  esac
}

# ---------------------------------------------------------------- Redis Sentinel and Cluster (up-redis-ha)
#
# The checkpoint store's other topologies, from the host's redis-server on
# loopback: a Sentinel set-up (one master, one replica, three Sentinels
# watching master name cdc-outbox, quorum 2, down-after 1 s) and a Redis
# Cluster of three masters (redis-cli --cluster create, no replicas). The
# node and Sentinel configurations are written once: Redis and the
# Sentinels rewrite them after a failover, so a node restarted by a second
# up-redis-ha keeps the role the failover gave it (an old master rejoins as
# a replica).

HA_DIR="$STACK_DIR/redis-ha"
HA_MASTER_PORT="${CDC_REDIS_SENTINEL_MASTER_PORT:-36390}"
HA_REPLICA_PORT="${CDC_REDIS_SENTINEL_REPLICA_PORT:-36391}"
HA_SENTINEL_PORTS="${CDC_REDIS_SENTINEL_PORTS:-36395,36396,36397}"
HA_CLUSTER_PORTS="${CDC_REDIS_CLUSTER_PORTS:-36401,36402,36403}"
HA_MASTER_NAME=cdc-outbox

# ha_node DIR PORT [EXTRA-CONFIG]: start a redis-server (or Sentinel with
# EXTRA-CONFIG "sentinel") in DIR unless it runs; writes DIR/redis.conf once.
ha_node() {
  local dir=$1 port=$2 extra=${3:-} conf mode=()
  conf="$dir/redis.conf"
  mkdir -p "$dir"
  if pid_alive "$dir/redis.pid" redis >/dev/null; then
    return 0
  fi
  check_port_free "redis-ha :$port" "$port"
  if [[ ! -s $conf ]]; then
    {
      echo "# generated by scripts/dev-stack.sh up-redis-ha (rewritten by Redis after a failover)"
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "daemonize yes"
      echo "pidfile $dir/redis.pid"
      echo "logfile $dir/redis.log"
      echo "dir $dir"
      printf '%b\n' "$extra"
    } >"$conf"
  fi
  [[ $extra == *"sentinel monitor"* ]] && mode=(--sentinel)
  rm -f "$dir/redis.pid"
  setsid redis-server "$conf" "${mode[@]}" >>"$dir/redis.log" 2>&1 </dev/null ||
    fail_with_log "redis-ha :$port" "$dir/redis.log" "redis-server failed to start"
  local deadline=$((SECONDS + TIMEOUT))
  until [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; do
    ((SECONDS < deadline)) || fail_with_log "redis-ha :$port" "$dir/redis.log" "did not answer PING within ${TIMEOUT}s"
    sleep 0.1
  done
}

# reserve_ha_ports: as reserve_ports, for the Sentinel set-up's ports and the
# Cluster's client and bus ports (client port + 10000).
reserve_ha_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur p list="$HA_MASTER_PORT,$HA_REPLICA_PORT,$HA_SENTINEL_PORTS"
  [[ -w $f ]] || return 0
  cur=$(cat "$f" 2>/dev/null) || return 0
  for p in ${HA_CLUSTER_PORTS//,/ }; do list="$list,$p,$((p + 10000))"; done
  echo "${cur:+$cur,}$list" >"$f" 2>/dev/null || true
}

cmd_up_redis_ha() {
  local t0=$SECONDS p ports=() addrs=()
  reserve_ha_ports
  mkdirs
  ensure_packages
  local persist="appendonly yes\nappendfsync everysec"
  ha_node "$HA_DIR/sentinel/node-$HA_MASTER_PORT" "$HA_MASTER_PORT" "$persist"
  ha_node "$HA_DIR/sentinel/node-$HA_REPLICA_PORT" "$HA_REPLICA_PORT" "$persist\nreplicaof 127.0.0.1 $HA_MASTER_PORT"
  IFS=, read -r -a ports <<<"$HA_SENTINEL_PORTS"
  for p in "${ports[@]}"; do
    ha_node "$HA_DIR/sentinel/sentinel-$p" "$p" "sentinel monitor $HA_MASTER_NAME 127.0.0.1 $HA_MASTER_PORT 2
sentinel down-after-milliseconds $HA_MASTER_NAME 1000
sentinel failover-timeout $HA_MASTER_NAME 5000
sentinel parallel-syncs $HA_MASTER_NAME 1"
  done
  local deadline=$((SECONDS + TIMEOUT))
  until [[ $(redis-cli -h 127.0.0.1 -p "${ports[0]}" sentinel master "$HA_MASTER_NAME" 2>/dev/null | awk 'prev=="num-other-sentinels"{print; exit} {prev=$0}') == "$((${#ports[@]} - 1))" &&
    $(redis-cli -h 127.0.0.1 -p "${ports[0]}" sentinel replicas "$HA_MASTER_NAME" 2>/dev/null | grep -c '^flags$') -ge 1 ]]; do
    ((SECONDS < deadline)) || die "redis-ha: the Sentinels did not find each other and the replica within ${TIMEOUT}s (logs: $HA_DIR/sentinel/*/redis.log)"
    sleep 0.2
  done
  log "redis sentinel: master name $HA_MASTER_NAME on 127.0.0.1:$(redis-cli -h 127.0.0.1 -p "${ports[0]}" sentinel get-master-addr-by-name "$HA_MASTER_NAME" | tail -n 1), Sentinels on $HA_SENTINEL_PORTS"

  IFS=, read -r -a ports <<<"$HA_CLUSTER_PORTS"
  for p in "${ports[@]}"; do
    ha_node "$HA_DIR/cluster/node-$p" "$p" "$persist\ncluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 2000"
    addrs+=("127.0.0.1:$p")
  done
  if ! redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | grep -q '^cluster_state:ok'; then
    if [[ $(redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | tr -d '\r' | awk -F: '$1=="cluster_known_nodes"{print $2}') == 1 ]]; then
      log "redis cluster: creating (${addrs[*]})"
      redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >>"$HA_DIR/cluster/create.log" 2>&1 ||
        fail_with_log redis-cluster "$HA_DIR/cluster/create.log" "redis-cli --cluster create failed"
    fi
  fi
  deadline=$((SECONDS + TIMEOUT))
  for p in "${ports[@]}"; do
    until redis-cli -h 127.0.0.1 -p "$p" cluster info | grep -q '^cluster_state:ok'; do
      ((SECONDS < deadline)) || die "redis-ha: cluster node :$p not cluster_state:ok within ${TIMEOUT}s"
      sleep 0.2
    done
  done
  log "redis cluster: 3 masters on $HA_CLUSTER_PORTS, cluster_state:ok"
  log "redis-ha up in $((SECONDS - t0))s — eval \"\$($0 env)\" exports CDC_REDIS_SENTINEL_* and CDC_REDIS_CLUSTER_ADDRS"
}

cmd_down_redis_ha() {
  local d
  for d in "$HA_DIR"/sentinel/sentinel-* "$HA_DIR"/sentinel/node-* "$HA_DIR"/cluster/node-*; do
    [[ -d $d ]] && stop_pid "redis-ha ${d#"$HA_DIR"/}" "$d/redis.pid" redis
  done
  return 0
}

# redis_ha_env: the CDC_REDIS_SENTINEL_* and CDC_REDIS_CLUSTER_ADDRS
# variables, when the first Sentinel and cluster node run.
redis_ha_env() {
  local s c
  s=${HA_SENTINEL_PORTS%%,*} c=${HA_CLUSTER_PORTS%%,*}
  pid_alive "$HA_DIR/sentinel/sentinel-$s/redis.pid" redis >/dev/null &&
    pid_alive "$HA_DIR/cluster/node-$c/redis.pid" redis >/dev/null || return 0
  printf 'export %s=%q\n' CDC_REDIS_HA_DIR "$HA_DIR" CDC_REDIS_SENTINEL_MASTER "$HA_MASTER_NAME" \
    CDC_REDIS_SENTINEL_ADDRS "127.0.0.1:${HA_SENTINEL_PORTS//,/,127.0.0.1:}" \
    CDC_REDIS_SENTINEL_NODES "127.0.0.1:$HA_MASTER_PORT,127.0.0.1:$HA_REPLICA_PORT" \
    CDC_REDIS_CLUSTER_ADDRS "127.0.0.1:${HA_CLUSTER_PORTS//,/,127.0.0.1:}"
}

# ---------------------------------------------------------------- OpenTelemetry Collector (up-otel)
#
# The upstream OpenTelemetry Collector with the OTLP receiver (gRPC and
# HTTP, on loopback) and the contrib file exporter, for the OTLP export
# tests (make test-otel): what it receives is written as OTLP JSON lines to
# $OTEL_DIR/metrics.jsonl (and traces.jsonl). It is built from the
# project's test/otelcol (a module of its own) with the Go module proxy,
# once per content of that directory: the binary is cached in
# $CACHE_DIR/otelcol/<hash of go.mod, go.sum, main.go>/.

OTEL_DIR="$STACK_DIR/otel"
OTEL_GRPC_PORT="${CDC_OTEL_GRPC_PORT:-34317}"
OTEL_HTTP_PORT="${CDC_OTEL_HTTP_PORT:-34318}"
OTEL_PID="$OTEL_DIR/otelcol.pid"
OTEL_LOG="$LOG_DIR/otelcol.log"
OTEL_SRC="$(cd "$(dirname "$0")/.." && pwd)/test/otelcol"

# otel_binary: the cached collector binary's path (built if missing).
otel_binary() {
  local hash bin t0=$SECONDS
  hash=$(cat "$OTEL_SRC/go.mod" "$OTEL_SRC/go.sum" "$OTEL_SRC/main.go" | sha256sum | cut -c1-16)
  bin="$CACHE_DIR/otelcol/$hash/otelcol"
  if [[ ! -x $bin ]]; then
    need_cmd "${GO:-go}" || die "otelcol: the go command is needed to build the collector (test/otelcol)"
    log "otelcol: building the collector from test/otelcol (the Go module proxy; a first build takes minutes)"
    mkdir -p "$(dirname "$bin")"
    (cd "$OTEL_SRC" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" "${GO:-go}" build -trimpath -ldflags '-s -w' -o "$bin.tmp" .) >&2 ||
      die "otelcol: go build in test/otelcol failed"
    mv "$bin.tmp" "$bin"
    log "otelcol: built in $((SECONDS - t0))s ($bin)"
  fi
  echo "$bin"
}

otel_write_config() {
  mkdir -p "$OTEL_DIR"
  cat >"$OTEL_DIR/config.yaml" <<CONF
# generated by scripts/dev-stack.sh up-otel
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$OTEL_GRPC_PORT
      http:
        endpoint: 127.0.0.1:$OTEL_HTTP_PORT
exporters:
  file/metrics:
    path: $OTEL_DIR/metrics.jsonl
    flush_interval: 100ms
  file/traces:
    path: $OTEL_DIR/traces.jsonl
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
    traces:
      receivers: [otlp]
      exporters: [file/traces]
CONF
}

otel_running() { pid_alive "$OTEL_PID" otelcol >/dev/null && port_open "$OTEL_GRPC_PORT" && port_open "$OTEL_HTTP_PORT"; }

cmd_up_otel() {
  local t0=$SECONDS bin f=/proc/sys/net/ipv4/ip_local_reserved_ports
  if [[ -w $f ]]; then
    echo "$(cat "$f"),$OTEL_GRPC_PORT,$OTEL_HTTP_PORT" >"$f" 2>/dev/null || true
  fi
  mkdirs
  if otel_running; then
    log "otelcol: already running (pid $(pid_alive "$OTEL_PID" otelcol))"
    return 0
  fi
  bin=$(otel_binary)
  check_port_free otelcol "$OTEL_GRPC_PORT"
  check_port_free otelcol "$OTEL_HTTP_PORT"
  otel_write_config
  setsid "$bin" --config "file:$OTEL_DIR/config.yaml" >>"$OTEL_LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$OTEL_PID"
  local deadline=$((SECONDS + TIMEOUT))
  until port_open "$OTEL_GRPC_PORT" && port_open "$OTEL_HTTP_PORT"; do
    # Exited: no process, or a zombie. Between the fork and the exec the
    # child's command line is still this script's, so pid_alive's name
    # check alone would call a collector not yet exec'd dead (seen in a
    # clean-clone .ci/run: "exited at start" with nothing in its log).
    if [[ ! -e /proc/$pid ]] || [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]]; then
      fail_with_log otelcol "$OTEL_LOG" "exited at start"
    fi
    ((SECONDS < deadline)) || fail_with_log otelcol "$OTEL_LOG" "did not listen on :$OTEL_GRPC_PORT and :$OTEL_HTTP_PORT within ${TIMEOUT}s"
    sleep 0.1
  done
  log "otelcol up in $((SECONDS - t0))s: OTLP gRPC 127.0.0.1:$OTEL_GRPC_PORT, HTTP 127.0.0.1:$OTEL_HTTP_PORT, files in $OTEL_DIR — eval \"\$($0 env)\" exports CDC_OTEL_*"
}

cmd_down_otel() { stop_pid otelcol "$OTEL_PID" otelcol; }

# otel_env: the CDC_OTEL_* variables of the OTLP tests, when the collector
# runs (nothing otherwise: the tests then skip, unless CDC_REQUIRE_OTEL).
otel_env() {
  otel_running || return 0
  printf 'export %s=%q\n' CDC_OTEL_DIR "$OTEL_DIR" CDC_OTEL_GRPC_ADDR "127.0.0.1:$OTEL_GRPC_PORT" \
    CDC_OTEL_HTTP_ADDR "127.0.0.1:$OTEL_HTTP_PORT"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local t0=$SECONDS
  reserve_ports
  mkdirs
  ensure_packages
  start_redis
  start_db
  start_kafka
  log "all up ($DB_LABEL) in $((SECONDS - t0))s — eval \"\$($0 env)\""
}

# cmd_down stops every flavour's server, not just the selected one's.
cmd_down() {
  local f sel=$FLAVOR
  stop_kafka
  for f in "${FLAVORS[@]}"; do
    flavor_setup "$f"
    if [[ $f == "$sel" ]] || db_alive >/dev/null; then stop_db; fi
  done
  flavor_setup "$sel"
  stop_redis
}

cmd_status() {
  local all=0 pid f sel=$FLAVOR
  for f in "${FLAVORS[@]}"; do
    flavor_setup "$f"
    if pid=$(db_alive) && db_ping; then
      printf '%-10s up   pid %s  127.0.0.1:%s  db=%s  (%s)%s\n' "$f:" "$pid" "$DB_PORT" "$MYSQL_DB" "$DB_LABEL" \
        "$([[ $f == "$sel" ]] && echo '  <- CDC_FLAVOR')"
    elif [[ $f == "$sel" ]]; then
      printf '%-10s down  (%s)  <- CDC_FLAVOR\n' "$f:" "$DB_LABEL"; all=1
    fi
  done
  flavor_setup "$sel"
  if pid=$(pid_alive "$REDIS_PID" redis-server) && redis_ping; then
    echo "redis:   up   pid $pid  127.0.0.1:$REDIS_PORT"
  else
    echo "redis:   down"; all=1
  fi
  if pid=$(pid_alive "$KAFKA_PID" kafka.Kafka) && port_open "$KAFKA_PORT"; then
    echo "kafka:   up   pid $pid  127.0.0.1:$KAFKA_PORT  (version $KAFKA_VERSION)"
  else
    echo "kafka:   down"; all=1
  fi
  echo "stack dir: $STACK_DIR"
  return $all
}

# cmd_env: the selected flavour's addresses; CDC_FLAVOR tells the tests which
# server they face, CDC_MYSQL_BINLOG_DIR where its binlog files are on this host.
cmd_env() {
  local k v
  # the ports too: a test's stack command (restart-redis, ...) then acts on
  # this stack, not on the defaults
  for k in CDC_FLAVOR CDC_MYSQL_ADDR CDC_MYSQL_USER CDC_MYSQL_PASSWORD CDC_MYSQL_DB CDC_MYSQL_BINLOG_DIR CDC_REDIS_ADDR CDC_KAFKA_BROKERS CDC_STACK_DIR \
    CDC_MYSQL_PORT CDC_MYSQL9_PORT CDC_MARIADB11_PORT CDC_REDIS_PORT CDC_KAFKA_PORT CDC_KAFKA_CONTROLLER_PORT CDC_KAFKA_CLUSTER_PORT; do
    case $k in
      CDC_MYSQL_PORT) v=$MYSQL_PORT ;;
      CDC_MYSQL9_PORT) v=$MYSQL9_PORT ;;
      CDC_MARIADB11_PORT) v=$MARIADB11_PORT ;;
      CDC_REDIS_PORT) v=$REDIS_PORT ;;
      CDC_KAFKA_PORT) v=$KAFKA_PORT ;;
      CDC_KAFKA_CONTROLLER_PORT) v=$KAFKA_CONTROLLER_PORT ;;
      CDC_KAFKA_CLUSTER_PORT) v=$CLUSTER_PORT ;;
      CDC_FLAVOR) v=$FLAVOR ;;
      CDC_MYSQL_ADDR) v="127.0.0.1:$DB_PORT" ;;
      CDC_MYSQL_USER) v=root ;;
      CDC_MYSQL_PASSWORD) v=$MYSQL_ROOT_PASSWORD ;;
      CDC_MYSQL_DB) v=$MYSQL_DB ;;
      CDC_MYSQL_BINLOG_DIR) v=$DB_BINLOG_DIR ;;
      CDC_REDIS_ADDR) v="127.0.0.1:$REDIS_PORT" ;;
      CDC_KAFKA_BROKERS) v="127.0.0.1:$KAFKA_PORT" ;;
      CDC_STACK_DIR) v=$STACK_DIR ;;
    esac
    printf 'export %s=%q\n' "$k" "$v"
  done
  secure_env
  redis_ha_env
  cluster_env
  otel_env
}

# cluster_env: the cluster's variables, when all its nodes are up.
cluster_env() {
  cluster_up_all 2>/dev/null || return 0
  printf 'export %s=%q\n' CDC_KAFKA_CLUSTER_BROKERS "$(cluster_brokers)" \
    CDC_KAFKA_CLUSTER_SESSION_TIMEOUT_MS "$CLUSTER_SESSION_MS"
}

# kafka_cli CLASS ARGS...: add --bootstrap-server unless given
kafka_cli() {
  local cls=$1; shift
  local a
  for a in "$@"; do
    [[ $a == --bootstrap-server* ]] && { kafka_java "$cls" "$@"; return; }
  done
  kafka_java "$cls" --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case $cmd in
    *-mariadb) flavor_setup mariadb; cmd=${cmd%-mariadb}-db ;;
    *) flavor_setup "$FLAVOR" ;;
  esac
  case $cmd in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    up-secure) reserve_ports; cmd_up_secure ;;
    down-secure) cmd_down_secure ;;
    up-redis-ha) cmd_up_redis_ha ;;
    down-redis-ha) cmd_down_redis_ha ;;
    up-otel) cmd_up_otel ;;
    down-otel) cmd_down_otel ;;
    env) cmd_env ;;
    start-db) reserve_ports; mkdirs; ensure_packages; start_db ;;
    start-redis) reserve_ports; mkdirs; ensure_packages; start_redis ;;
    start-kafka) reserve_ports; mkdirs; ensure_packages; start_kafka ;;
    stop-db) stop_db ;;
    stop-redis) stop_redis ;;
    stop-kafka) stop_kafka ;;
    restart-db) stop_db; start_db ;;
    restart-redis) stop_redis; start_redis ;;
    restart-kafka) stop_kafka; start_kafka ;;
    kill-db) kill_db ;;
    kill-redis) kill_pid redis "$REDIS_PID" redis-server ;;
    kill-kafka) kill_pid kafka "$KAFKA_PID" kafka.Kafka ;;
    kafka-tool) [[ $# -ge 1 ]] || die "usage: $0 kafka-tool MAIN_CLASS [ARGS...]"; kafka_java "$@" ;;
    kafka-topics) kafka_cli org.apache.kafka.tools.TopicCommand "$@" ;;
    kafka-console-producer) kafka_cli org.apache.kafka.tools.ConsoleProducer "$@" ;;
    kafka-console-consumer) kafka_cli org.apache.kafka.tools.consumer.ConsoleConsumer "$@" ;;
    mysql | mariadb)
      if [[ -n $DB_ROOT ]]; then exec chroot "$DB_ROOT" "$DB_CLIENT" --defaults-file="$DB_SRV_DIR/client.cnf" "$@"; fi
      exec "$DB_CLIENT" --defaults-file="$DB_CLIENT_CNF" "$@" ;;
    redis-cli) exec redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@" ;;
    up-cluster) cmd_up_cluster ;;
    down-cluster) cmd_down_cluster ;;
    status-cluster) cmd_status_cluster ;;
    kill-broker | stop-broker | cont-broker | start-broker) cmd_broker "${cmd%-broker}" "${1:-}" ;;
    cluster-topics) kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_brokers)" "$@" ;;
    wipe) cmd_down_otel; cmd_down_redis_ha; cmd_down_secure; cmd_down_cluster; cmd_down; log "deleting $STACK_DIR"; rm -rf "$STACK_DIR" ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
