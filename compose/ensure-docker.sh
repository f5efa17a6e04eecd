#!/usr/bin/env bash
# Make sure this machine has what `make compose-test` needs: a running Docker
# engine, a compose command, and debootstrap (to make debian:bookworm-slim
# where no registry answers). Installs Debian's packages only for what is
# missing (docker.io, docker-compose, debootstrap), and starts dockerd in the
# background when no engine answers (its log: $KNELL_DOCKERD_LOG, default
# /tmp/dockerd.log). On a hosted CI runner, where Docker already runs, it does
# nothing. Needs root for the install and for dockerd.
set -euo pipefail

need=()
# (This machine kind ships a docker CLI without an engine: look for dockerd.)
if ! docker info >/dev/null 2>&1 && ! command -v dockerd >/dev/null 2>&1; then
  need+=(docker.io)
fi
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  need+=(docker-compose)
fi
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  echo "docker engine: running ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))"
  exit 0
fi
command -v dockerd >/dev/null 2>&1 || {
  echo "ensure-docker: no engine answers and dockerd is not installed (apt-get install -y docker.io)" >&2
  exit 1
}
log="${KNELL_DOCKERD_LOG:-/tmp/dockerd.log}"
echo "starting dockerd (log: $log)"
nohup dockerd >"$log" 2>&1 </dev/null &
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo "docker engine: running ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))"
    exit 0
  fi
  sleep 0.5
done
echo "ensure-docker: dockerd did not answer within 60 s; its log:" >&2
tail -20 "$log" >&2
exit 1
