#!/bin/sh
# First start: initdb with the official image's variables, then run the
# server as PID 1 (so `docker kill` is a real crash of the postmaster).
# The database is created in single-user mode, so the server never answers
# on TCP before it is fully initialised: healthy means ready.
#
# Replica mode (KNELL_POSTGRES_PRIMARY names the primary's service): the
# data directory is instead a `pg_basebackup -R -X stream` of that
# primary, retried until it answers (the replicas start with it, and it
# may still be initialising), so the server starts as a hot standby
# streaming from it under the application_name KNELL_POSTGRES_NODE (what
# the primary's pg_stat_replication and synchronous_standby_names see).
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ] && [ -n "${KNELL_POSTGRES_PRIMARY:-}" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "knell-postgres: POSTGRES_PASSWORD must be set" >&2
    exit 1
  fi
  conninfo="host=$KNELL_POSTGRES_PRIMARY port=5432 user=$POSTGRES_USER"
  conninfo="$conninfo password=$POSTGRES_PASSWORD"
  conninfo="$conninfo application_name=${KNELL_POSTGRES_NODE:-replica}"
  tries=0
  until pg_basebackup -D "$PGDATA" -d "$conninfo" -X stream -R -c fast --no-sync 2>/tmp/basebackup.err; do
    tries=$((tries + 1))
    if [ "$tries" -ge "${KNELL_POSTGRES_BASEBACKUP_TRIES:-300}" ]; then
      echo "knell-postgres: pg_basebackup from $KNELL_POSTGRES_PRIMARY failed $tries times:" >&2
      cat /tmp/basebackup.err >&2
      exit 1
    fi
    rm -rf "${PGDATA:?}"/*
    sleep 0.5
  done
  chmod 700 "$PGDATA"
elif [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "knell-postgres: POSTGRES_PASSWORD must be set" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  # Clients from anywhere on the stack's network, and replicas copying and
  # streaming from this server (pg_basebackup, WAL senders).
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "host replication all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
