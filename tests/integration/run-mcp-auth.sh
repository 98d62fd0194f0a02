#!/bin/sh
# run-mcp-auth.sh - MCP authorization end to end, real processes on
# 127.0.0.1: a small authorization server (oauth-as.mjs, plain Node), `acp
# mcp serve --http --auth-issuer` as the resource server, and our client
# (conformance_client: the OAuth flow of libacp-http) getting a token by
# the authorization code grant with PKCE, stepping up on 403 and calling
# the tool `whoami`, at 2025-11-25 (a session) and 2026-07-28
# (stateless). Then every failure, both ways: tokens minted wrong
# (expired, not yet valid, wrong audience, wrong issuer, bad signature,
# alg none, HS256 with the public key, unknown kid, missing scope) each get
# their status and challenge, and the tool does not run (its stderr line,
# written only when it runs, is counted); our client against a server
# that refuses what the authorization server grants (scope withheld,
# another audience) fails and runs nothing. Also: the protected resource
# metadata, session binding to the subject, introspection (RFC 7662), the
# key set fetched once, and no token in any log.
#
# Env: ACP_BIN            the built acp (default: build/acp)
#      ACP_VALGRIND_WRAP  a command prefix (e.g. valgrind ...) for acp
# Exit status: 0 all passed, 1 some failed, 77 skipped (no acp or node).
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
wrap=${ACP_VALGRIND_WRAP:-}
cc=$(dirname "$acp")/tests/conformance/conformance_client
need_cmd node
need_cmd curl
[ -x "$cc" ] || skip "$cc is not built"
if [ -n "$wrap" ]; then T=300; else T=30; fi
start_wait=$((T * 10))
# a FAIL line shows what the last request and the conformance client wrote
ko_show="out hdr cc.err"

# --- the authorization server ---
node "$here/oauth-as.mjs" >"$work/as.out" 2>"$work/as.err" &
pids="$pids $!"
wait_for "$work/as.out" '"issuer"' $((T * 10)) || { echo "FAIL: the authorization server did not start"; cat "$work/as.err"; exit 1; }
iss=$(sed -n 's/.*"issuer":"\([^"]*\)".*/\1/p' "$work/as.out")

# serve NAME ARGS...: start a resource server; its URL in $url, its stderr
# in $work/NAME.err.
serve() {
  name=$1
  shift
  # shellcheck disable=SC2086
  start_bg "$work/$name.err" 'serving http' $wrap "$acp" mcp serve --http 127.0.0.1:0 "$@"
  servers="$servers $name:$bg_pid"
  url=$(sed -n 's/.*serving \(http[^ ]*\).*/\1/p' "$work/$name.err")
}
runs() { grep -c 'whoami ran' "$work/$1.err"; }
servers=""

serve rs --auth-issuer "$iss" --auth-scopes mcp:read --auth-tool-scope whoami=mcp:admin
rs=$url
rs_jwt=$rs
base=${rs%/mcp}

# --- protected resource metadata (RFC 9728) ---
for p in /.well-known/oauth-protected-resource/mcp /.well-known/oauth-protected-resource; do
  curl -s "$base$p" >"$work/out"
  if grep -qF "\"resource\":\"$rs\"" "$work/out" && grep -qF "\"authorization_servers\":[\"$iss\"]" "$work/out" &&
    grep -qF '"scopes_supported":["mcp:read","mcp:admin"]' "$work/out"; then ok "prm $p"; else ko "prm $p"; fi
done

# post TOKEN BODY [extra curl args]: POST to the resource server; status in
# $status, headers in $work/hdr, body in $work/out.
post() {
  tok=$1 body=$2
  shift 2
  if [ -n "$tok" ]; then set -- "$@" -H "Authorization: Bearer $tok"; fi
  status=$(curl -s -o "$work/out" -D "$work/hdr" -w '%{http_code}' "$rs" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@" -d "$body")
}
# A 2026-07-28 tools/call of whoami (stateless: no session needed).
call26='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
call() { post "$1" "$call26" -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: whoami'; }
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
mint() { curl -s "$iss/mint?$1"; }
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')

# --- no token ---
post "" "$init"
if [ "$status" = 401 ] && grep -qiF "www-authenticate: Bearer resource_metadata=\"$base/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:read\"" "$work/hdr" &&
  ! grep -qi 'error=' "$work/hdr"; then ok "no token: 401 with the challenge"; else ko "no token: 401 ($status)"; fi
post "" "$init" -H 'Authorization: Basic dTpw'
if [ "$status" = 401 ]; then ok "basic credentials: 401"; else ko "basic credentials ($status)"; fi

# --- our client, the whole flow: 401, authorize, 403 step-up, call ---
for pv in 2025-11-25 2026-07-28; do
  before=$(runs rs)
  MCP_CONFORMANCE_SCENARIO=tools_call MCP_CONFORMANCE_PROTOCOL_VERSION=$pv \
    MCP_CONFORMANCE_CONTEXT='{"toolCalls":[{"name":"whoami","arguments":{}}]}' \
    timeout $T $wrap "$cc" "$rs" >"$work/out" 2>"$work/cc.err"
  st=$?
  if [ $st -eq 0 ] && grep -qF 'subject=user-1 scopes=mcp:read mcp:admin' "$work/out" &&
    [ "$(grep -c 'authorized.*running again' "$work/cc.err")" -eq 2 ] && [ "$(runs rs)" -eq $((before + 1)) ]; then
    ok "flow $pv: token, step-up, whoami ran once"
  else ko "flow $pv (exit $st)"; fi
done

# --- minted tokens: valid ones run the tool ---
before=$(runs rs)
call "$(mint "aud=$aud&scope=mcp:read%20mcp:admin&sub=carol")"
if [ "$status" = 200 ] && grep -qF 'subject=carol scopes=mcp:read mcp:admin' "$work/out" && [ "$(runs rs)" -eq $((before + 1)) ]; then
  ok "minted RS256 token: 200, whoami ran"; else ko "minted RS256 token ($status)"; fi
call "$(mint "aud=$aud&scope=mcp:read%20mcp:admin&alg=ES256&sub=dave")"
if [ "$status" = 200 ] && grep -qF 'subject=dave' "$work/out" && [ "$(runs rs)" -eq $((before + 2)) ]; then
  ok "minted ES256 token: 200, whoami ran"; else ko "minted ES256 token ($status)"; fi

# --- minted tokens: each failure, nothing runs ---
before=$(runs rs)
# bad NAME QUERY REASON
bad() {
  call "$(mint "$2")"
  if [ "$status" = 401 ] && grep -qiF 'error="invalid_token"' "$work/hdr" && grep -qiF "error_description=\"$3\"" "$work/hdr" &&
    grep -qiF 'resource_metadata=' "$work/hdr"; then ok "$1: 401 invalid_token"; else ko "$1: ($status)"; fi
}
all="scope=mcp:read%20mcp:admin"
bad expired "aud=$aud&$all&exp=-120" "token expired"
bad not-yet-valid "aud=$aud&$all&nbf=600" "token not yet valid"
bad wrong-audience "aud=http%3A%2F%2F127.0.0.1%3A1%2Fmcp&$all" "wrong audience"
bad wrong-issuer "aud=$aud&$all&iss=http%3A%2F%2Fevil.example" "wrong issuer"
bad bad-signature "aud=$aud&$all&badsig=1" "bad signature"
bad bad-signature-es256 "aud=$aud&$all&badsig=1&alg=ES256" "bad signature"
bad alg-none "aud=$aud&$all&alg=none" "unsupported alg"
bad hs256-public-key "aud=$aud&$all&alg=HS256" "unsupported alg"
bad unknown-kid "aud=$aud&$all&kid=nope" "no key for the token's kid and alg"
bad alg-key-mismatch "aud=$aud&$all&alg=ES256&kid=rsa1" "no key for the token's kid and alg"
bad dpop-typ "aud=$aud&$all&typ=dpop%2Bjwt" "unsupported JOSE header"
call "not-a-jwt"
if [ "$status" = 401 ] && grep -qiF 'error="invalid_token"' "$work/hdr"; then ok "garbage token: 401"; else ko "garbage token ($status)"; fi
call "$(head -c 9000 /dev/zero | tr '\0' 'A')"
if [ "$status" = 401 ] && grep -qiF 'token too large' "$work/hdr"; then ok "oversize token: 401"; else ko "oversize token ($status)"; fi
# Missing the tool's scope: 403 naming every scope the call needs.
call "$(mint "aud=$aud&scope=mcp:read")"
if [ "$status" = 403 ] && grep -qiF 'error="insufficient_scope"' "$work/hdr" && grep -qiF 'scope="mcp:read mcp:admin"' "$work/hdr"; then
  ok "missing tool scope: 403 insufficient_scope"; else ko "missing tool scope ($status)"; fi
# Missing the base scope: 403 on anything, initialize included.
post "$(mint "aud=$aud&scope=mcp:admin")" "$init"
if [ "$status" = 403 ] && grep -qiF 'scope="mcp:read"' "$work/hdr"; then ok "missing base scope: 403"; else ko "missing base scope ($status)"; fi
# A batch-free 2025 session: tools/list passes with mcp:read, whoami does not.
t_read=$(mint "aud=$aud&scope=mcp:read&sub=erin")
post "$t_read" "$init"
sid=$(sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii]d: *\([^\r]*\).*/\1/p' "$work/hdr" | tr -d '\r')
post "$t_read" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}' -H "MCP-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25'
if [ -n "$sid" ] && [ "$status" = 403 ] && grep -qiF 'insufficient_scope' "$work/hdr"; then ok "2025 session: whoami without its scope is 403"; else ko "2025 session scope ($status)"; fi
post "$t_read" '{"jsonrpc":"2.0","id":3,"method":"tools/list"}' -H "MCP-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25'
if [ "$status" = 200 ] && grep -qF '"whoami"' "$work/out"; then ok "2025 session: tools/list with mcp:read"; else ko "2025 session tools/list ($status)"; fi
# The session belongs to erin: frank's valid token cannot use it.
post "$(mint "aud=$aud&$all&sub=frank")" '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","arguments":{}}}' -H "MCP-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25'
if [ "$status" = 403 ] && grep -qF 'another subject' "$work/out"; then ok "session bound to its subject"; else ko "session binding ($status)"; fi
# An expired token on the session: 401 (GET and DELETE too).
t_exp=$(mint "aud=$aud&$all&sub=erin&exp=-120")
status=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$rs" -H "Authorization: Bearer $t_exp" -H "MCP-Session-Id: $sid")
if [ "$status" = 401 ]; then ok "DELETE with an expired token: 401"; else ko "DELETE expired ($status)"; fi
if [ "$(runs rs)" -eq "$before" ]; then ok "no refused request ran whoami"; else ko "a refused request ran whoami"; fi

# --- our client against servers that refuse what it gets ---
# The authorization server withholds mcp:admin: step-ups end, nothing runs.
curl -s -X POST "$iss/control" -d '{"grant":"mcp:read"}' >/dev/null
before=$(runs rs)
MCP_CONFORMANCE_SCENARIO=tools_call MCP_CONFORMANCE_CONTEXT='{"toolCalls":[{"name":"whoami","arguments":{}}]}' \
  timeout $T $wrap "$cc" "$rs" >"$work/out" 2>"$work/cc.err"
st=$?
if [ $st -ne 0 ] && grep -qF 'status 403' "$work/cc.err" && [ "$(runs rs)" -eq "$before" ]; then
  ok "client, scope withheld: fails, whoami not run"; else ko "client, scope withheld (exit $st)"; fi
curl -s -X POST "$iss/control" -d '{}' >/dev/null
# A server expecting another audience: every token of the flow is refused.
serve aud --auth-issuer "$iss" --auth-audience api://elsewhere
MCP_CONFORMANCE_SCENARIO=tools_call MCP_CONFORMANCE_CONTEXT='{"toolCalls":[{"name":"whoami","arguments":{}}]}' \
  timeout $T $wrap "$cc" "$url" >"$work/out" 2>"$work/cc.err"
st=$?
if [ $st -ne 0 ] && grep -q 'authorized.*running again' "$work/cc.err" && [ "$(runs aud)" -eq 0 ]; then
  ok "client, wrong audience: fails, whoami not run"; else ko "client, wrong audience (exit $st)"; fi
# A server trusting another issuer: the flow's tokens are refused.
serve otheriss --auth-issuer http://127.0.0.1:1/other-issuer --auth-resource "http://127.0.0.1:1/mcp"
status=$(curl -s -o /dev/null -w '%{http_code}' "$url" -X POST -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H "Authorization: Bearer $(mint "aud=http%3A%2F%2F127.0.0.1%3A1%2Fmcp&$all")" -d "$init")
# (its issuer cannot be reached: no keys, 503; nothing runs either way)
if [ "$status" = 503 ] && [ "$(runs otheriss)" -eq 0 ]; then ok "issuer unreachable: 503"; else ko "issuer unreachable ($status)"; fi

# --- the key set named on the command line (no discovery) ---
serve jwks --auth-issuer "$iss" --auth-jwks-uri "$iss/jwks"
rs=$url
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')
call "$(mint "aud=$aud&sub=ivan&alg=ES256")"
if [ "$status" = 200 ] && grep -qF 'subject=ivan' "$work/out"; then ok "--auth-jwks-uri"; else ko "--auth-jwks-uri ($status)"; fi

# --- a slow issuer: the key fetch runs off the loop ---
# The first token waits for the key set; meanwhile the server answers
# others (the metadata, a token-less 401), and a second token joins the
# same fetch. With a fetch on the loop's thread the metadata request would
# wait for /release, which this test sends only after that answer.
serve held --auth-issuer "$iss" --auth-jwks-uri "$iss/jwks-held"
rs=$url
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')
jw0=$(sed -n 's/.*"jwks":\([0-9]*\).*/\1/p' <<EOF2
$(curl -s "$iss/stats")
EOF2
)
held_call() {
  curl -s -o "$work/held$1.out" -w '%{http_code}' --max-time $T "$rs" -X POST \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: whoami' \
    -H "Authorization: Bearer $(mint "aud=$aud&sub=held$1&alg=ES256")" -d "$call26" >"$work/held$1.st" &
}
held_call 1
h1=$!
i=0
while [ "$i" -lt 200 ] && ! curl -s "$iss/stats" | grep -qF '"held":1'; do sleep 0.05; i=$((i + 1)); done
held_call 2
h2=$!
# A client that gives up while its request waits for the fetch.
curl -s -o /dev/null --max-time 1 "$rs" -X POST -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(mint "aud=$aud&sub=quitter&alg=ES256")" -d "$call26" >/dev/null 2>&1
st_prm=$(curl -s -o /dev/null -w '%{http_code}' --max-time $T "${rs%/mcp}/.well-known/oauth-protected-resource/mcp")
post "" "$init"
st_none=$status
curl -s -X POST "$iss/release" >/dev/null
wait $h1 $h2
jw1=$(sed -n 's/.*"jwks":\([0-9]*\).*/\1/p' <<EOF2
$(curl -s "$iss/stats")
EOF2
)
if [ "$st_prm" = 200 ] && [ "$st_none" = 401 ]; then ok "slow issuer: others served while the key set is fetched"; else ko "slow issuer: metadata $st_prm, no token $st_none"; fi
if [ "$(cat "$work/held1.st")" = 200 ] && grep -qF 'subject=held1' "$work/held1.out" &&
  [ "$(cat "$work/held2.st")" = 200 ] && grep -qF 'subject=held2' "$work/held2.out"; then
  ok "slow issuer: the waiting requests run once the keys come"; else ko "slow issuer: waiting requests ($(cat "$work/held1.st") $(cat "$work/held2.st"))"; fi
if [ $((jw1 - jw0)) -eq 1 ]; then ok "slow issuer: one fetch for all waiting requests"; else ko "slow issuer: $((jw1 - jw0)) fetches"; fi
call "$(mint "aud=$aud&sub=after&alg=ES256")"
if [ "$status" = 200 ] && grep -qF 'subject=after' "$work/out"; then ok "slow issuer: later tokens use the keys"; else ko "slow issuer: later token ($status)"; fi

# --- introspection (RFC 7662) ---
serve intro --auth-issuer "$iss" --auth-introspect "$iss/introspect" --auth-client-id rs-client --auth-client-secret rs-secret
rs=$url
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')
call "$(mint "aud=$aud&sub=gina")"
if [ "$status" = 200 ] && grep -qF 'subject=gina' "$work/out" && [ "$(runs intro)" -eq 1 ]; then ok "introspection: active token runs whoami"; else ko "introspection: active ($status)"; fi
call "$(mint "aud=$aud&exp=-5")"
if [ "$status" = 401 ] && grep -qiF 'token not active' "$work/hdr"; then ok "introspection: inactive token 401"; else ko "introspection: inactive ($status)"; fi
call "$(mint "aud=http%3A%2F%2Fx")"
if [ "$status" = 401 ] && grep -qiF 'wrong audience' "$work/hdr"; then ok "introspection: wrong audience 401"; else ko "introspection: audience ($status)"; fi
serve intro2 --auth-issuer "$iss" --auth-introspect "$iss/introspect" --auth-client-id rs-client --auth-client-secret wrong
rs=$url
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')
call "$(mint "aud=$aud")"
if [ "$status" = 401 ] && grep -qiF 'introspection failed' "$work/hdr" && [ "$(runs intro2)" -eq 0 ]; then ok "introspection: bad client secret 401"; else ko "introspection: bad secret ($status)"; fi

# --- acp mcp login / logout; stored tokens in the client commands ---
export XDG_CONFIG_HOME="$work/cfg"
rs=$rs_jwt
aud=$(printf '%s' "$rs" | sed 's/:/%3A/g; s#/#%2F#g')
# Tokens that live 20 s: inside the 30 s margin, so the next use refreshes.
curl -s -X POST "$iss/control" -d '{"ttl":20}' >/dev/null
$wrap "$acp" mcp login "$rs" --timeout 60 2>"$work/login.err" &
lpid=$!
pids="$pids $lpid"
if wait_for "$work/login.err" '^http.*/authorize?' $((T * 10)); then
  # The "browser": the authorization server redirects to our listener.
  curl -s -L "$(grep -m1 '^http.*/authorize?' "$work/login.err")" >"$work/out"
fi
wait "$lpid"
st=$?
f=$(ls "$work/cfg/acp/oauth/"*.json 2>/dev/null | head -1)
if [ $st -eq 0 ] && grep -qF 'logged in to' "$work/login.err" && grep -qF 'authorized' "$work/out" && [ -n "$f" ] &&
  [ "$(stat -c %a "$f")" = 600 ] && [ "$(stat -c %a "$work/cfg/acp/oauth")" = 700 ]; then
  ok "login: tokens stored 0600"; else ko "login (exit $st)"; cat "$work/login.err"; fi
if grep -q 'eyJ' "$work/login.err"; then ko "login printed a token"; else ok "login prints no token"; fi
stored=$(sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p' "$f")
before=$(runs rs)
timeout $T $wrap "$acp" mcp call --url "$rs" whoami >"$work/out" 2>"$work/cc.err"
st=$?
refreshed=$(curl -s "$iss/stats" | sed -n 's/.*"refresh":\([0-9]*\).*/\1/p')
now_tok=$(sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p' "$f")
if [ $st -eq 0 ] && grep -qF 'subject=user-1 scopes=mcp:read mcp:admin' "$work/out" && [ "$(runs rs)" -eq $((before + 1)) ]; then
  ok "call with the stored token"; else ko "call with the stored token (exit $st)"; fi
if [ "$refreshed" = 1 ] && [ "$now_tok" != "$stored" ] && [ "$(stat -c %a "$f")" = 600 ]; then
  ok "expiring token refreshed and stored again"; else ko "refresh (refresh=$refreshed)"; fi
curl -s -X POST "$iss/control" -d '{}' >/dev/null
# acp mcp relay (stdio to HTTP) uses them too.
printf '%s\n' "$init" '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}' |
  timeout $T $wrap "$acp" mcp relay --url "$rs" >"$work/out" 2>"$work/cc.err"
if grep -qF 'subject=user-1' "$work/out"; then ok "relay with the stored token"; else ko "relay with the stored token"; fi
# An explicit --header wins over the stored token.
timeout $T "$acp" mcp call --url "$rs" --header "Authorization: Bearer $(mint "aud=$aud&$all&sub=henry")" whoami >"$work/out" 2>"$work/cc.err"
if grep -qF 'subject=henry' "$work/out"; then ok "--header Authorization wins"; else ko "--header Authorization wins"; fi
"$acp" mcp logout "$rs" 2>"$work/out"
before=$(runs rs)
timeout $T "$acp" mcp call --url "$rs" whoami >"$work/out" 2>"$work/cc.err"
st=$?
if [ $st -ne 0 ] && [ -z "$(ls "$work/cfg/acp/oauth/")" ] && [ "$(runs rs)" -eq "$before" ]; then
  ok "logout: tokens deleted, call refused"; else ko "logout (exit $st)"; fi
# A login nobody completes ends at its timeout; nothing stored.
timeout $T "$acp" mcp login "$rs" --timeout 1 >/dev/null 2>"$work/out"
st=$?
if [ $st -eq 1 ] && grep -qF 'no redirect' "$work/out" && [ -z "$(ls "$work/cfg/acp/oauth/")" ]; then
  ok "login timeout"; else ko "login timeout (exit $st)"; fi
"$acp" mcp login ftp://x >/dev/null 2>&1
[ $? -eq 2 ] && ok "login ftp: usage" || ko "login ftp"

# --- the key set is fetched once; no token in any log ---
curl -s "$iss/stats" >"$work/out"
jw=$(sed -n 's/.*"jwks":\([0-9]*\).*/\1/p' "$work/out")
# Once per server process that checks JWTs (rs, aud, jwks, held), whatever the
# number of tokens.
if [ "$jw" = 4 ]; then ok "jwks fetched once per server"; else ko "jwks fetched $jw times"; fi
if grep -q 'eyJ' "$work"/*.err; then ko "a token in a log"; else ok "no token in the logs"; fi

# --- bad command lines ---
"$acp" mcp serve --auth-issuer "$iss" >/dev/null 2>"$work/out"
[ $? -eq 2 ] && grep -qF 'need --http' "$work/out" && ok "--auth-issuer without --http: usage" || ko "--auth-issuer without --http"
"$acp" mcp serve --http 127.0.0.1:0 --auth-issuer ftp://x >/dev/null 2>"$work/out"
[ $? -eq 2 ] && ok "--auth-issuer ftp: usage" || ko "--auth-issuer ftp"
"$acp" mcp serve --http 127.0.0.1:0 --auth-scopes a >/dev/null 2>"$work/out"
[ $? -eq 2 ] && grep -qF 'need --auth-issuer' "$work/out" && ok "--auth-scopes alone: usage" || ko "--auth-scopes alone"
"$acp" mcp serve --http 127.0.0.1:0 --auth-issuer "$iss" --auth-tool-scope whoami >/dev/null 2>"$work/out"
[ $? -eq 2 ] && ok "--auth-tool-scope without =: usage" || ko "--auth-tool-scope without ="
"$acp" mcp serve --http 127.0.0.1:0 --auth-issuer "$iss" --auth-scopes 'a"b' >/dev/null 2>"$work/out"
[ $? -eq 2 ] && ok "--auth-scopes with a quote: usage" || ko "--auth-scopes with a quote"
"$acp" mcp serve --http 127.0.0.1:0 --auth-issuer "$iss" --auth-introspect "$iss/introspect" >/dev/null 2>"$work/out"
[ $? -eq 2 ] && ok "--auth-introspect without client: usage" || ko "--auth-introspect without client"

# --- every server stops cleanly on SIGTERM (sanitizer and valgrind
# reports, when built or wrapped with them, land in their stderr) ---
for sv in $servers; do
  name=${sv%%:*} p=${sv#*:}
  kill -TERM "$p" 2>/dev/null
  wait "$p"
  st=$?
  if [ $st -eq 0 ] && ! grep -qE 'Sanitizer|runtime error|definitely lost: [1-9]|ERROR SUMMARY: [1-9]' "$work/$name.err"; then
    ok "server $name exits cleanly"; else ko "server $name exit (status $st)"; sed 's/^/  /' "$work/$name.err" | head -30; fi
done
pids="$(for x in $pids; do case " $servers " in *":$x "*) ;; *) printf '%s ' "$x" ;; esac; done)"

finish mcp-auth
