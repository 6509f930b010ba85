#!/usr/bin/env bash
# Fuzzes a real `mast serve` against openapi/openapi.json with schemathesis: a fixed seed and a
# bounded number of examples per operation, so a run is deterministic and takes a few minutes.
# It fails on any 5xx and on any response the spec does not allow (status, content type,
# headers, body schema). Usage: MAST_BIN=target/debug/mast tests/fuzz/run.sh [extra schemathesis args]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
MAST_BIN="${MAST_BIN:-$ROOT/target/debug/mast}"
[ -x "$MAST_BIN" ] || { echo "MAST_BIN=$MAST_BIN is not an executable (cargo build --bins first)" >&2; exit 1; }

VENV="$ROOT/tests/fuzz/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check -r tests/fuzz/requirements.txt

# The document itself must be valid OpenAPI 3.1 before anything is generated from it.
"$VENV/bin/openapi-spec-validator" openapi/openapi.json

WORK=$(mktemp -d)
chmod 755 "$WORK"  # the tools sandbox runs as other users and must pass through
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
KEY="sk-fuzz-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# SQLite in a fresh directory, real key auth, no real model provider: Claude model ids route
# to a closed loopback port so turns fail fast instead of reaching out, with no retries.
(cd "$WORK" && exec env -u DATABASE_URL -u ANTHROPIC_API_KEY -u ANTHROPIC_AUTH_TOKEN -u MAST_PROVIDERS \
  MAST_BOOTSTRAP_API_KEY="$KEY" ANTHROPIC_BASE_URL="http://127.0.0.1:9" MAST_MAX_RETRIES=0 \
  MAST_LOG="${MAST_LOG:-warn}" \
  "$MAST_BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" >"$WORK/server.log" 2>&1) &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done

# Seed data, so generated requests reach past "not found": an agent, a cloud and a self-hosted
# environment, a session in each (the self-hosted one queues a work item), a worker key.
# Path ids and a few body ids are drawn from these most of the time (see the config below).
BASE="http://127.0.0.1:$PORT"
api() { # METHOD PATH [JSON] -> prints the response's `id`
  curl -fsS -X "$1" "$BASE$2" -H "x-api-key: $KEY" -H "anthropic-version: 2023-06-01" \
    -H "content-type: application/json" ${3:+-d "$3"} | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
AGENT=$(api POST /v1/agents '{"name":"fuzz","model":"claude-sonnet-5-5"}')
ENV_CLOUD=$(api POST /v1/environments '{"name":"fuzz-cloud"}')
ENV_SELF=$(api POST /v1/environments '{"name":"fuzz-self","config":{"type":"self_hosted"}}')
SESSION_CLOUD=$(api POST /v1/sessions "{\"agent\":\"$AGENT\",\"environment_id\":\"$ENV_CLOUD\"}")
SESSION_SELF=$(api POST /v1/sessions "{\"agent\":\"$AGENT\",\"environment_id\":\"$ENV_SELF\"}")
VAULT=$(api POST /v1/vaults '{"display_name":"fuzz"}')
# Its server is a closed loopback port the address guard refuses: validating never leaves.
CREDENTIAL=$(api POST "/v1/vaults/$VAULT/credentials" \
  '{"auth":{"type":"static_bearer","mcp_server_url":"http://127.0.0.1:9/mcp","token":"fuzz"}}')
# Memory stores take their own beta header.
MEM_H=(-H "x-api-key: $KEY" -H "anthropic-beta: agent-memory-2026-07-22" -H "content-type: application/json")
MEMORY_STORE=$(curl -fsS "$BASE/v1/memory_stores" "${MEM_H[@]}" -d '{"name":"fuzz"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
read -r MEMORY MEMORY_VERSION < <(curl -fsS "$BASE/v1/memory_stores/$MEMORY_STORE/memories" "${MEM_H[@]}" \
  -d '{"path":"/fuzz/notes.md","content":"fuzz"}' | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["id"], m["memory_version_id"])')
read -r ENV_KEY ENV_SECRET < <(curl -fsS -X POST "$BASE/v1/environments/$ENV_SELF/keys" -H "x-api-key: $KEY" \
  -H "anthropic-version: 2023-06-01" | python3 -c 'import json,sys; k=json.load(sys.stdin); print(k["id"], k["key"])')
WORK_ID=$(curl -fsS "$BASE/v1/environments/$ENV_SELF/work" -H "x-api-key: $ENV_SECRET" -H "anthropic-version: 2023-06-01" \
  | python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(d[0]["id"] if d else "work_none")')

cat >"$WORK/schemathesis.toml" <<TOML
headers = { "x-api-key" = "$KEY", "anthropic-version" = "2023-06-01", "anthropic-beta" = "agent-memory-2026-07-22" }

# The work queue lives in the self-hosted environment. Polling, listing, acks and heartbeats
# are for workers and take its environment key; stats, retrieve, update and stop take either.
[[operations]]
include-path-regex = "/work(/poll)?\$|/ack\$|/heartbeat\$"
headers = { "x-api-key" = "$ENV_SECRET", "anthropic-version" = "2023-06-01" }
parameters = { "path.environment_id" = { dictionary = "self_hosted", probability = 0.9 } }

[[operations]]
include-path-regex = "/work/(stats|[{]work_id[}]|[{]work_id[}]/stop)\$"
parameters = { "path.environment_id" = { dictionary = "self_hosted", probability = 0.9 } }

[dictionaries]
agents.values = ["$AGENT"]
environments.values = ["$ENV_CLOUD", "$ENV_SELF"]
self_hosted.values = ["$ENV_SELF"]
sessions.values = ["$SESSION_CLOUD", "$SESSION_SELF"]
keys.values = ["$ENV_KEY"]
work.values = ["$WORK_ID"]
vaults.values = ["$VAULT"]
credentials.values = ["$CREDENTIAL"]
memory_stores.values = ["$MEMORY_STORE"]
memories.values = ["$MEMORY"]
memory_versions.values = ["$MEMORY_VERSION"]
models.values = ["claude-sonnet-5-5", "mast-scripted"]

# An event stream on a live session stays open until the client leaves, which schemathesis can
# only see as a timeout: the stream endpoints are fuzzed against sessions that do not exist
# (validation and 404s); tests/it/stream.rs and the SDK suites cover live streams.
[[operations]]
include-path-regex = "/stream\$"
parameters = { "path.session_id" = "sesn_does_not_exist" }

[parameters]
"path.agent_id" = { dictionary = "agents", probability = 0.7 }
"path.environment_id" = { dictionary = "environments", probability = 0.7 }
"path.session_id" = { dictionary = "sessions", probability = 0.7 }
"path.key_id" = { dictionary = "keys", probability = 0.7 }
"path.work_id" = { dictionary = "work", probability = 0.7 }
"path.model_id" = { dictionary = "models", probability = 0.7 }
"path.vault_id" = { dictionary = "vaults", probability = 0.7 }
"path.credential_id" = { dictionary = "credentials", probability = 0.7 }
"path.memory_store_id" = { dictionary = "memory_stores", probability = 0.7 }
"path.memory_id" = { dictionary = "memories", probability = 0.7 }
"path.memory_version_id" = { dictionary = "memory_versions", probability = 0.7 }
"body.environment_id" = { dictionary = "environments", probability = 0.5 }
TOML

# Checks: every one but `positive_data_acceptance`, which wants each schema-valid request to
# succeed. The schema leaves open what only the server can know: page cursors are opaque (any
# string is schema-valid, a forged one is a 400), ids in bodies must name existing resources
# of the right kind, names must be unique, worker keys exist only for self-hosted environments,
# bodies carry cross-field rules, and numeric and timestamp parameters have bounds and formats
# the annotations do not state yet (`limit`, `created_at[gte]`). Those 400s are correct
# answers, not spec drift.
# Everything else stays on: no 5xx, status codes, content types, headers and bodies as
# documented, invalid data rejected, auth not ignored, 405 for unsupported methods.
status=0
# Run from the scratch directory so schemathesis' caches (.schemathesis/, .hypothesis/) start
# empty every time: a remembered failure would otherwise be replayed first and the run would
# depend on the last one.
(cd "$WORK" && "$VENV/bin/schemathesis" --config-file "$WORK/schemathesis.toml" run "$ROOT/openapi/openapi.json" \
  --url "http://127.0.0.1:$PORT" \
  --seed 1 --max-examples 25 --workers 1 --request-timeout 10 \
  --checks all --exclude-checks positive_data_acceptance \
  "$@") || status=$?

if [ "$status" != 0 ]; then
  echo "--- server log (errors) ---" >&2
  grep -iE 'error|panic' "$WORK/server.log" | tail -50 >&2 || true
fi
exit "$status"
