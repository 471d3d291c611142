#!/usr/bin/env bash
# Give a running NetBox (hack/netbox/up.sh) a user that holds exactly the permissions
# docs/netbox.md lists, made as an administrator would make them: through NetBox's REST API.
#
#   hack/netbox/least-privilege.sh ENV_FILE           -> prints the path of a second env file on stdout
#   hack/netbox/least-privilege.sh ENV_FILE carving   -> the same for a user that also carves:
#       docs/subnets.md's permissions (prefixes, and view on prefix roles and sites), in
#       env.least-privilege-carving
#
# The printed env file is ENV_FILE with NETBOX_TOKEN_V1 and NETBOX_TOKEN_V2 replaced by
# write-enabled v1 and v2 tokens of that user, and NETBOX_TOKEN_ADMIN set to the
# superuser's v2 token: test/netboxtarget seeds prefixes, VRFs and foreign records with
# the administrator's token and hands the provider only the least-privilege ones. Sourced
# instead of ENV_FILE, it runs the suites with the permissions the docs promise are enough.
#
# Like an administrator following docs/netbox.md, it also creates the provider's tag and
# custom field, because the permissions grant no "add" on tags or custom fields.
#
# Running it again reuses the user, replaces its permissions and issues new tokens.
set -euo pipefail

die() { printf '[least-privilege] ERROR: %s\n' "$*" >&2; exit 1; }
log() { printf '[least-privilege] %s\n' "$*" >&2; }

ENV_FILE="${1:-}"
MODE="${2:-}"
[ -n "$ENV_FILE" ] && [ -f "$ENV_FILE" ] || die "usage: $0 ENV_FILE [carving] (ENV_FILE: the file hack/netbox/up.sh prints)"
[ -z "$MODE" ] || [ "$MODE" = carving ] || die "unknown mode $MODE (want carving or nothing)"
command -v jq >/dev/null || die "jq is needed (apt-get install jq)"
command -v curl >/dev/null || die "curl is needed"

URL="$(sed -n 's/^NETBOX_URL=//p' "$ENV_FILE")"
ADMIN="$(sed -n 's/^NETBOX_TOKEN_V2=//p' "$ENV_FILE")"
[ -n "$URL" ] && [ -n "$ADMIN" ] || die "$ENV_FILE lacks NETBOX_URL or NETBOX_TOKEN_V2"
# A second run gets ENV_FILE's own admin token back, never a least-privilege one.
if grep -q '^NETBOX_TOKEN_ADMIN=' "$ENV_FILE"; then
	ADMIN="$(sed -n 's/^NETBOX_TOKEN_ADMIN=//p' "$ENV_FILE")"
fi
USERNAME="${NETBOX_LEAST_PRIVILEGE_USER:-capi-ipam}"
OUT="$(dirname "$ENV_FILE")/env.least-privilege"
if [ "$MODE" = carving ]; then
	USERNAME="$USERNAME-carving"
	OUT="$OUT-carving"
fi

# api METHOD PATH [JSON]: the answer's body; fails on any status but 2xx.
api() {
	local method="$1" path="$2" body="${3:-}" out code
	out="$(mktemp)"
	code="$(curl -sS -o "$out" -w '%{http_code}' -X "$method" \
		-H "Authorization: Bearer $ADMIN" -H 'Accept: application/json' -H 'Content-Type: application/json' \
		${body:+--data "$body"} "$URL$path")" || { rm -f "$out"; die "$method $path: curl failed"; }
	if [[ "$code" != 2* ]]; then
		log "$method $path: HTTP $code: $(head -c 500 "$out")"
		rm -f "$out"
		return 1
	fi
	cat "$out"
	rm -f "$out"
}

first_id() { jq -r '.results[0].id // empty'; }

# --- the user -------------------------------------------------------------------------
uid="$(api GET "/api/users/users/?username=$USERNAME" | first_id)"
if [ -z "$uid" ]; then
	# A password nobody knows: the user only ever authenticates with its tokens.
	pw="$(head -c 48 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9')"
	uid="$(api POST /api/users/users/ "$(jq -nc --arg u "$USERNAME" --arg p "$pw" '{username: $u, password: $p}')" | jq -r .id)"
	log "created user $USERNAME (id $uid)"
fi

# --- the permissions: exactly the table in docs/netbox.md -------------------------------
# NetBox grants each action of a permission on each of its object types, so the two
# rows with different actions are two permissions.
grant() { # name actions-json object-types-json
	local name="$1" actions="$2" types="$3" old
	old="$(api GET "/api/users/permissions/?name=$name" | first_id)"
	[ -z "$old" ] || api DELETE "/api/users/permissions/$old/" >/dev/null
	api POST /api/users/permissions/ "$(jq -nc --arg n "$name" --argjson a "$actions" --argjson t "$types" --argjson u "$uid" \
		'{name: $n, description: "docs/netbox.md (hack/netbox/least-privilege.sh)", enabled: true, actions: $a, object_types: $t, users: [$u]}')" >/dev/null
	log "granted $name: $(jq -r 'join(",")' <<<"$actions") on $(jq -r 'join(",")' <<<"$types")"
}
if [ "$MODE" = carving ]; then
	# docs/subnets.md: prefixes are carved, deleted and re-marked; a child's
	# role and site are looked up (the suites' scopes are sites).
	grant "$USERNAME-view" '["view"]' \
		'["ipam.iprange","ipam.vrf","ipam.role","dcim.site","extras.tag","extras.customfield","tenancy.tenant"]'
	grant "$USERNAME-prefixes" '["view","add","change","delete"]' '["ipam.prefix"]'
else
	grant "$USERNAME-view" '["view"]' \
		'["ipam.prefix","ipam.iprange","ipam.vrf","extras.tag","extras.customfield","tenancy.tenant"]'
fi
grant "$USERNAME-ip-addresses" '["view","add","change","delete"]' '["ipam.ipaddress"]'

# --- the tag and the custom field, as docs/netbox.md tells an administrator ----------------
if [ -z "$(api GET '/api/extras/tags/?slug=cluster-api-ipam' | first_id)" ]; then
	api POST /api/extras/tags/ '{"name":"cluster-api-ipam","slug":"cluster-api-ipam","object_types":["ipam.ipaddress"]}' >/dev/null
	log "created tag cluster-api-ipam"
fi
if [ -z "$(api GET '/api/extras/custom-fields/?name=capi_ipam_claim' | first_id)" ]; then
	api POST /api/extras/custom-fields/ '{"name":"capi_ipam_claim","label":"Cluster API claim","type":"text","object_types":["ipam.ipaddress","ipam.prefix"],"filter_logic":"exact","required":false}' >/dev/null
	log "created custom field capi_ipam_claim"
fi

# --- write-enabled tokens, one of each version ------------------------------------------
token() { # version
	api POST /api/users/tokens/ "$(jq -nc --argjson u "$uid" --argjson v "$1" \
		'{user: $u, version: $v, write_enabled: true, description: "least privilege (hack/netbox/least-privilege.sh)"}')"
}
v1="$(token 1 | jq -r .token)"
v2="$(token 2 | jq -r '"nbt_" + .key + "." + .token')"
[ -n "$v1" ] && [ "$v1" != null ] || die "NetBox returned no v1 token"
[[ "$v2" =~ ^nbt_[A-Za-z0-9]+\.[A-Za-z0-9]+$ ]] || die "unexpected v2 token from NetBox"

(
	umask 077
	grep -v -e '^NETBOX_TOKEN_V1=' -e '^NETBOX_TOKEN_V2=' -e '^NETBOX_TOKEN_ADMIN=' -e '^NETBOX_LEAST_PRIVILEGE_USER=' "$ENV_FILE"
	printf 'NETBOX_TOKEN_ADMIN=%s\nNETBOX_TOKEN_V1=%s\nNETBOX_TOKEN_V2=%s\nNETBOX_LEAST_PRIVILEGE_USER=%s\n' "$ADMIN" "$v1" "$v2" "$USERNAME"
) >"$OUT.tmp"
mv -f "$OUT.tmp" "$OUT"
log "tokens of $USERNAME in $OUT"
echo "$OUT"
