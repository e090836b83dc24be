#!/usr/bin/env bash
# The bench's memory row by hand, for comparing builds quickly: RSS growth per connection of a
# fresh proxy holding 9700 idle keep-alive connections (one request each), and how many server
# connections it keeps meanwhile. Uses the configs, backend and load client a `cargo xtask bench`
# run left in target/bench/work (run one first, e.g. `cargo xtask bench --only memory --reps 1`).
#
#   xtask/scripts/idle-mem.sh BINARY [uring|epoll]   # a portcullis build
#   xtask/scripts/idle-mem.sh haproxy                 # HAProxy 2.6 on the same setup
#
# Like the bench, portcullis runs with MIMALLOC_PURGE_DELAY=0 (see docs/bench/README.md, "Idle
# memory, measured honestly"). Refuses to run while another process listens on the proxy's port:
# a proxy left from an earlier run shares it (SO_REUSEPORT) and takes connections, and the figure
# would be a fraction of the truth.
set -euo pipefail
W=$(cd "$(dirname "$0")/../.." && pwd)/target/bench/work
BIN=${1:?usage: idle-mem.sh BINARY [uring|epoll] | haproxy}
IO=${2:-uring}
CONNS=${CONNS:-9700}
[ -f "$W/backend.conf" ] || { echo "no $W/backend.conf: run cargo xtask bench first" >&2; exit 2; }
if [ "$BIN" = haproxy ]; then
    CFG=$W/haproxy.cfg
    CMD=(haproxy -f "$CFG" -db)
else
    CFG=$W/portcullis-uring.cfg
    CMD=(env MIMALLOC_PURGE_DELAY=0 "$BIN" -f "$CFG" -db --io "$IO")
fi
PORT=$(grep -m1 -oE 'bind 127\.0\.0\.1:[0-9]+$' "$CFG" | grep -oE '[0-9]+$')
BACKEND=$(sed -nE 's/.*listen 127\.0\.0\.1:([0-9]+);.*/\1/p' "$W/backend.conf" | head -n 1)
for p in "$PORT" "$BACKEND"; do
    if ss -ltnH "( sport = :$p )" | grep -q .; then
        echo "port $p is taken (a proxy or backend left running?): $(ss -ltnpH "( sport = :$p )")" >&2
        exit 2
    fi
done
ulimit -n 20000
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
nginx -c "$W/backend.conf" -p "$W" -e "$W/backend-error.log" >/dev/null 2>&1 &
pids+=($!)
taskset -c 1 "${CMD[@]}" >"$W/idle-mem-proxy.log" 2>&1 &
P=$!
pids+=($P)
for _ in $(seq 100); do
    ss -ltnH "( sport = :$PORT )" | grep -q . && break
    sleep 0.1
done
sleep 0.5
rss() { awk '/VmRSS/{print $2}' "/proc/$P/status"; }
# One request first, as the bench's readiness check makes: what a worker sets up at its first
# connection (≈ 3 MiB) is not the connections' (without it this read 0.3 KiB more than the bench).
curl -s -o /dev/null "http://127.0.0.1:$PORT/" || true
sleep 0.3
before=$(rss)
coproc LOAD { taskset -c 0 "$W/xtask-load" bench-load idle --addr "127.0.0.1:$PORT" --conns "$CONNS"; }
pids+=($LOAD_PID)
read -r line <&"${LOAD[0]}"
sleep 0.3
after=$(rss)
servers=$(ss -tnH state established "( dport = :$BACKEND )" | wc -l)
echo "$line"
awk -v a="$after" -v b="$before" -v n="$CONNS" -v s="$servers" \
    'BEGIN { printf "%.2f KiB/connection (RSS %d → %d KiB), %d server connections held\n", (a - b) / n, b, a, s }'
