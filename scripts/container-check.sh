#!/usr/bin/env bash
# Proves the container image: builds it with podman, runs docker-compose.yml's migrate, api and worker services
# (their commands, environment and health checks) against this machine's PostgreSQL and Redis on the host network,
# creates an app and its keys with the CLI inside the api container, delivers a notification to the gateway mocks,
# then stops both containers and checks they exited cleanly. Then the same with the `cluster` profile's api-cluster
# and two worker-cluster containers, against a Redis Cluster, a PostgreSQL replica and PgBouncer of this machine
# (test/engines/serve-cluster.ts stands in for the profile's engine services).
#
# Needs root (podman, apt-get). Where no registry can be reached for the base image, a stand-in is built from
# Debian's packages (scripts/container/standin-base.sh). Settings: CHECK_PG (a PostgreSQL server URL, default
# postgres://postgres@127.0.0.1:5432), CHECK_REDIS (default redis://127.0.0.1:6379).
set -euo pipefail
cd "$(dirname "$0")/.."

pg=${CHECK_PG:-postgres://postgres@127.0.0.1:5432}
redis=${CHECK_REDIS:-redis://127.0.0.1:6379}
image=localhost/pushd:check
run_id=pushd-check-$$
database=pushd_container_check
topic=com.example.containercheck
# the key docker-compose.yml's services seal the apps' credentials with (docs/secrets.md)
export SECRETS_KEY=${SECRETS_KEY:-$(openssl rand -base64 32)}

say() { printf '== %s\n' "$*"; }
fail() {
  printf 'container-check: FAILED: %s\n' "$*" >&2
  exit 1
}
# crun fails on this machine kind's cgroups; runc works.
pm() { podman --runtime runc "$@"; }
# Reads a field of the JSON document on stdin: json '.app.id'
json() { node -e "let d; try { d = JSON.parse(require('fs').readFileSync(0, 'utf8')); } catch { process.exit(1); } const v = d$1; if (v === undefined) process.exit(1); process.stdout.write(typeof v === 'string' ? v : JSON.stringify(v))"; }

say "podman"
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get install -y podman runc debootstrap >/dev/null || { apt-get update >/dev/null && apt-get install -y podman runc debootstrap >/dev/null; }
fi
# Containers cannot raise their ulimits on this machine kind: keep the host's.
conf=/etc/containers/containers.conf
if ! grep -qs '^default_ulimits' "$conf"; then
  mkdir -p "$(dirname "$conf")"
  if grep -qs '^\[containers\]' "$conf"; then
    sed -i 's/^\[containers\]$/[containers]\ndefault_ulimits = []/' "$conf"
  else
    printf '\n[containers]\ndefault_ulimits = []\n' >>"$conf"
  fi
fi

say "base image"
base=$(awk '/^FROM/ {print $2; exit}' Dockerfile)
case "$base" in */*) ;; *) base=docker.io/library/$base ;; esac
if pm image exists "$base"; then
  echo "$base is present"
elif timeout 60 podman pull -q "$base" >/dev/null 2>&1; then
  echo "pulled $base"
else
  echo "$base cannot be pulled; building a stand-in"
  bash scripts/container/standin-base.sh "$base"
fi

say "build"
pm build --quiet --network host -t "$image" . >/dev/null

workdir=$(mktemp -d /tmp/pushd-check.XXXXXX)
chmod 755 "$workdir"
mocks_pid=
engines_pid=
cleanup() {
  set +e
  # --ignore: with a name that was never created (a failure before the solo run) podman removes none of them
  pm rm -f -i -t 0 "$run_id-api" "$run_id-worker" "$run_id-solo" "$run_id-capi" "$run_id-cw1" "$run_id-cw2" >/dev/null 2>&1
  [ -n "$mocks_pid" ] && kill "$mocks_pid" 2>/dev/null && wait "$mocks_pid" 2>/dev/null
  [ -n "$engines_pid" ] && kill "$engines_pid" 2>/dev/null && wait "$engines_pid" 2>/dev/null
  psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$workdir"
}
trap cleanup EXIT

say "gateway mocks"
node --import tsx test/mocks/serve.ts "$workdir" &
mocks_pid=$!
for _ in $(seq 100); do [ -s "$workdir/mocks.json" ] && break; sleep 0.1; done
[ -s "$workdir/mocks.json" ] || fail "the gateway mocks did not start"
cp test/fixtures/tls/ca.pem "$workdir/ca.pem"
chmod 644 "$workdir/ca.pem"
mocks=$(cat "$workdir/mocks.json")

say "database $database"
PGOPTIONS="-c client_min_messages=warning" psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"; }
port=$(free_port)

# A compose service as podman arguments: its environment, then what this machine puts in place of the compose
# network (overrides, a JSON object: the local PostgreSQL and Redis, a free port; the mocks), its init, the image
# and its command.
service_args() {
  local spec=$1 overrides=${2:-$plain}
  echo "$spec" | node -e "
    const s = JSON.parse(require('fs').readFileSync(0, 'utf8'));
    const mocks = JSON.parse(process.argv[1]);
    const env = { ...s.environment, ...JSON.parse(process.argv[2]), NODE_EXTRA_CA_CERTS: '/check/ca.pem',
      APNS_ORIGIN_PRODUCTION: mocks.APNS_ORIGIN_PRODUCTION, APNS_ORIGIN_SANDBOX: mocks.APNS_ORIGIN_SANDBOX,
      FCM_ORIGIN: mocks.FCM_ORIGIN, GOOGLE_TOKEN_URL: mocks.GOOGLE_TOKEN_URL };
    const args = Object.entries(env).flatMap(([k, v]) => ['-e', k + '=' + v]);
    if (s.init) args.push('--init');
    args.push(process.argv[3], ...(s.command ?? []));
    process.stdout.write(args.join('\0'));
  " "$mocks" "$overrides" "$image"
}
plain=$(node -e "console.log(JSON.stringify({ DATABASE_URL: process.argv[1], REDIS_URL: process.argv[2], QUEUE_PREFIX: process.argv[3], PORT: process.argv[4] }))" \
  "$pg/$database" "$redis" "$run_id" "$port")
healthcheck_of() { echo "$1" | json '.healthcheck'; }

say "compose: postgres and redis health checks (against the local services that stand in for them)"
for dependency in postgres redis; do
  mapfile -d '' -t check < <(node scripts/container/compose-services.mjs "$dependency" | json ".healthcheck.join('\\0')")
  # The compose checks reach the server in their own container; here it is this machine's, on the loopback.
  out=$(PGHOST=127.0.0.1 "${check[@]}") || fail "$dependency health check failed: ${check[*]}: $out"
  echo "$dependency: ${check[*]}: $out"
done

say "compose: migrate"
mapfile -d '' -t args < <(service_args "$(node scripts/container/compose-services.mjs migrate)")
pm run --rm --network host -v "$workdir:/check:ro" "${args[@]}" | json '.migrated' | grep -qx true || fail "migrate did not answer {migrated: true}"
echo "migrated"

say "compose: api and worker"
api_spec=$(node scripts/container/compose-services.mjs api)
mapfile -d '' -t args < <(service_args "$api_spec")
pm run -d --name "$run_id-api" --network host -v "$workdir:/check:ro" "${args[@]}" >/dev/null
mapfile -d '' -t args < <(service_args "$(node scripts/container/compose-services.mjs worker)")
pm run -d --name "$run_id-worker" --network host -v "$workdir:/check:ro" "${args[@]}" >/dev/null

# Waits for an api container's compose health check and /ready: api_healthy CONTAINER SPEC PORT
api_healthy() {
  local container=$1 spec=$2 api_port=$3
  mapfile -t api_health < <(healthcheck_of "$spec" | node -e "for (const a of JSON.parse(require('fs').readFileSync(0, 'utf8'))) console.log(a)")
  local healthy=
  for _ in $(seq 60); do
    if pm exec "$container" "${api_health[@]}" >/dev/null 2>&1; then
      healthy=1
      break
    fi
    sleep 1
  done
  [ -n "$healthy" ] || {
    pm logs "$container" >&2
    fail "the $container container's health check did not pass within 60 s"
  }
  base_url=http://127.0.0.1:$api_port
  curl -fsS "$base_url/ready" | json '.status' | grep -qx ok || fail "/ready is not ok"
  echo "$container healthy on $base_url, /ready ok"
}
# the worker starts beside the api, not after it: give it as long
worker_running() {
  local worker_up=
  for _ in $(seq 60); do
    if pm logs "$1" 2>&1 | grep -q '"worker running"'; then
      worker_up=1
      break
    fi
    sleep 1
  done
  [ -n "$worker_up" ] || fail "the $1 container did not start within 60 s: $(pm logs "$1" 2>&1 | tail -5)"
  echo "$1 running"
}
api_healthy "$run_id-api" "$api_spec" "$port"
worker_running "$run_id-worker"

# Creates an app with the CLI inside API_CONTAINER, registers an iOS and an Android device through base_url and sends
# them a notification that both mocks must receive: deliver_once API_CONTAINER WORKER_CONTAINER
deliver_once() {
  say "CLI inside the api container"
  cli() { pm exec "$1" node bin/pushd.js "${@:2}"; }
  created=$(cli "$1" app create --bundle-id "$topic" --name "Container check")
  app=$(echo "$created" | json '.app.id')
  write_key=$(echo "$created" | json '.keys.write')
  sdk_key=$(cli "$1" key create --app "$app" --role sdk | json '.key')
  cli "$1" app set-apns --app "$app" --key-file /check/apns.p8 --key-id "$(echo "$mocks" | json '.keyId')" \
    --team-id "$(echo "$mocks" | json '.teamId')" --topic "$topic" >/dev/null
  cli "$1" app set-fcm --app "$app" --service-account /check/service-account.json >/dev/null
  echo "app $app with write and sdk keys, APNs and FCM credentials"

  say "a notification to an iOS and an Android device"
  ios_token=$(node -e "console.log(require('crypto').randomBytes(32).toString('hex'))")
  android_token=check-$(node -e "console.log(require('crypto').randomBytes(60).toString('base64url'))")
  for device in "{\"platform\":\"ios\",\"token\":\"$ios_token\"}" "{\"platform\":\"android\",\"token\":\"$android_token\"}"; do
    curl -fsS -u ":$sdk_key" -H 'Content-Type: application/json' "$base_url/v6/devices" -d "{\"device\":$device}" >/dev/null
  done
  notification=$(curl -fsS -u ":$write_key" -H 'Content-Type: application/json' "$base_url/v6/notifications" \
    -d '{"notification":{"to":"*","payload":{"alert":"Hello from the container"}}}' | json '.id')
  delivered=
  for _ in $(seq 60); do
    pushes=$(curl -fsS "$(echo "$mocks" | json '.control')/pushes")
    if echo "$pushes" | json ".apns.includes('$ios_token') && d.fcm.includes('$android_token')" | grep -qx true; then
      delivered=1
      break
    fi
    sleep 1
  done
  [ -n "$delivered" ] || {
    pm logs "$2" >&2
    fail "the notification did not reach both mocks within 60 s (they saw $pushes)"
  }
  state=
  for _ in $(seq 30); do
    state=$(curl -fsS -u ":$write_key" "$base_url/v6/notifications/$notification" | json '.state')
    [ "$state" = sent ] && break
    sleep 1
  done
  [ "$state" = sent ] || fail "notification $notification is $state, not sent"
  echo "notification $notification delivered to APNs and FCM, state sent"
}
deliver_once "$run_id-api" "$run_id-worker"

# SIGTERM, then each must exit 0 after logging a clean stop: stop_cleanly CONTAINER...
stop_cleanly() {
  say "stop"
  pm stop -t 30 "$@" >/dev/null
  for container in "$@"; do
    code=$(pm inspect -f '{{.State.ExitCode}}' "$container")
    [ "$code" = 0 ] || fail "$container exited with $code"
    pm logs "$container" 2>&1 | tail -3 | grep -q '"msg":"stopped"' || fail "$container did not log a clean stop"
    echo "$container stopped cleanly (exit 0)"
  done
}
stop_cleanly "$run_id-api" "$run_id-worker"

say "compose profile cluster: a Redis Cluster, a PostgreSQL replica and PgBouncer of this machine"
node --import tsx test/engines/serve-cluster.ts "$workdir" &
engines_pid=$!
for _ in $(seq 300); do [ -s "$workdir/engines.json" ] && break; sleep 0.2; done
[ -s "$workdir/engines.json" ] || fail "the cluster's engines did not start"
engines=$(cat "$workdir/engines.json")
cluster_port=$(free_port)
capi_spec=$(node scripts/container/compose-services.mjs api-cluster)
cworker_spec=$(node scripts/container/compose-services.mjs worker-cluster)
# the profile's own settings stay; each URL it names is pointed at this machine's stand-in for that service
for setting in DATABASE_URL DATABASE_LISTEN_URL DATABASE_READ_URL REDIS_URL QUEUE_PREFIX QUEUE_PARTITIONS REDIS_CLUSTER; do
  echo "$capi_spec" | json ".environment.$setting" >/dev/null || fail "api-cluster does not set $setting"
done
echo "$capi_spec" | json '.environment.REDIS_CLUSTER' | grep -qx true || fail "api-cluster: REDIS_CLUSTER is not true"
metrics_token=$(openssl rand -hex 16)
overrides=$(echo "$engines" | node -e "
  const e = JSON.parse(require('fs').readFileSync(0, 'utf8'));
  const { redisPorts, ...urls } = e;
  console.log(JSON.stringify({ ...urls, PORT: process.argv[1], METRICS_TOKEN: process.argv[2] }))" "$cluster_port" "$metrics_token")
mapfile -d '' -t check < <(node scripts/container/compose-services.mjs postgres-replica | json ".healthcheck.join('\\0')")
replica_port=$(echo "$engines" | json '.DATABASE_READ_URL' | node -e "console.log(new URL(require('fs').readFileSync(0, 'utf8').trim()).port)")
out=$(PGHOST=127.0.0.1 PGPORT=$replica_port "${check[@]}") || fail "postgres-replica health check failed: $out"
echo "postgres-replica: ${check[*]}: $out"
mapfile -d '' -t args < <(service_args "$(node scripts/container/compose-services.mjs migrate)" \
  "$(node -e "console.log(JSON.stringify({ DATABASE_URL: process.argv[1] }))" "$(echo "$engines" | json '.DATABASE_LISTEN_URL')")")
pm run --rm --network host -v "$workdir:/check:ro" "${args[@]}" | json '.migrated' | grep -qx true || fail "migrate (cluster) did not answer {migrated: true}"
mapfile -d '' -t args < <(service_args "$capi_spec" "$overrides")
pm run -d --name "$run_id-capi" --network host -v "$workdir:/check:ro" "${args[@]}" >/dev/null
mapfile -d '' -t args < <(service_args "$cworker_spec" "$overrides")
for w in cw1 cw2; do pm run -d --name "$run_id-$w" --network host -v "$workdir:/check:ro" "${args[@]}" >/dev/null; done
api_healthy "$run_id-capi" "$capi_spec" "$cluster_port"
worker_running "$run_id-cw1"
worker_running "$run_id-cw2"
deliver_once "$run_id-capi" "$run_id-cw1"
metrics=$(curl -fsS -H "Authorization: Bearer $metrics_token" "$base_url/metrics")
lag=$(echo "$metrics" | awk '/^pushd_read_replica_lag_seconds /{print $2}')
in_use=$(echo "$metrics" | awk '/^pushd_read_replica_in_use /{print $2}')
[ -n "$lag" ] && [ "$lag" != NaN ] && [ "$in_use" = 1 ] ||
  fail "api-cluster does not read from DATABASE_READ_URL (lag '$lag', in use '$in_use')"
echo "api-cluster reads from the replica (lag $lag s)"
queued=0
for p in $(echo "$engines" | json '.redisPorts.join(" ")'); do
  n=$(redis-cli -p "$p" --scan --pattern '{pushd:*' | wc -l)
  echo "redis node $p: $n keys of the partitioned queues"
  queued=$((queued + n))
done
[ "$queued" -gt 0 ] || fail "no queue key under {pushd:<partition>} on the Redis Cluster"
stop_cleanly "$run_id-capi" "$run_id-cw1" "$run_id-cw2"
kill "$engines_pid" && wait "$engines_pid"
engines_pid=

say "the image on its own: embedded PostgreSQL, the PostgreSQL queue, API and worker in one process"
solo_port=$(free_port)
pm run -d --name "$run_id-solo" --network host -e PORT="$solo_port" -e EMBEDDED_PG_PORT="$(free_port)" "$image" >/dev/null
ready=
for _ in $(seq 90); do
  if curl -fsS "http://127.0.0.1:$solo_port/ready" 2>/dev/null | json '.status' | grep -qx ok; then
    ready=1
    break
  fi
  sleep 1
done
[ -n "$ready" ] || {
  pm logs "$run_id-solo" >&2
  fail "the embedded-PostgreSQL container was not ready within 90 s"
}
pm stop -t 30 "$run_id-solo" >/dev/null
code=$(pm inspect -f '{{.State.ExitCode}}' "$run_id-solo")
[ "$code" = 0 ] || fail "the embedded-PostgreSQL container exited with $code"
echo "ready on its own embedded PostgreSQL, stopped cleanly (exit 0)"
say "container check passed"
