#!/bin/bash
# Runs in the guest (scripts/vm/run-tests.sh): `rdma resource show mr`, the
# patched rdma tool (scripts/iproute2.sh, mounted by guest-init), shows a
# dma-buf MR on rxe, whether it was revoked, and nothing of the kind for a
# plain MR. `revoke_demo --hold` registers the MRs and steps through revoke
# and dereg; at each step the MR is looked up by lkey in `rdma -j resource
# show mr` (and the dma-buf one in the plain output too).
#
# Prints its results as TAP lines prefixed "rdmatool: " (scripts/test.sh
# collects them into NAME-rdmatool.tap); skips when the patched tool,
# revoke_demo, rxe or the mock exporter is missing. Exits 0 unless a check
# failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
demo=$top/build/userspace/revoke_demo
dev=rtcheck
n=0 failed=0

tap() { # STATUS DESCRIPTION
	n=$((n + 1))
	echo "rdmatool: $1 $n - $2"
	case $1 in "not ok") failed=1 ;; esac
}
skip() {
	tap ok "rdma resource show mr, dma-buf MRs # SKIP $*"
	exit 0
}
note() { echo "# $*"; }

strings "$(command -v rdma)" 2>/dev/null | grep -qx 'revoked %s ' ||
	skip "the rdma tool is not the patched one (make iproute2)"
[ -x "$demo" ] || skip "no $demo (make userspace)"
modprobe -a ib_uverbs rdma_rxe dmabuf_mock 2>/dev/null
[ -c /dev/dmabuf_mock ] || skip "no /dev/dmabuf_mock"

ip link add rtc0 type veth peer name rtc1 || skip "cannot make a veth pair"
ip link set rtc0 up
ip link set rtc1 up
cleanup() {
	rdma link del "$dev" 2>/dev/null
	ip link del rtc0 2>/dev/null
}
trap cleanup EXIT
rdma link add "$dev" type rxe netdev rtc0 || skip "cannot add an rxe device"

# MR FIELD...: one line per MR of $dev with that lkey ("none" if it has
# none), the fields given, from rdma's JSON; absent fields print "-".
mr_json() {
	rdma -j resource show mr dev "$dev" > /tmp/rdmatool.json || return 1
	python3 - "$@" <<'EOF'
import json, sys
lkey = int(sys.argv[1])
rows = json.load(open("/tmp/rdmatool.json"))
def key(v):
    return int(v, 16) if isinstance(v, str) else int(v)
hits = [r for r in rows if "lkey" in r and key(r["lkey"]) == lkey]
if not hits:
    print("none")
for r in hits:
    print(" ".join(json.dumps(r[f]) if f in r else "-" for f in sys.argv[2:]))
EOF
}

# The plain output's line for the MR with that lkey, from "dmabuf" on.
mr_text() {
	rdma resource show mr dev "$dev" |
		awk -v k="$(printf '0x%x' "$1")" '{
			for (i = 1; i < NF; i++)
				if ($i == "lkey" && $(i + 1) == k) {
					s = $0; sub(/.*mrlen [0-9]+ /, "", s)
					sub(/ *pdn .*/, "", s); print s
				}
		}'
}

# expect DESCRIPTION WANT GOT
expect() {
	if [ "$2" = "$3" ]; then
		tap ok "$1"
	else
		tap "not ok" "$1"
		note "want: $2"
		note "got:  $3"
	fi
}

coproc HOLD { exec "$demo" --hold "$dev" 2>&1; }
pid=$HOLD_PID
step() { # the next line of revoke_demo into $line, within 30 s
	IFS= read -r -t 30 line <&"${HOLD[0]}" || line="hold: (no answer)"
}
step
note "$line"
case $line in
"hold: registered lkey="*) ;;
*"Operation not supported"*)
	skip "the rxe provider has no reg_dmabuf_mr (make rdma-core)" ;;
*)
	tap "not ok" "revoke_demo --hold registers a dma-buf MR on $dev"
	exit 1 ;;
esac
lkey=${line#*lkey=}
lkey=${lkey%% *}
plain=${line#*plain_lkey=}

rdma resource show mr dev "$dev" | sed 's/^/# /'
rdma -j resource show mr dev "$dev" | sed 's/^/# /'
expect "registered: rdma -j shows the dma-buf MR (lkey $lkey) with dmabuf true, revoked false" \
	"true false" "$(mr_json "$lkey" dmabuf revoked)"
expect "registered: rdma shows it as 'dmabuf revoked false'" \
	"dmabuf revoked false" "$(mr_text "$lkey")"
expect "registered: the plain MR (lkey $plain) has neither dmabuf nor revoked" \
	"- -" "$(mr_json "$plain" dmabuf revoked)"

echo >&"${HOLD[1]}"
step
note "$line"
expect "revoke_demo --hold: the exporter revoked, no pin, map or vmap left" \
	"hold: revoked" "$line"
rdma resource show mr dev "$dev" | sed 's/^/# /'
expect "revoked: rdma -j shows the same MR with dmabuf true, revoked true" \
	"true true" "$(mr_json "$lkey" dmabuf revoked)"
expect "revoked: rdma shows it as 'dmabuf revoked true'" \
	"dmabuf revoked true" "$(mr_text "$lkey")"
expect "revoked: the plain MR still has neither" \
	"- -" "$(mr_json "$plain" dmabuf revoked)"

echo >&"${HOLD[1]}"
step
note "$line"
expect "revoke_demo --hold: the revoked MR deregisters" "hold: deregistered" "$line"
rdma resource show mr dev "$dev" | sed 's/^/# /'
expect "deregistered: rdma shows no MR with lkey $lkey" "none" "$(mr_json "$lkey" lkey)"

echo >&"${HOLD[1]}"
wait "$pid"
rc=$?
expect "revoke_demo --hold exits 0 (the exporter's buffer is gone)" 0 "$rc"
exit $failed
