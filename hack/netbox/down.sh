#!/usr/bin/env bash
# Stop the NetBox instance started by hack/netbox/up.sh (gunicorn, Redis, PostgreSQL),
# unmount anything left mounted and remove the run directory. Safe to run repeatedly.
#
# Env: NETBOX_RUN_DIR (default /tmp/netbox-run), NETBOX_CACHE (see common.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"

require_root

case "$NETBOX_RUN_DIR" in
/ | /tmp | /root | /home | /var | /usr | "") die "refusing to use NETBOX_RUN_DIR=$NETBOX_RUN_DIR" ;;
esac

RUN="$NETBOX_RUN_DIR"

# 1. gunicorn (SIGINT = quick shutdown; gunicorn 26 then lingers ~5 s in the master, so
#    after 3 s it is SIGKILLed: this is a disposable instance).
if [ -f "$RUN/netbox/gunicorn.pid" ]; then
	pid="$(cat "$RUN/netbox/gunicorn.pid" 2>/dev/null || true)"
	if pid_matches "$pid" gunicorn; then stop_pid "$pid" INT 3 "gunicorn"; fi
fi

# 2. Redis.
if [ -f "$RUN/redis/redis.pid" ]; then
	pid="$(cat "$RUN/redis/redis.pid" 2>/dev/null || true)"
	if pid_matches "$pid" redis-server; then stop_pid "$pid" TERM 15 "redis"; fi
fi

# 3. PostgreSQL (SIGINT = fast shutdown; first line of postmaster.pid is the postmaster pid).
if [ -f "$RUN/pg/data/postmaster.pid" ]; then
	pid="$(head -n1 "$RUN/pg/data/postmaster.pid" 2>/dev/null || true)"
	if pid_matches "$pid" postgres; then stop_pid "$pid" INT 30 "postgres"; fi
fi

# 4. Anything else we started (helpers, stray workers): identified by the marker in
#    their environment. Postgres may overwrite its environ for ps titles, hence step 3.
leftover="$(marked_pids)"
if [ -n "$leftover" ]; then
	log "terminating leftover processes: $(echo $leftover)"
	# shellcheck disable=SC2086
	kill -TERM $leftover 2>/dev/null || true
	sleep 1
	leftover="$(marked_pids)"
	# shellcheck disable=SC2086
	[ -z "$leftover" ] || kill -KILL $leftover 2>/dev/null || true
fi

# 5. Unmount. up.sh mounts only inside private mount namespaces (they vanish with the
#    processes), so normally there is nothing here; this is a safety net for interrupted
#    builds or manual debugging sessions.
for dir in "$RUN" "$NB_ROOTFS" "$NETBOX_CACHE"; do
	mounts_below "$dir" | while IFS= read -r m; do
		log "unmounting $m"
		umount -R "$m" 2>/dev/null || umount -l "$m" || true
	done
done

# 6. Remove the run dir (never crossing into a mount, just in case).
if [ -e "$RUN" ]; then
	if [ -n "$(mounts_below "$RUN")" ]; then
		die "mounts still present below $RUN; not removing it"
	fi
	rm -rf --one-file-system "$RUN"
	log "removed $RUN"
else
	log "nothing to do: $RUN does not exist"
fi
