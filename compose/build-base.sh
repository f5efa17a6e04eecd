#!/usr/bin/env bash
# Make the base image every knell Dockerfile starts FROM (debian:bookworm-slim)
# when it is missing and no registry can give it: debootstrap a minimal
# bookworm and `docker import` it under the official name. On a machine that
# can reach a registry, the real image is pulled instead.
#
#   compose/build-base.sh            # idempotent: does nothing when present
#   KNELL_BASE_IMAGE=debian:bookworm-slim DEBIAN_MIRROR=http://deb.debian.org/debian
set -euo pipefail

image="${KNELL_BASE_IMAGE:-debian:bookworm-slim}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "base image $image: present"
  exit 0
fi
if [ "${KNELL_NO_PULL:-0}" != 1 ] && timeout 120 docker pull -q "$image" >/dev/null 2>&1; then
  echo "base image $image: pulled"
  exit 0
fi
command -v debootstrap >/dev/null || {
  echo "build-base: $image is missing, no registry answered, and debootstrap is not installed" >&2
  echo "  install it: apt-get install -y debootstrap" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || { echo "build-base: debootstrap needs root" >&2; exit 1; }

root="$(mktemp -d "${TMPDIR:-/tmp}/knell-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
echo "base image $image: debootstrap --variant=minbase bookworm ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -20 "$root.log" >&2
  rm -f "$root.log"
  exit 1
}
rm -f "$root.log"
# What the official slim image leaves out, so layers built on it stay small.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import --change 'CMD ["bash"]' \
  --message "debootstrap --variant=minbase bookworm (knell compose/build-base.sh)" \
  - "$image" >/dev/null
echo "base image $image: imported in $(( $(date +%s) - start )) s"
