#!/usr/bin/env bash
# Signs a sample event with the development secret of the `demo` source in queuebox.yaml (Standard Webhooks:
# webhook-id, webhook-timestamp, webhook-signature = v1,base64(HMAC-SHA256(key, "id.timestamp.body"))) and posts
# it to the local runtime with curl. Needs bash, curl, openssl and base64.
#
#   bash scripts/demo-webhook.sh                    # an order.created event with a new webhook-id
#   bash scripts/demo-webhook.sh order.paid         # another event type (topic demo.order.paid)
#   DEMO_WEBHOOK_ID=msg_1 bash scripts/demo-webhook.sh   # post twice: the second answer is 200 duplicate
#
# Environment: QUEUEBOX_DEMO_URL (default http://127.0.0.1:8080), DEMO_SECRET (default the dev secret of queuebox.yaml).
set -euo pipefail

base_url="${QUEUEBOX_DEMO_URL:-http://127.0.0.1:8080}"
secret="${DEMO_SECRET:-whsec_cXVldWVib3gtZGVtby1zb3VyY2UtZGV2LW9ubHk=}"
event_type="${1:-order.created}"
id="${DEMO_WEBHOOK_ID:-msg_$(date +%s)_${RANDOM}}"
timestamp="$(date +%s)"
body="$(printf '{"type":"%s","data":{"id":"order-%s","total":42.5,"currency":"EUR"}}' "${event_type}" "${RANDOM}")"

# The key is the base64 after "whsec_"; openssl takes it as hex so that any byte survives the shell.
key_hex="$(printf '%s' "${secret#whsec_}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
signature="$(printf '%s' "${id}.${timestamp}.${body}" \
  | openssl dgst -sha256 -mac HMAC -macopt "hexkey:${key_hex}" -binary | base64)"

echo "POST ${base_url}/inbox/demo  webhook-id: ${id}" >&2
echo "${body}" >&2
curl --silent --show-error --include -X POST "${base_url}/inbox/demo" \
  -H 'content-type: application/json' \
  -H "webhook-id: ${id}" \
  -H "webhook-timestamp: ${timestamp}" \
  -H "webhook-signature: v1,${signature}" \
  --data-binary "${body}"
echo
