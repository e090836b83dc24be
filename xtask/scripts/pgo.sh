#!/usr/bin/env bash
# A profile-guided release build (issue 21): target/pgo/portcullis.
#
#   1. the release build instrumented (`-Cprofile-generate`, target/pgo/gen);
#   2. trained on the bench's HTTP workloads through `ka-instr.sh` (nginx backend on loopback,
#      h2load/wrk clients): keep-alive and one request per connection on io_uring, keep-alive on
#      epoll, HTTP/2 over TLS (handshakes included) and h2c — each a few seconds;
#   3. the profiles merged with the `llvm-profdata` of rustc's own LLVM major version;
#   4. the release build again with `-Cprofile-use` (target/pgo/use), copied to
#      target/pgo/portcullis.
#
# The profile mostly buys code layout: on the one-request-per-connection setup callgrind counts
# 28.5 k instructions and 1.3 k simulated I1 misses per request against 34.4 k and 2.0 k for the
# plain release build (docs/bench/2026-12-06-ka-instructions.md, session 25). Measure it beside
# the plain build with `cargo xtask bench --baseline target/pgo/portcullis:pgo`; package it with
# `cargo xtask deb --binary target/pgo/portcullis`.
#
# Needs what the bench needs (nginx, h2load, wrk: `cargo xtask setup`) and llvm-profdata-<major>
# (LLVM from apt, as bpf-linker). Takes two release builds plus about a minute of training.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/target/pgo
major=$(rustc -vV | awk '/^LLVM version:/ {split($3, v, "."); print v[1]}')
PROFDATA=""
for c in "llvm-profdata-$major" llvm-profdata; do
    if command -v "$c" >/dev/null && "$c" --version 2>/dev/null | grep -q "LLVM version $major\."; then
        PROFDATA=$c
        break
    fi
done
if [ -z "$PROFDATA" ]; then
    echo "pgo: no llvm-profdata of LLVM $major (rustc's); apt-get install llvm-$major" >&2
    exit 1
fi
for tool in nginx h2load wrk; do
    command -v "$tool" >/dev/null || { echo "pgo: $tool missing (cargo xtask setup)" >&2; exit 1; }
done

rm -rf "$OUT/raw"
mkdir -p "$OUT"
echo "pgo: instrumented build ($OUT/gen)"
# RUSTFLAGS reach build scripts too (their profiles are merged and ignored); the eBPF programs'
# nested build sets its own flags (CARGO_ENCODED_RUSTFLAGS, aya-build).
(cd "$ROOT" && RUSTFLAGS="-Cprofile-generate=$OUT/raw" CARGO_TARGET_DIR="$OUT/gen" \
    cargo build --release -p portcullis)

echo "pgo: training"
GEN=$OUT/gen/release/portcullis
train() { env BIN="$GEN" TARGET=portcullis "$@" "$ROOT/xtask/scripts/ka-instr.sh"; }
train IO=uring MODE=cpu C=50 N=100000
train IO=uring MODE=cpu CLOSE=1 D=5
train IO=epoll MODE=cpu C=50 N=50000
train IO=uring MODE=cpu H2=1 TLS=1 N=50000
train IO=uring MODE=cpu H2=1 N=50000
ls "$OUT"/raw/*.profraw >/dev/null

echo "pgo: merging with $PROFDATA"
"$PROFDATA" merge -o "$OUT/portcullis.profdata" "$OUT"/raw/*.profraw

echo "pgo: optimized build ($OUT/use)"
(cd "$ROOT" && RUSTFLAGS="-Cprofile-use=$OUT/portcullis.profdata" CARGO_TARGET_DIR="$OUT/use" \
    cargo build --release -p portcullis)
cp "$OUT/use/release/portcullis" "$OUT/portcullis"
echo "pgo: $OUT/portcullis"
