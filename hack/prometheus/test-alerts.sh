#!/usr/bin/env bash
# Checks the rules config/prometheus ships in its PrometheusRule and runs
# their unit tests (test/prometheus/rules_test.yaml) with promtool. promtool
# reads plain rule files, so the PrometheusRule's spec is written out as one.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# spec: of the PrometheusRule is a rule file's content.
sed -n '/^spec:$/,$p' config/prometheus/rules.yaml | tail -n +2 | sed 's/^  //' >"$out/rules.yaml"
promtool check rules "$out/rules.yaml"
cp test/prometheus/rules_test.yaml "$out/"
promtool test rules "$out/rules_test.yaml"
