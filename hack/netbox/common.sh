# shellcheck shell=bash
# Shared settings and helpers for hack/netbox/up.sh and hack/netbox/down.sh.
# Sourced, not executed.

NETBOX_VERSION="${NETBOX_VERSION:-4.7.3}"
# Bump when the build recipe below changes in a way that needs a rebuilt root.
NB_RECIPE_REV=1
NB_SUITE="${NETBOX_DEBIAN_SUITE:-trixie}"
NB_MIRROR="${NETBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

NETBOX_CACHE="${NETBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/netbox}"
NETBOX_RUN_DIR="${NETBOX_RUN_DIR:-/tmp/netbox-run}"
# Normalise (no trailing slash) so string comparisons against /proc/mounts work.
NETBOX_RUN_DIR="${NETBOX_RUN_DIR%/}"
NETBOX_CACHE="${NETBOX_CACHE%/}"

# Everything that depends on the NetBox version (and the recipe) lives under this key.
NB_KEY="netbox-${NETBOX_VERSION}-${NB_SUITE}-r${NB_RECIPE_REV}"
NB_KEYDIR="$NETBOX_CACHE/$NB_KEY"
NB_ROOTFS="$NB_KEYDIR/rootfs"
NB_DUMP="$NB_KEYDIR/migrated-empty-db.pgdump"

# Paths as seen from inside the root.
NB_IN_RUN=/nbrun                 # the run dir is bind-mounted here (private mount namespace)
NB_IN_VENV=/opt/netbox/venv
NB_IN_STATIC=/opt/netbox/static  # collected once at build time

# Marker put in the environment of every process up.sh starts; down.sh uses it to sweep
# leftovers that are not covered by a pid file.
NB_MARK="NETBOX_HARNESS_RUN=$NETBOX_RUN_DIR"

nb_t0="${nb_t0:-$(date +%s)}"
log() { printf '[netbox %4ss] %s\n' "$(($(date +%s) - nb_t0))" "$*" >&2; }
die() { printf '[netbox] ERROR: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (needs debootstrap, chroot, mount namespaces)"
}

# Is this pid alive and does its command line contain the given word?
pid_matches() {
	local pid="$1" word="$2"
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "$word"
}

# Alive and not a zombie? (Daemons are re-parented to pid 1, which may reap them late.)
pid_alive() {
	local st
	st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# Send sig to pid, wait up to secs for it to go away, then SIGKILL it.
stop_pid() {
	local pid="$1" sig="$2" secs="$3" what="$4" i
	pid_alive "$pid" || return 0
	log "stopping $what (pid $pid, SIG$sig)"
	kill "-$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.1
	done
	log "$what still running after ${secs}s, sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

# Processes carrying our marker in their environment (minus ourselves).
marked_pids() {
	local p
	for p in /proc/[0-9]*; do
		p="${p#/proc/}"
		[ "$p" = "$$" ] && continue
		pid_alive "$p" || continue
		if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF -- "$NB_MARK"; then
			echo "$p"
		fi
	done
}

# Mount points (host namespace) below the given directory, deepest first.
mounts_below() {
	local dir="$1"
	awk -v d="$dir" '{ m = $2; gsub(/\\040/, " ", m); if (m == d || index(m, d "/") == 1) print m }' /proc/self/mounts | sort -r
}
