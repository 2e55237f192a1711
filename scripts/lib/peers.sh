# Shared by the scripts that run signet beside a peer server (bench-rekor-tiles, bench-fulcio,
# bench-tsa): a free loopback port, a fresh dev instance of signet, waiting for a peer to
# answer. Source it after setting BIN (signet) and PIDS=() with a trap that kills them.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_signet DATA_DIR LOG_PREFIX: sets SIGNET_PID and SIGNET_URL, or exits with its stderr.
start_signet() {
    "$BIN" serve --dev --plain-http --data-dir "$1" --listen 127.0.0.1:0 > "$2.out" 2> "$2.err" &
    SIGNET_PID=$!
    PIDS+=("$SIGNET_PID")
    SIGNET_URL=
    for _ in $(seq 100); do SIGNET_URL=$(sed -n 's/^signet listening on //p' "$2.out"); [ -n "$SIGNET_URL" ] && break; sleep 0.1; done
    [ -n "$SIGNET_URL" ] || { echo "signet did not start"; cat "$2.err"; exit 1; }
}

# wait_http URL NAME STDERR_FILE: returns once URL answers, or exits with the peer's stderr.
wait_http() {
    for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done
    echo "$2 did not start"; cat "$3"; exit 1
}

# stop PID...: kills and reaps.
stop() { kill "$@" 2>/dev/null || true; wait "$@" 2>/dev/null || true; }
