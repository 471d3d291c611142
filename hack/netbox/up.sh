#!/usr/bin/env bash
# Install (once, cached) and start a real NetBox server for the test suite, unattended.
#
#   hack/netbox/up.sh        -> prints the path of a shell-sourceable env file on stdout
#   hack/netbox/down.sh      -> stops everything and removes the run dir
#
# How: NetBox needs Python >= 3.12 but the host is Debian bookworm (3.11), so a Debian
# trixie root (python3.13, PostgreSQL 17, Redis 8) is built with debootstrap and cached,
# with a venv holding `pip install netbox==$NETBOX_VERSION` (the PyPI wheel, i.e. the real
# server, gunicorn included). Every process runs chrooted into that root inside a private
# mount namespace (unshare -m), so the /proc, /dev and run-dir mounts never appear on the
# host and disappear with the processes. Each run gets a fresh PostgreSQL cluster and a
# fresh Redis in $NETBOX_RUN_DIR; the migrated empty database is cached as a pg_dump so
# only the very first run pays for the migrations.
#
# Env (all optional):
#   NETBOX_VERSION            default 4.7.3
#   NETBOX_CACHE              default ${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/netbox
#   NETBOX_RUN_DIR            default /tmp/netbox-run
#   NETBOX_PORT               default 18000 (HTTP, 127.0.0.1)
#   NETBOX_PG_PORT            default 15432 (127.0.0.1)
#   NETBOX_REDIS_PORT         default 16379 (127.0.0.1)
#       A port given explicitly must be free; a default that is taken is bumped to the next free one.
#   NETBOX_GUNICORN_WORKERS   default 4
#   NETBOX_GUNICORN_THREADS   default 4
#   NETBOX_GUNICORN_PRELOAD   default 1 (gunicorn preload_app)
#   NETBOX_DEBIAN_MIRROR      default http://deb.debian.org/debian
#   NETBOX_KEEP_ON_FAILURE=1  leave processes and run dir in place when up.sh fails
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"

RUN="$NETBOX_RUN_DIR"
WORKERS="${NETBOX_GUNICORN_WORKERS:-4}"
THREADS="${NETBOX_GUNICORN_THREADS:-4}"
PRELOAD="${NETBOX_GUNICORN_PRELOAD:-1}"
NB_ADMIN_USER=admin
NB_RO_USER=readonly

# ---------------------------------------------------------------------------------------
# helpers

HOST_APT_UPDATED=0
ensure_host_pkgs() { # cmd:package ...
	local want=() spec
	for spec in "$@"; do
		command -v "${spec%%:*}" >/dev/null 2>&1 || want+=("${spec#*:}")
	done
	[ "${#want[@]}" -gt 0 ] || return 0
	log "installing host packages: ${want[*]}"
	if [ "$HOST_APT_UPDATED" -eq 0 ]; then
		apt-get update -qq >&2 || die "apt-get update failed"
		HOST_APT_UPDATED=1
	fi
	apt-get install -y -qq --no-install-recommends "${want[@]}" >&2 || die "apt-get install ${want[*]} failed"
}

# uid:gid of a user inside the given root.
root_ids() {
	local rootfs="$1" user="$2" ids
	ids="$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4 }' "$rootfs/etc/passwd")"
	[ -n "$ids" ] || die "user $user not found in $rootfs/etc/passwd"
	echo "$ids"
}

# Extra environment passed into the root during the build (proxies, pip index, CA).
BUILD_ENV=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
	PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
	[ -z "${!v:-}" ] || BUILD_ENV+=("$v=${!v}")
done

# chroot_run ROOTFS BIND_DIR_OR_EMPTY USER CMD...
# Runs CMD chrooted into ROOTFS as USER inside a private mount namespace with /proc, /dev
# (and BIND_DIR at /nbrun) mounted. Nothing leaks to the host mount table. The lock fds
# (8, 9) are closed so daemons never inherit them.
chroot_run() {
	local rootfs="$1" bind="$2" user="$3" ids
	shift 3
	ids="$(root_ids "$rootfs" "$user")"
	env -i \
		PATH="$NB_IN_VENV/bin:$PG_BIN_IN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		HOME="${CHROOT_HOME:-/root}" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
		TMPDIR="${CHROOT_TMPDIR:-/tmp}" NETBOX_ROOT="$NB_IN_RUN/netbox" \
		"$NB_MARK" ${CHROOT_ENV[@]+"${CHROOT_ENV[@]}"} \
		/usr/bin/unshare --mount --propagation private -- /bin/bash -c '
			set -e
			r="$1" b="$2" ids="$3"; shift 3
			mount --bind /proc "$r/proc"
			mount --rbind /dev "$r/dev"
			if [ -n "$b" ]; then mount --bind "$b" "$r'"$NB_IN_RUN"'"; fi
			exec /usr/sbin/chroot --userspec="$ids" "$r" "$@"
		' _ "$rootfs" "$bind" "$ids" "$@" 8>&- 9>&-
}
CHROOT_ENV=()
PG_BIN_IN=/usr/lib/postgresql/current/bin # replaced once the root exists

# in_run USER CMD...: run inside the cached root with the run dir at /nbrun.
in_run() {
	local user="$1"
	shift
	CHROOT_HOME="$NB_IN_RUN/tmp" CHROOT_TMPDIR="$NB_IN_RUN/tmp" chroot_run "$NB_ROOTFS" "$RUN" "$user" "$@"
}

show_log() { # file [lines]
	[ -f "$1" ] || return 0
	printf -- '----- last lines of %s -----\n' "$1" >&2
	tail -n "${2:-40}" "$1" >&2 || true
	printf -- '-----\n' >&2
}

rand_alnum() { # length
	local s=""
	while [ "${#s}" -lt "$1" ]; do
		s+="$(head -c 512 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9')"
	done
	printf '%s' "${s:0:$1}"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

USED_PORTS=" "
pick_port() { # VAR default  -> sets PICKED
	local var="$1" def="$2" p
	if [ -n "${!var:-}" ]; then
		p="${!var}"
		[[ "$p" =~ ^[0-9]+$ ]] || die "$var=$p is not a port number"
		if port_in_use "$p" || [[ "$USED_PORTS" == *" $p "* ]]; then
			die "$var=$p: port already in use on 127.0.0.1"
		fi
	else
		p="$def"
		while port_in_use "$p" || [[ "$USED_PORTS" == *" $p "* ]]; do
			p=$((p + 1))
			[ "$p" -lt $((def + 500)) ] || die "no free port found in $def..$((def + 500)) for $var"
		done
	fi
	USED_PORTS+="$p "
	PICKED="$p"
}

# ---------------------------------------------------------------------------------------
# build (once per NetBox version), cached under $NETBOX_CACHE

BUILD_TMP=""
cleanup_build_tmp() {
	[ -n "$BUILD_TMP" ] && [ -d "$BUILD_TMP" ] || return 0
	if [ -n "$(mounts_below "$BUILD_TMP")" ]; then
		log "WARNING: mounts left below $BUILD_TMP, not removing it"
		return 0
	fi
	rm -rf --one-file-system "$BUILD_TMP"
}

build_root() {
	[ -f "$NB_KEYDIR/.complete" ] && return 0
	mkdir -p "$NETBOX_CACHE"
	exec 8>"$NETBOX_CACHE/.build.lock"
	if ! flock -n 8; then
		log "another run is building the NetBox root; waiting for $NETBOX_CACHE/.build.lock"
		flock -w 3600 8 || die "timed out waiting for the build lock"
	fi
	if [ -f "$NB_KEYDIR/.complete" ]; then
		exec 8>&-
		return 0
	fi

	ensure_host_pkgs debootstrap:debootstrap
	BUILD_TMP="$(mktemp -d "$NETBOX_CACHE/.build-$NB_KEY.XXXXXX")"
	local r="$BUILD_TMP/rootfs" blog="$BUILD_TMP/build.log"
	log "building $NB_KEY in $BUILD_TMP (log: $blog)"

	log "debootstrap --variant=minbase $NB_SUITE (takes ~1 min)"
	# In a private mount namespace too: debootstrap mounts /proc and /sys in the target.
	if ! unshare --mount --propagation private -- \
		debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
		"$NB_SUITE" "$r" "$NB_MIRROR" >>"$blog" 2>&1 8>&- 9>&-; then
		show_log "$blog"
		die "debootstrap failed (mirror $NB_MIRROR reachable?)"
	fi

	# Never start services from maintainer scripts; do not create a default PG cluster.
	printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 755 "$r/usr/sbin/policy-rc.d"
	mkdir -p "$r/etc/postgresql-common" "$r$NB_IN_RUN" "$r/opt/netbox"
	echo 'create_main_cluster = false' >"$r/etc/postgresql-common/createcluster.conf"
	cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true

	# Trust the same extra CAs as the host (e.g. a TLS-intercepting egress proxy), for pip.
	if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
		cp -rL /usr/local/share/ca-certificates/. "$r/usr/local/share/ca-certificates/"
	fi
	chroot_run "$r" "" root update-ca-certificates >>"$blog" 2>&1 || { show_log "$blog"; die "update-ca-certificates failed"; }
	CHROOT_ENV=(DEBIAN_FRONTEND=noninteractive ${BUILD_ENV[@]+"${BUILD_ENV[@]}"})
	if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
		cat "$r/etc/ssl/certs/ca-certificates.crt" "$PIP_CERT" >"$r/etc/ssl/certs/pip-ca.crt"
		CHROOT_ENV+=(PIP_CERT=/etc/ssl/certs/pip-ca.crt)
	fi

	log "apt: postgresql, redis-server and build deps for psycopg[c] inside the root"
	{
		chroot_run "$r" "" root apt-get update -q &&
			chroot_run "$r" "" root apt-get install -y -q --no-install-recommends \
				postgresql redis-server gcc libc6-dev python3-dev libpq-dev &&
			chroot_run "$r" "" root apt-get clean
	} >>"$blog" 2>&1 || { show_log "$blog"; die "apt-get inside the $NB_SUITE root failed"; }
	chroot_run "$r" "" root useradd --system --home-dir /opt/netbox --no-create-home \
		--shell /usr/sbin/nologin netbox >>"$blog" 2>&1 || { show_log "$blog"; die "useradd netbox failed"; }

	log "pip install netbox==$NETBOX_VERSION into a venv (builds psycopg-c; ~1 min)"
	{
		chroot_run "$r" "" root python3 -m venv "$NB_IN_VENV" &&
			chroot_run "$r" "" root "$NB_IN_VENV/bin/pip" install --no-cache-dir --disable-pip-version-check \
				"netbox==$NETBOX_VERSION"
	} >>"$blog" 2>&1 || { show_log "$blog"; die "pip install netbox==$NETBOX_VERSION failed"; }
	local got
	got="$(chroot_run "$r" "" root "$NB_IN_VENV/bin/netbox" version 2>>"$blog")" || { show_log "$blog"; die "netbox version failed"; }
	[ "$got" = "$NETBOX_VERSION" ] || die "installed NetBox reports version '$got', expected $NETBOX_VERSION"

	# Static files go to <NETBOX_ROOT>/static (not configurable); collect them once, here,
	# with a throw-away configuration (collectstatic needs settings but no DB/Redis).
	log "collectstatic (once)"
	mkdir -p "$r/opt/netbox/conf"
	cat >"$r/opt/netbox/conf/configuration.py" <<-EOF
		ALLOWED_HOSTS = ['*']
		DATABASES = {'default': {'ENGINE': 'django.db.backends.postgresql', 'NAME': 'netbox', 'HOST': '127.0.0.1'}}
		REDIS = {'tasks': {'HOST': '127.0.0.1', 'PORT': 1, 'DATABASE': 0}, 'caching': {'HOST': '127.0.0.1', 'PORT': 1, 'DATABASE': 1}}
		SECRET_KEY = '$(rand_alnum 60)'
	EOF
	CHROOT_ENV=(NETBOX_ROOT=/opt/netbox)
	if ! chroot_run "$r" "" root "$NB_IN_VENV/bin/netbox" collectstatic --no-input >>"$blog" 2>&1; then
		show_log "$blog"
		die "collectstatic failed"
	fi
	CHROOT_ENV=()
	rm -rf "$r/opt/netbox/conf"
	[ -d "$r$NB_IN_STATIC" ] || die "collectstatic did not create $NB_IN_STATIC"
	chmod -R a+rX "$r$NB_IN_STATIC"

	# Publish atomically.
	if [ -e "$NB_KEYDIR" ]; then
		[ -z "$(mounts_below "$NB_KEYDIR")" ] || die "mounts present below stale $NB_KEYDIR"
		rm -rf --one-file-system "$NB_KEYDIR"
	fi
	mv "$BUILD_TMP" "$NB_KEYDIR"
	BUILD_TMP=""
	touch "$NB_KEYDIR/.complete"
	exec 8>&-
	log "built and cached $NB_KEYDIR ($(du -sh "$NB_KEYDIR" | cut -f1))"
}

# ---------------------------------------------------------------------------------------
# run

already_up() {
	[ -f "$RUN/env" ] && [ -f "$RUN/key" ] && [ "$(cat "$RUN/key")" = "$NB_KEY" ] || return 1
	local url tok code
	url="$(sed -n 's/^NETBOX_URL=//p' "$RUN/env")"
	tok="$(sed -n 's/^NETBOX_TOKEN_V1=//p' "$RUN/env")"
	code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Token $tok" "$url/api/status/" || true)"
	[ "$code" = 200 ]
}

STARTED=0
on_exit() {
	local rc=$?
	cleanup_build_tmp
	if [ "$rc" -ne 0 ] && [ "$STARTED" -eq 1 ]; then
		log "up.sh failed (exit $rc)"
		if [ "${NETBOX_KEEP_ON_FAILURE:-0}" = 1 ]; then
			log "NETBOX_KEEP_ON_FAILURE=1: leaving $RUN and its processes; run down.sh to clean up"
		else
			local keep="${RUN}-failed-logs"
			rm -rf "$keep" && cp -r "$RUN/log" "$keep" 2>/dev/null && log "logs copied to $keep"
			"$HERE/down.sh" >&2 8>&- 9>&- || true
		fi
	fi
}

start_instance() {
	STARTED=1
	local pg_major
	pg_major="$(ls "$NB_ROOTFS/usr/lib/postgresql" | sort -n | tail -n1)"
	[ -n "$pg_major" ] || die "no PostgreSQL found in $NB_ROOTFS"
	PG_BIN_IN="/usr/lib/postgresql/$pg_major/bin"

	pick_port NETBOX_PORT 18000
	local http_port="$PICKED"
	pick_port NETBOX_PG_PORT 15432
	local pg_port="$PICKED"
	pick_port NETBOX_REDIS_PORT 16379
	local redis_port="$PICKED"
	log "ports: http=$http_port postgres=$pg_port redis=$redis_port (127.0.0.1 only)"

	local pg_ids redis_ids nb_ids
	pg_ids="$(root_ids "$NB_ROOTFS" postgres)"
	redis_ids="$(root_ids "$NB_ROOTFS" redis)"
	nb_ids="$(root_ids "$NB_ROOTFS" netbox)"

	mkdir -p "$RUN"/{pg,redis,netbox/conf,netbox/media,netbox/reports,netbox/scripts,log,tmp}
	chmod 755 "$RUN"
	chmod 1777 "$RUN/tmp"
	chmod 700 "$RUN/pg"
	echo "$NB_KEY" >"$RUN/key"
	: >"$RUN/log/postgres.log"
	: >"$RUN/log/redis.log"
	: >"$RUN/log/gunicorn-error.log"
	: >"$RUN/log/gunicorn-access.log"
	chown -R "$pg_ids" "$RUN/pg" "$RUN/log/postgres.log"
	chown -R "$redis_ids" "$RUN/redis" "$RUN/log/redis.log"
	chown -R "$nb_ids" "$RUN/netbox" "$RUN/log/gunicorn-error.log" "$RUN/log/gunicorn-access.log"
	ln -sfn "$NB_IN_STATIC" "$RUN/netbox/static"

	local pg_super_pw nb_db_pw secret_key pepper admin_pw
	pg_super_pw="$(rand_alnum 32)"
	nb_db_pw="$(rand_alnum 32)"
	secret_key="$(rand_alnum 64)"
	pepper="$(rand_alnum 64)"
	admin_pw="$(rand_alnum 24)"

	# --- PostgreSQL ------------------------------------------------------------------
	log "initdb + start PostgreSQL $pg_major"
	(umask 077 && printf '%s\n' "$pg_super_pw" >"$RUN/pg/pwfile")
	chown "$pg_ids" "$RUN/pg/pwfile"
	mkdir -p "$RUN/pg/sock" && chown "$pg_ids" "$RUN/pg/sock"
	in_run postgres initdb -D "$NB_IN_RUN/pg/data" -U postgres --pwfile="$NB_IN_RUN/pg/pwfile" \
		--auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 --no-sync \
		>"$RUN/log/initdb.log" 2>&1 || { show_log "$RUN/log/initdb.log"; die "initdb failed"; }
	rm -f "$RUN/pg/pwfile"
	cat >>"$RUN/pg/data/postgresql.conf" <<-EOF

		# --- hack/netbox/up.sh: disposable test instance ---
		listen_addresses = '127.0.0.1'
		port = $pg_port
		unix_socket_directories = '$NB_IN_RUN/pg/sock'
		max_connections = 200
		shared_buffers = 256MB
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		jit = off
	EOF
	in_run postgres pg_ctl -D "$NB_IN_RUN/pg/data" -l "$NB_IN_RUN/log/postgres.log" -w -t 60 -s start \
		</dev/null >>"$RUN/log/pg_ctl.log" 2>&1 || {
		show_log "$RUN/log/pg_ctl.log"
		show_log "$RUN/log/postgres.log"
		die "PostgreSQL did not start"
	}
	local psql=(psql -X -q -v ON_ERROR_STOP=1 -h "$NB_IN_RUN/pg/sock" -p "$pg_port" -U postgres)
	in_run postgres "${psql[@]}" -d postgres \
		-c "CREATE ROLE netbox LOGIN PASSWORD '$nb_db_pw'" \
		-c "CREATE DATABASE netbox OWNER netbox" >>"$RUN/log/pg_ctl.log" 2>&1 ||
		{ show_log "$RUN/log/pg_ctl.log"; die "creating the netbox role/database failed"; }

	# --- Redis -------------------------------------------------------------------------
	log "start Redis"
	in_run redis redis-server --bind 127.0.0.1 --port "$redis_port" --protected-mode yes \
		--save "" --appendonly no --daemonize yes --pidfile "$NB_IN_RUN/redis/redis.pid" \
		--logfile "$NB_IN_RUN/log/redis.log" --dir "$NB_IN_RUN/redis" \
		</dev/null >>"$RUN/log/redis-start.log" 2>&1 || { show_log "$RUN/log/redis.log"; die "Redis did not start"; }

	# --- NetBox configuration ---------------------------------------------------------------
	: >"$RUN/netbox/conf/__init__.py"
	(umask 077 && cat >"$RUN/netbox/conf/configuration.py") <<-EOF
		# Generated by hack/netbox/up.sh for a disposable, loopback-only test instance.
		ALLOWED_HOSTS = ['*']
		DATABASES = {
		    'default': {
		        'ENGINE': 'django.db.backends.postgresql',
		        'NAME': 'netbox',
		        'USER': 'netbox',
		        'PASSWORD': '$nb_db_pw',
		        'HOST': '127.0.0.1',
		        'PORT': '$pg_port',
		        'CONN_MAX_AGE': 300,
		        'CONN_HEALTH_CHECKS': True,
		    }
		}
		REDIS = {
		    'tasks': {'HOST': '127.0.0.1', 'PORT': $redis_port, 'USERNAME': '', 'PASSWORD': '', 'DATABASE': 0, 'SSL': False},
		    'caching': {'HOST': '127.0.0.1', 'PORT': $redis_port, 'USERNAME': '', 'PASSWORD': '', 'DATABASE': 1, 'SSL': False},
		}
		SECRET_KEY = '$secret_key'
		API_TOKEN_PEPPERS = {1: '$pepper'}
		DEBUG = False
		CENSUS_REPORTING_ENABLED = False
		RELEASE_CHECK_URL = None
		TIME_ZONE = 'UTC'
	EOF
	chown -R "$nb_ids" "$RUN/netbox/conf"

	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(in_run redis redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
		sleep 0.1
	done
	[ "$i" -lt 100 ] || { show_log "$RUN/log/redis.log"; die "Redis does not answer PING"; }

	# --- schema: restore the cached migrated empty DB, or migrate once and cache it ---------
	if [ -s "$NB_DUMP" ]; then
		log "restoring cached migrated DB ($(basename "$NB_DUMP"))"
		cp "$NB_DUMP" "$RUN/pg/empty.pgdump"
		chown "$pg_ids" "$RUN/pg/empty.pgdump"
		in_run postgres pg_restore -h "$NB_IN_RUN/pg/sock" -p "$pg_port" -U postgres -d netbox \
			--role=netbox --no-owner --no-privileges --exit-on-error -j 2 "$NB_IN_RUN/pg/empty.pgdump" \
			>"$RUN/log/restore.log" 2>&1 || { show_log "$RUN/log/restore.log"; die "pg_restore failed"; }
		rm -f "$RUN/pg/empty.pgdump"
	else
		log "no cached DB dump yet: running 'netbox upgrade' on the empty DB (migrations, a few minutes)"
		in_run netbox netbox upgrade --no-input --skip-static >"$RUN/log/upgrade.log" 2>&1 ||
			{ show_log "$RUN/log/upgrade.log"; die "netbox upgrade failed"; }
		local tmpdump="$NB_DUMP.tmp.$$"
		in_run postgres pg_dump -h "$NB_IN_RUN/pg/sock" -p "$pg_port" -U postgres -Fc netbox \
			>"$tmpdump" 2>>"$RUN/log/upgrade.log" || { rm -f "$tmpdump"; die "pg_dump failed"; }
		mv -f "$tmpdump" "$NB_DUMP"
		log "cached migrated DB dump: $NB_DUMP ($(du -h "$NB_DUMP" | cut -f1))"
	fi

	# --- gunicorn -------------------------------------------------------------------------
	log "start gunicorn ($WORKERS workers x $THREADS threads) on 127.0.0.1:$http_port"
	cat >"$RUN/netbox/gunicorn.py" <<-EOF
		bind = '127.0.0.1:$http_port'
		workers = $WORKERS
		threads = $THREADS
		worker_class = 'gthread'
		timeout = 120
		graceful_timeout = 10
		backlog = 2048
		max_requests = 5000
		max_requests_jitter = 500
		daemon = True
		pidfile = '$NB_IN_RUN/netbox/gunicorn.pid'
		accesslog = '$NB_IN_RUN/log/gunicorn-access.log'
		errorlog = '$NB_IN_RUN/log/gunicorn-error.log'
		capture_output = True
		control_socket_disable = True
		# Import Django/NetBox once in the master and fork the workers (start-up in ~3 s
		# instead of every worker importing NetBox concurrently). Set NETBOX_GUNICORN_PRELOAD=0
		# to load the app in each worker instead, like the upstream contrib/gunicorn.py.
		preload_app = $([ "$PRELOAD" = 1 ] && echo True || echo False)
	EOF
	chown "$nb_ids" "$RUN/netbox/gunicorn.py"
	in_run netbox gunicorn --config "$NB_IN_RUN/netbox/gunicorn.py" netbox.wsgi \
		</dev/null >>"$RUN/log/gunicorn-start.log" 2>&1 ||
		{ show_log "$RUN/log/gunicorn-start.log"; show_log "$RUN/log/gunicorn-error.log"; die "gunicorn failed to start"; }

	# --- users, permissions, tokens (while gunicorn boots) -----------------------------------
	log "provisioning superuser, read-only user and tokens"
	cp "$HERE/provision.py" "$RUN/netbox/provision.py"
	chown "$nb_ids" "$RUN/netbox/provision.py"
	local tokens
	CHROOT_ENV=("NB_ADMIN_USER=$NB_ADMIN_USER" "NB_ADMIN_PASSWORD=$admin_pw" "NB_RO_USER=$NB_RO_USER")
	tokens="$(in_run netbox python "$NB_IN_RUN/netbox/provision.py" 2>"$RUN/log/provision.log")" ||
		{ show_log "$RUN/log/provision.log"; die "provisioning failed"; }
	CHROOT_ENV=()
	local v1 v2 ro
	v1="$(sed -n 's/^NETBOX_TOKEN_V1=//p' <<<"$tokens")"
	v2="$(sed -n 's/^NETBOX_TOKEN_V2=//p' <<<"$tokens")"
	ro="$(sed -n 's/^NETBOX_TOKEN_READONLY=//p' <<<"$tokens")"
	[[ "$v1" =~ ^[0-9a-f]{40}$ ]] || die "unexpected v1 token format from provision.py"
	[[ "$v2" =~ ^nbt_[A-Za-z0-9]{12}\.[A-Za-z0-9]{40}$ ]] || die "unexpected v2 token format from provision.py"
	[[ "$ro" =~ ^[0-9a-f]{40}$ ]] || die "unexpected read-only token format from provision.py"

	local url="http://127.0.0.1:$http_port" code="" pid alive
	log "waiting for $url/api/status/"
	for ((i = 0; i < 1200; i++)); do
		code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Token $v1" "$url/api/status/" || true)"
		[ "$code" = 200 ] && break
		if [ $((i % 10)) -eq 9 ]; then # still alive? (no pid file yet while the master preloads)
			alive=0
			for pid in $(marked_pids); do
				if pid_matches "$pid" gunicorn; then alive=1 && break; fi
			done
			[ "$alive" = 1 ] || { show_log "$RUN/log/gunicorn-error.log"; die "gunicorn exited"; }
		fi
		sleep 0.1
	done
	[ "$code" = 200 ] || { show_log "$RUN/log/gunicorn-error.log"; die "NetBox did not answer 200 on /api/status/ within 120s (last: $code)"; }

	(umask 077 && cat >"$RUN/env.tmp") <<-EOF
		NETBOX_URL=$url
		NETBOX_TOKEN_V1=$v1
		NETBOX_TOKEN_V2=$v2
		NETBOX_TOKEN_READONLY=$ro
		NETBOX_VERSION=$NETBOX_VERSION
		NETBOX_USERNAME=$NB_ADMIN_USER
		NETBOX_PASSWORD=$admin_pw
		NETBOX_READONLY_USERNAME=$NB_RO_USER
	EOF
	mv -f "$RUN/env.tmp" "$RUN/env"
	STARTED=0
	log "NetBox $NETBOX_VERSION is up at $url (env: $RUN/env)"
}

main() {
	require_root
	case "$NETBOX_RUN_DIR" in
	/ | /tmp | /root | /home | /var | /usr | "") die "refusing to use NETBOX_RUN_DIR=$NETBOX_RUN_DIR" ;;
	esac
	[[ "$WORKERS" =~ ^[1-9][0-9]*$ && "$THREADS" =~ ^[1-9][0-9]*$ ]] || die "bad NETBOX_GUNICORN_WORKERS/THREADS"
	for c in unshare flock chroot mount awk base64; do
		command -v "$c" >/dev/null || die "missing host command: $c"
	done
	ensure_host_pkgs curl:curl

	mkdir -p "$(dirname "$RUN")"
	exec 9>"$RUN.lock"
	if ! flock -n 9; then
		log "another up.sh holds $RUN.lock; waiting"
		flock -w 1800 9 || die "timed out waiting for $RUN.lock"
	fi
	trap on_exit EXIT

	if already_up; then
		log "NetBox is already running from $RUN"
		echo "$RUN/env"
		return 0
	fi
	if [ -e "$RUN" ]; then
		log "cleaning up previous run in $RUN"
		"$HERE/down.sh" >&2 8>&- 9>&-
	fi

	build_root
	start_instance
	echo "$RUN/env"
}

main "$@"
