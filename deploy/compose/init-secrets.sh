#!/bin/sh
# init-secrets.sh [DIR]: writes the secrets compose.yaml reads into DIR
# (default: secrets/ beside this script), once, readable by you alone:
#
#   postgres_password  PostgreSQL's password (the docker secret of the postgres service)
#   dlqdash.env        DLQDASH_DATABASE_URL (the postgres:// URL with that password),
#                      DLQDASH_AUDIT_KEY (32 random bytes, hex: the same key for
#                      every replica) and SERVICEBUS_CONNECTION_STRING
#   emulator.env       DLQDASH_EMULATOR_KEY, the SAS key of the emulator
#
# SERVICEBUS_CONNECTION_STRING is taken from the environment when set (a real
# namespace); otherwise it is the emulator's (docker compose --profile emulator).
# Keep the audit key: the audit trail's entries are keyed with it, and
# `dlqdash audit verify` needs it.
set -eu
dir=${1:-"$(dirname "$0")/secrets"}
umask 077
mkdir -p "$dir"
for f in postgres_password dlqdash.env emulator.env; do
	if [ -e "$dir/$f" ]; then
		echo "init-secrets.sh: $dir/$f exists; keep it (the audit key and the database password are in use) or remove $dir to start again" >&2
		exit 1
	fi
done

# n random bytes as hex (URL- and env-file-safe).
random() { od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'; }

password=$(random 24)
audit_key=$(random 32)
emulator_key=$(random 32)
connection=${SERVICEBUS_CONNECTION_STRING:-"Endpoint=sb://emulator;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=$emulator_key;UseDevelopmentEmulator=true;"}

printf '%s' "$password" >"$dir/postgres_password"
# sslmode=disable: PostgreSQL is reached on compose's own network only. A
# database elsewhere: sslmode=verify-full.
cat >"$dir/dlqdash.env" <<END
DLQDASH_DATABASE_URL=postgres://dlqdash:$password@postgres:5432/dlqdash?sslmode=disable
DLQDASH_AUDIT_KEY=$audit_key
SERVICEBUS_CONNECTION_STRING=$connection
END
printf 'DLQDASH_EMULATOR_KEY=%s\n' "$emulator_key" >"$dir/emulator.env"
echo "init-secrets.sh: wrote $dir/postgres_password, $dir/dlqdash.env and $dir/emulator.env"
