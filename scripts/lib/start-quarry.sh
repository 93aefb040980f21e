# Sourced by scripts that test a quarry binary over HTTP (fuzz-api, sdk-check, browser-test):
# starts `$bin` on SQLite and embedded vectors in `$work`, with the built-in local model from
# `$model_dir` (no network: Google, OpenAI and rerank point at port 9, where nothing listens),
# bearer token `$token`, its log in `$work/server.log`. Sets `server_pid` and `base`
# (http://host:port) once it is listening; exits non-zero, with the log, if it stops or says
# nothing within 60 s.
# The caller's EXIT trap stops the server (kill -TERM "$server_pid").
start_quarry() {
    : >"$work/server.log"
    env -i PATH="$PATH" HOME="$work" RUST_LOG=info \
        QUARRY__AUTH__TOKENS="$token" \
        QUARRY__SERVER__ADDR=127.0.0.1:0 \
        QUARRY__STORE__URL="sqlite://$work/quarry.db" \
        QUARRY__VECTORS__PATH="$work/vectors" \
        QUARRY__PROVIDERS__LOCAL__MODEL_DIR="$model_dir" \
        QUARRY__PROVIDERS__GOOGLE__BASE_URL=http://127.0.0.1:9 \
        QUARRY__PROVIDERS__OPENAI__BASE_URL=http://127.0.0.1:9 \
        QUARRY__PROVIDERS__RERANK__BASE_URL=http://127.0.0.1:9 \
        QUARRY__SECURITY__MASTER_KEY="$(head -c 32 /dev/urandom | base64)" \
        "$bin" serve --log-format json >"$work/server.log" 2>&1 &
    server_pid=$!
    local addr=
    for _ in $(seq 1 600); do
        addr=$(sed -n 's/.*"message":"quarry is listening".*"addr":"\([^"]*\)".*/\1/p; s/.*"addr":"\([^"]*\)".*"message":"quarry is listening".*/\1/p' "$work/server.log" | head -n1 || true)
        [ -n "$addr" ] && break
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "quarry stopped at startup:" >&2
            cat "$work/server.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    if [ -z "$addr" ]; then
        echo "quarry did not report its address within 60 s:" >&2
        cat "$work/server.log" >&2
        exit 1
    fi
    base="http://$addr"
}
