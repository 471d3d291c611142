#!/usr/bin/env bash
# Installs promtool and the Prometheus server from Debian's prometheus
# package, for `make test-alerts` and test/prometheus. Does nothing when
# both are there.
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "promtool or prometheus is missing and this is not a Debian-like system: install Prometheus (https://prometheus.io/download/)" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	sudo=sudo
fi
$sudo apt-get update -qq
# Only the package: its recommends (node exporter, …) are not needed.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null
command -v prometheus >/dev/null
