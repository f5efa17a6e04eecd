#!/usr/bin/env bash
# Build a redis-server with libc's malloc, for clock faults on the Redis
# store's own clock: Debian's and Ubuntu's redis-server are jemalloc
# builds, which die under libfaketime (libfaketime issue #130). The source
# is the distribution's own package of Redis (the same version as its
# redis-server), from the source twin of each configured package source.
# Prints the binary's path; the build takes about a minute on two cores.
# Usage: tools/redis_libc.sh [DEST]   (default ~/.cache/knell/redis-libc)
set -euo pipefail
dest="${1:-$HOME/.cache/knell/redis-libc}"
if [ -x "$dest/redis-server" ] && "$dest/redis-server" --version | grep -q "malloc=libc"; then
  echo "$dest/redis-server"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tools/redis_libc.sh: needs apt-get (the distribution's redis source package)" >&2
  exit 3
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
work="$(mktemp -d)"
src_list=/etc/apt/sources.list.d/knell-redis-src
cleanup() { rm -rf "$work"; $SUDO rm -f "$src_list.sources" "$src_list.list"; }
trap cleanup EXIT
# The source twin of every package source (deb822 files and one-line lists).
for f in /etc/apt/sources.list.d/*.sources; do
  [ -e "$f" ] || continue
  sed 's/^Types:.*/Types: deb-src/' "$f"; echo
done | $SUDO tee "$src_list.sources" >/dev/null
grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
  | sed 's/^deb /deb-src /' | $SUDO tee "$src_list.list" >/dev/null || true
$SUDO apt-get update -qq >&2
(cd "$work" && apt-get source --download-only -qq redis >&2)
tar -xzf "$work"/redis_*.orig.tar.gz -C "$work"
src="$(find "$work" -maxdepth 1 -type d -name 'redis-*' | head -1)"
make -s -C "$src" MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no -j"$(nproc)" redis-server >&2
mkdir -p "$dest"
cp "$src/src/redis-server" "$dest/redis-server"
"$dest/redis-server" --version | grep -q "malloc=libc"
echo "$dest/redis-server"
