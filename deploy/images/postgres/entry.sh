#!/bin/bash
# The agenthost/postgres entrypoint. First start: initdb, with the admin password from POSTGRES_PASSWORD_FILE.
# Every start: the database and one login role per service schema (password from /run/secrets/pg-<schema>)
# are brought up to date on a socket-only server, then postgres serves in the foreground on every address.
set -euo pipefail
source /usr/local/lib/agenthost/pg-roles.sh
BIN=/usr/lib/postgresql/15/bin
: "${POSTGRES_PASSWORD_FILE:?POSTGRES_PASSWORD_FILE names the admin password file}"
PG_SCHEMAS=${PG_SCHEMAS:-gateway auth billing provisioner keyvault}
PG_DATABASE=${PG_DATABASE:-agenthost}
# The socket lives in /tmp (a tmpfs the postgres user may write; the root filesystem is read-only).
SOCK=/tmp

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  "$BIN/initdb" -D "$PGDATA" -U agenthost --pwfile="$POSTGRES_PASSWORD_FILE" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 >/dev/null
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
fi
"$BIN/pg_ctl" -D "$PGDATA" -w -t 120 -o "-c listen_addresses='' -k $SOCK" start >/dev/null
PGPASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
export PGPASSWORD PGOPTIONS="-c client_min_messages=warning"
psql -h "$SOCK" -U agenthost -d postgres -tAc "select 1 from pg_database where datname = '$PG_DATABASE'" | grep -q 1 ||
  psql -h "$SOCK" -U agenthost -d postgres -qc "create database $PG_DATABASE"
pairs=()
for schema in $PG_SCHEMAS; do pairs+=("$schema=$(cat "/run/secrets/pg-$schema")"); done
pg_roles_sql "$PG_DATABASE" "${pairs[@]}" | psql -h "$SOCK" -U agenthost -d "$PG_DATABASE" -q -v ON_ERROR_STOP=1 >/dev/null
unset PGPASSWORD pairs
"$BIN/pg_ctl" -D "$PGDATA" -w -m fast stop >/dev/null
exec "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' -k "$SOCK" -c max_connections=400 -c shared_buffers=128MB "$@"
