#!/usr/bin/env bash
# User-space work per keep-alive request (issue 21, item 4): the bench's "keep-alive tiny" setup
# (`cargo xtask bench`'s config text for the `http` frontend, the same nginx backend answering
# `/` with `ok`), driven by h2load with a fixed number of requests, measured two ways:
#
#   MODE=callgrind  instructions per request, user space only, exact and repeatable: the proxy
#                   runs under `valgrind --tool=callgrind` with instrumentation off, is warmed
#                   up, then counts only the measured requests (every thread of the process).
#                   This machine's virtual CPU has no PMU, so `perf stat -e instructions:u,k`
#                   reports "not supported"; callgrind is the instruction counter that works.
#   MODE=cpu        user and kernel CPU µs and minor page faults per request from /proc/PID/stat,
#                   natively (noisy on a shared machine: repeat it; only the ratios between
#                   targets mean much).
#   MODE=perf       `perf record -g` (cpu-clock sampling: no PMU) of the measured requests, then
#                   `perf report --no-children` into $OUT/perf.txt (PERF_EVENT=cpu-clock:u: user
#                   space only; a build with `-C force-frame-pointers=yes` gives whole stacks).
#   MODE=segs       TCP segments sent per request on the whole machine (`nstat` TcpOutSegs:
#                   client, proxy and backend together) and the proxy's syscalls per request
#                   (`strace -c -f` over a second, shorter run; its table in $OUT/strace.txt).
#
#   TARGET=portcullis|haproxy|nginx  BIN=path (default: target/release/portcullis, haproxy,
#   nginx; nginx is the bench's `nginx_proxy`, plain HTTP/1 only)
#   IO=epoll|uring (portcullis only; callgrind needs epoll)  N=requests  C=connections
#   LOG=1 adds `option httplog` and a UDP `log` target (a socat sink): the log line's cost.
#   H2=1 makes the frontend `bind … proto h2` and drives it with h2c (prior knowledge), ten
#   streams in flight per connection: the HTTP/2 frontend's cost (issue 15's h2 row, plain).
#   CLOSE=1 is the bench's "one request per connection" row instead: wrk -t1 -c50 sending
#   `Connection: close` for D seconds (default 5; N is then what it did), each request on a
#   new connection (MODE=cpu or perf).
#   TLS=1 with H2=1 is the bench's h2 row itself: `bind … ssl crt <bundle> alpn h2,http/1.1` (a
#   self-signed P-256 bundle made with openssl in $OUT) and h2load over TLS (ALPN h2). Each run
#   of h2load opens its C connections anew: the measured requests include C full handshakes
#   (TLS 1.3, P-256 ECDSA), which callgrind's inclusive cost of the handshake shows apart.
#
# Example: TARGET=portcullis MODE=callgrind N=20000 xtask/scripts/ka-instr.sh
set -euo pipefail

TARGET=${TARGET:-portcullis}
MODE=${MODE:-callgrind}
IO=${IO:-epoll}
LOG=${LOG:-0}
H2=${H2:-0}
TLS=${TLS:-0}
C=${C:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$MODE" = callgrind ]; then N=${N:-20000}; else N=${N:-200000}; fi
WARM=${WARM:-$((N / 10))}
case $TARGET in
portcullis) BIN=${BIN:-$ROOT/target/release/portcullis} ;;
haproxy) BIN=${BIN:-$(command -v haproxy)} ;;
nginx) BIN=${BIN:-$(command -v nginx)} ;;
*) echo "TARGET is portcullis, haproxy or nginx" >&2; exit 2 ;;
esac
OUT=${OUT:-$(mktemp -d /tmp/ka-instr.XXXXXX)}
mkdir -p "$OUT"

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
        ss -Htan "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
}
BPORT=$(free_port)
PPORT=$(free_port)
LPORT=$(free_port)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

wait_port() {
    for _ in $(seq 1 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on $1" >&2
    exit 1
}

# The start of an nginx config as the bench writes it (conf::nginx_main, nginx_http_common):
# one worker, no access log, long keep-alive, temp paths under $OUT; the http block stays open.
nginx_head() {
    cat <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $OUT/$1.pid;
error_log $OUT/$1-error.log warn;
events { worker_connections $2; }
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    client_body_temp_path $OUT/$1-tmp-body;
    proxy_temp_path $OUT/$1-tmp-proxy;
    fastcgi_temp_path $OUT/$1-tmp-fastcgi;
    uwsgi_temp_path $OUT/$1-tmp-uwsgi;
    scgi_temp_path $OUT/$1-tmp-scgi;
EOF
}

# The backend, as the bench's (conf::nginx_backend, plain HTTP part), on the load core.
{
    nginx_head backend 1024
    cat <<EOF
    server {
        listen 127.0.0.1:$BPORT;
        location = / { return 200 "ok"; }
    }
}
EOF
} >"$OUT/backend.conf"
taskset -c 0 nginx -p "$OUT" -e "$OUT/backend-error.log" -c "$OUT/backend.conf" &
pids+=($!)

# The proxy's config: the bench's (conf::haproxy), its `http` frontend and `app` backend.
bind_opts=""
[ "$TLS" = 1 ] && [ "$H2" != 1 ] && { echo "TLS=1 needs H2=1" >&2; exit 2; }
if [ "$TLS" = 1 ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
        -subj /CN=bench.local -keyout "$OUT/key.pem" -out "$OUT/cert.pem" 2>/dev/null
    cat "$OUT/cert.pem" "$OUT/key.pem" >"$OUT/bundle.pem"
    bind_opts=" ssl crt $OUT/bundle.pem alpn h2,http/1.1"
elif [ "$H2" = 1 ]; then
    bind_opts=" proto h2"
fi
log_lines=""
if [ "$LOG" = 1 ]; then
    log_lines="    log 127.0.0.1:$LPORT local0
    option httplog
"
    socat -u "UDP-RECV:$LPORT,bind=127.0.0.1" /dev/null &
    pids+=($!)
fi
cat >"$OUT/proxy.cfg" <<EOF
global
    nbthread 1
    maxconn 1000

defaults
    mode http
    maxconn 1000
${log_lines}    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s

frontend http
    bind 127.0.0.1:$PPORT$bind_opts
    default_backend app

backend app
    http-reuse always
    server app1 127.0.0.1:$BPORT
EOF

args=(-f "$OUT/proxy.cfg" -db)
[ "$TARGET" = portcullis ] && args+=(--io "$IO")
if [ "$TARGET" = nginx ]; then
    { [ "$H2" = 1 ] || [ "$LOG" = 1 ]; } && { echo "nginx: plain HTTP/1 only" >&2; exit 2; }
    # The bench's nginx proxy (conf::nginx_proxy), its plain HTTP listener.
    {
        nginx_head proxy 1000
        cat <<EOF
    upstream app { server 127.0.0.1:$BPORT; keepalive 256; }
    server {
        listen 127.0.0.1:$PPORT;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
    } >"$OUT/proxy.conf"
    args=(-p "$OUT" -e "$OUT/proxy-error.log" -c "$OUT/proxy.conf")
fi
if [ "$MODE" = callgrind ]; then
    taskset -c 1 valgrind --tool=callgrind --instr-atstart=no ${VG_ARGS:-} \
        --callgrind-out-file="$OUT/cg.out" "$BIN" "${args[@]}" 2>"$OUT/valgrind.log" &
else
    taskset -c 1 "$BIN" "${args[@]}" >"$OUT/proxy.log" 2>&1 &
fi
PID=$!
pids+=("$PID")
wait_port "$BPORT"
wait_port "$PPORT"

load() {
    if [ "${CLOSE:-0}" = 1 ]; then
        taskset -c 0 wrk -t1 -c50 -d"${D:-5}s" -H "Connection: close" \
            "http://127.0.0.1:$PPORT/" >"$OUT/wrk-$2.txt"
        N=$(awk '/requests in/ {print $1; exit}' "$OUT/wrk-$2.txt")
        grep -q "Non-2xx\|Socket errors" "$OUT/wrk-$2.txt" && { cat "$OUT/wrk-$2.txt" >&2; exit 1; }
        return 0
    fi
    local proto=(--h1 -m 1)
    [ "$H2" = 1 ] && proto=(-m 10)
    local scheme=http
    [ "$TLS" = 1 ] && scheme=https
    taskset -c 0 h2load "${proto[@]}" -n "$1" -c "$C" "$scheme://127.0.0.1:$PPORT/" >"$OUT/h2load-$2.txt"
    if [ "$TLS" = 1 ] && ! grep -q "Application protocol: h2" "$OUT/h2load-$2.txt"; then
        cat "$OUT/h2load-$2.txt" >&2; exit 1
    fi
    grep -q "$1 succeeded, 0 failed, 0 errored" "$OUT/h2load-$2.txt" || { cat "$OUT/h2load-$2.txt" >&2; exit 1; }
    grep -q "status codes: $1 2xx" "$OUT/h2load-$2.txt" || { cat "$OUT/h2load-$2.txt" >&2; exit 1; }
}
# User and kernel clock ticks, and minor page faults (`MODE=cpu` prints them per request).
ticks() { awk '{print $14, $15, $10}' "/proc/$PID/stat"; }

load "$WARM" warm
label="$TARGET${IO:+ ($IO)}"
[ "$TARGET" != portcullis ] && label=$TARGET
[ "$LOG" = 1 ] && label="$label, httplog"
[ "${CLOSE:-0}" = 1 ] && label="$label, one request per connection"
if [ "$TLS" = 1 ]; then label="$label, h2 over TLS"; elif [ "$H2" = 1 ]; then label="$label, h2c"; fi
case $MODE in
callgrind)
    callgrind_control -i on "$PID" >/dev/null 2>&1
    load "$N" run
    callgrind_control -d "$PID" >/dev/null 2>&1
    callgrind_control -i off "$PID" >/dev/null 2>&1
    dump=$(ls -t "$OUT"/cg.out* | head -1)
    total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
    echo "$label: $((total / N)) instructions:u per request ($total over $N; $dump)"
    ;;
cpu)
    read -r u0 s0 f0 < <(ticks)
    load "$N" run
    read -r u1 s1 f1 < <(ticks)
    hz=$(getconf CLK_TCK)
    awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v f=$((f1 - f0)) -v hz="$hz" -v n="$N" -v l="$label" \
        'BEGIN { printf "%s: user %.2f µs, kernel %.2f µs, %.3f page faults per request\n", l, u * 1e6 / hz / n, s * 1e6 / hz / n, f / n }'
    ;;
perf)
    perf record -g ${PERF_EVENT:+-e "$PERF_EVENT"} -o "$OUT/perf.data" -p "$PID" 2>"$OUT/perf-record.log" &
    ppid=$!
    sleep 1
    load "$N" run
    kill -INT "$ppid"
    wait "$ppid" || true
    perf report -i "$OUT/perf.data" --no-children --percent-limit 0.5 --stdio >"$OUT/perf.txt" 2>/dev/null
    echo "$label: profile in $OUT/perf.txt"
    ;;
segs)
    s0=$(nstat -az TcpOutSegs | awk '/TcpOutSegs/ {print $2}')
    load "$N" run
    s1=$(nstat -az TcpOutSegs | awk '/TcpOutSegs/ {print $2}')
    n_run=$N
    strace -c -f -p "$PID" -o "$OUT/strace.txt" &
    spid=$!
    sleep 1
    D=${SD:-2} load "$((N / 10))" strace
    kill -INT "$spid"
    wait "$spid" || true
    calls=$(awk '$NF == "total" {print $4; exit}' "$OUT/strace.txt")
    awk -v s=$((s1 - s0)) -v n="$n_run" -v l="$label" -v c="$calls" -v m="$N" \
        'BEGIN { printf "%s: %.2f segments per request (machine-wide), %.2f proxy syscalls per request under strace\n", l, s / n, c / m }'
    ;;
*) echo "MODE is callgrind, cpu, perf or segs" >&2; exit 2 ;;
esac
