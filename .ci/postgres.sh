#!/usr/bin/env bash
# Make a PostgreSQL server ready for the tests: install Debian's postgresql when missing, create a
# cluster of our own (so that no other cluster on the machine is touched) listening on 127.0.0.1,
# start it, and create the test role and database. Idempotent. Prints the URL on stdout, and
# writes it to .cache/postgres/url, where the tests read it when GATEWAY_TEST_POSTGRES_URL is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
# Stdout carries the URL and nothing else: every other line (pg_ctlcluster says "Removed stale pid
# file." after a reboot) goes to stderr.
exec 3>&1 1>&2

CLUSTER="${POSTGRES_CLUSTER:-gateway-test}"
PORT="${POSTGRES_PORT:-54329}"
ROLE=gateway_test
PASSWORD=gateway_test
DATABASE=gateway_test
URL_FILE=.cache/postgres/url

if ! command -v pg_createcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "postgres.sh: postgresql missing and not root; install it first (apt-get install postgresql)" >&2
    exit 1
  fi
  echo "postgres.sh: installing postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  export NEEDRESTART_SUSPEND=1
  apt-get update -qq
  # The package's own cluster (main, port 5432) is not wanted: ours is created below.
  mkdir -p /etc/postgresql-common
  [[ -f /etc/postgresql-common/createcluster.conf ]] || echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  apt-get install -y -qq postgresql >/dev/null
fi
VERSION="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"

if ! pg_lsclusters --no-header | awk '{print $1, $2}' | grep -qx "$VERSION $CLUSTER"; then
  echo "postgres.sh: creating cluster $VERSION/$CLUSTER on port $PORT" >&2
  pg_createcluster --port "$PORT" "$VERSION" "$CLUSTER" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
fi
if ! pg_lsclusters --no-header | awk '{print $1, $2, $4}' | grep -qx "$VERSION $CLUSTER online"; then
  echo "postgres.sh: starting cluster $VERSION/$CLUSTER" >&2
  pg_ctlcluster "$VERSION" "$CLUSTER" start 3>&-
fi
PORT="$(pg_lsclusters --no-header | awk -v v="$VERSION" -v c="$CLUSTER" '$1 == v && $2 == c {print $3}')"

as_postgres() { runuser -u postgres -- psql --quiet --no-psqlrc -p "$PORT" -v ON_ERROR_STOP=1 "$@"; }
if [[ -z "$(as_postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" ]]; then
  as_postgres -c "CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD'"
fi
if [[ -z "$(as_postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" ]]; then
  as_postgres -c "CREATE DATABASE $DATABASE OWNER $ROLE"
fi

URL="postgresql://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
mkdir -p "$(dirname "$URL_FILE")"
echo "$URL" >"$URL_FILE"
echo "$URL" >&3
