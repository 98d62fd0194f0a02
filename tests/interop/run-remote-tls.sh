#!/bin/sh
# run-remote-tls.sh - remote ACP over TLS (wss://, https://): `acp serve
# --tls` against the official ACP TypeScript SDK 2.4 and `acp client`,
# with certificates made here with the openssl program (a CA, a server
# certificate for 127.0.0.1 and localhost, one for another name, a client
# certificate, and a second CA with its own client certificate):
#   - the SDK's experimental/ws-client (wss://) and experimental/http-client
#     (https://) drive `acp serve --tls -- acp agent` (NODE_EXTRA_CA_CERTS);
#   - `acp client --url wss://... --ca` and `--url https://... --http`: a
#     full turn; wss://localhost (SNI and a DNS name check);
#   - `acp conductor agent --ca ... "acp proxy arrow" wss://...`;
#   - the client refuses a server whose CA it does not trust, and a
#     certificate for another name, saying OpenSSL's reason;
#   - mutual TLS (--client-ca): the right client certificate gets in;
#     none, or one from another CA, is refused during the handshake and
#     the server keeps serving; --client-ca with --token needs both;
#   - plaintext HTTP to the TLS port: 400 in plaintext; a broken handshake
#     is closed, a stalled one at the handshake deadline; the server keeps
#     serving;
#   - acp serve --verbose says per TLS connection whether it resumed and
#     how the client ended TLS (acp client: always close_notify); acp
#     conductor --verbose and acp bench-client --verbose print their
#     remote client's per-socket TLS lines;
#   - session resumption: acp client --http --verbose says its later
#     sockets resumed the first one's session (also with mTLS), node:tls
#     reconnecting with its session (TLS 1.3, TLS 1.2 tickets, TLS 1.2
#     session ids) sees isSessionReused(); with --no-tls-resumption neither
#     is ever resumed;
#   - ALPN: against --alpn http/1.1, acp client --http --h2 falls back to
#     HTTP/1.1 for a full turn, node:http2 (h2 only) is refused with
#     no_application_protocol, curl --http2 gets HTTP/1.1; --alpn h2
#     refuses an HTTP/1.1-only client and takes node:http2.
# Needs ACP_BIN, node, curl and openssl; installs the peers if missing.
# Exit 77 when one is missing. ACP_VALGRIND_WRAP (as in run-cli.sh)
# prefixes every acp process started here.
. "$(cd "$(dirname "$0")" && pwd)/remote-common.sh"
need_cmd curl
need_cmd openssl
need_peers

# ---- certificates -------------------------------------------------------------
c=$work/certs
mkdir -p "$c"
# make_ca NAME: NAME.key, NAME.pem
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$c/$1.key" -out "$c/$1.pem" -days 2 -subj "/CN=libacp test $1" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
# make_cert NAME CA SAN EKU: NAME.key, NAME.pem signed by CA
make_cert() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$c/$1.key" -out "$c/$1.csr" -subj "/CN=$1" 2>/dev/null &&
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=%s\n%s\n' \
    "$4" "$3" >"$c/$1.ext" &&
  openssl x509 -req -in "$c/$1.csr" -CA "$c/$2.pem" -CAkey "$c/$2.key" \
    -CAcreateserial -days 2 -extfile "$c/$1.ext" -out "$c/$1.pem" 2>/dev/null
}
if ! { make_ca ca && make_ca otherca &&
       make_cert server ca "subjectAltName=DNS:localhost,IP:127.0.0.1" serverAuth &&
       make_cert wrongname ca "subjectAltName=DNS:elsewhere.example" serverAuth &&
       make_cert client ca "subjectAltName=DNS:client" clientAuth &&
       make_cert stranger otherca "subjectAltName=DNS:stranger" clientAuth; }; then
  echo "FAIL: cannot make the test certificates with openssl"; exit 1
fi


# ---- setup errors are clear -----------------------------------------------------
out=$("$acp" serve --tls "$c/server.pem" "$c/nothere.key" -- "$acp" agent 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "cannot load the private key"; then
  ok "serve --tls with a missing key: exit 2, says so"
else ko "serve --tls with a missing key" "exit $rc: $out"; fi
out=$("$acp" serve --tls "$c/server.pem" "$c/client.key" -- "$acp" agent 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "mismatch"; then
  ok "serve --tls with another certificate's key: exit 2, says so"
else ko "serve --tls with a mismatched key" "exit $rc: $out"; fi

# ---- acp serve --tls -- acp agent ---------------------------------------------
start_serve "$work/serve.log" --tls "$c/server.pem" "$c/server.key" -- "$acp" agent
wss="wss://127.0.0.1:$port/acp"
https="https://127.0.0.1:$port/acp"

for sc in full echo cancel; do
  out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/sdk_client.mjs" \
        --dialect acp --scenario $sc --url "$wss" 2>&1)
  if [ $? -eq 0 ]; then ok "SDK ws-client -> acp serve --tls (wss): $sc"; else
    ko "SDK ws-client -> acp serve --tls: $sc" "$out"; fi
  out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/sdk_client.mjs" \
        --dialect acp --scenario $sc --url "$https" --http 2>&1)
  if [ $? -eq 0 ]; then ok "SDK http-client -> acp serve --tls (https): $sc"; else
    ko "SDK http-client -> acp serve --tls: $sc" "$out"; fi
done

# HTTP/2 over TLS (ALPN h2) with node:http2: the same exchanges as h2c.
echo "h2 over tls" >"$work/h2.txt"
for sc in "full $work/h2.txt" "echo" "cancel" "multi"; do
  set -- $sc
  out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/h2_peer.mjs" "$1" "$https" ${2:+"$2"} 2>&1)
  if [ $? -eq 0 ]; then ok "node:http2 over TLS (ALPN h2) -> acp serve --tls: $1"; else
    ko "node:http2 over TLS -> acp serve --tls: $1" "$out"; fi
done
# An HTTP/1.1-only client still gets HTTP/1.1 (curl, ALPN http/1.1).
v=$(curl -s --http1.1 --cacert "$c/ca.pem" -o /dev/null -w '%{http_version}' -X POST -H 'Content-Type: text/plain' -d x "$https")
if [ "$v" = "1.1" ]; then ok "an HTTP/1.1 client over TLS gets HTTP/1.1"; else ko "HTTP/1.1 over TLS" "version $v"; fi

# A full turn: the agent asks permission, reads and writes a file.
for mode in ws http h2; do
  u=$wss; extra=""
  [ $mode = http ] && { u=$https; extra=--http; }
  [ $mode = h2 ] && { u=$https; extra="--http --h2 --verbose"; }
  # shellcheck disable=SC2086
  if full_turn out.txt "written over $mode" --url "$u" $extra --ca "$c/ca.pem"; then
    if [ $mode = h2 ] && ! grep -q "connected over HTTP/2" "$work/turn.err"; then
      ko "acp client --h2 over https: ALPN h2" "$(cat "$work/turn.err")"
    else ok "acp client --url $u $extra: full turn (permission, read, write)"; fi
  else ko "acp client full turn over $mode" "exit $turn_rc" "$turn_out" "$(cat "$work/turn.err")"; fi
done
out=$(timeout 30 $wrap "$acp" client --quiet --url "wss://localhost:$port/acp" \
      --ca "$c/ca.pem" -p "by name" 2>&1)
[ "$out" = "by name" ] && ok "acp client --url wss://localhost (SNI, DNS name)" ||
  ko "acp client wss://localhost" "$out"
out=$(timeout 30 "$acp" client --quiet -p "through the chain" -- \
      $wrap "$acp" conductor agent --ca "$c/ca.pem" "$acp proxy arrow" "$wss" 2>&1)
[ "$out" = ">through the chain" ] && ok "conductor: acp proxy arrow -> $wss" ||
  ko "conductor with a wss:// agent" "$out"
out=$(timeout 30 "$acp" client --quiet -p "over https" -- \
      $wrap "$acp" conductor agent --http --ca "$c/ca.pem" "$acp proxy arrow" "$https" 2>&1)
[ "$out" = ">over https" ] && ok "conductor --http: acp proxy arrow -> $https" ||
  ko "conductor with an https:// agent" "$out"


# ---- the client checks the server -----------------------------------------------
out=$(timeout 30 $wrap "$acp" client --quiet --url "$wss" -p "hi" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "certificate verify failed"; then
  ok "a server from an unknown CA is refused ($(printf '%s' "$out" | head -1))"
else ko "unknown CA" "exit $rc: $out"; fi
if wait_log "$work/serve.log" "TLS handshake refused from 127\.0\.0\.1:[0-9]*: TLS: .*unknown ca"; then
  ok "the server logs the refused handshake, peer address and OpenSSL's reason ($(grep -m1 'TLS handshake refused' "$work/serve.log"))"
else ko "log of a refused handshake" "$(cat "$work/serve.log")"; fi
out=$(timeout 30 $wrap "$acp" client --quiet --url "$https" --http -p "hi" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "certificate verify failed"; then
  ok "https: a server from an unknown CA is refused"
else ko "unknown CA over https" "exit $rc: $out"; fi
out=$(timeout 30 "$acp" client --quiet --url "$wss" --ca "$c/nothere.pem" -p "hi" 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "cannot load the CA file"; then
  ok "client --ca with a missing file: exit 2, says so"
else ko "client --ca missing" "exit $rc: $out"; fi

# ---- plaintext to the TLS port ---------------------------------------------------
st=$(curl -s -o "$work/plain.body" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port/acp")
if [ "$st" = 400 ] && grep -q "speaks TLS" "$work/plain.body"; then
  ok "plain HTTP to the TLS port: 400, says to use TLS"
else ko "plain HTTP to the TLS port" "status $st: $(cat "$work/plain.body" 2>/dev/null)"; fi
if wait_log "$work/serve.log" "plaintext HTTP on the TLS port refused (400) from 127\.0\.0\.1:[0-9]*: TLS: "; then
  ok "the server logs the plaintext connection with its address ($(grep -m1 'plaintext HTTP' "$work/serve.log"))"
else ko "log of plaintext on the TLS port" "$(cat "$work/serve.log")"; fi
st=$(timeout 10 node -e '
  const s = require("net").connect(Number(process.argv[1]), "127.0.0.1", () => s.write(Buffer.from([0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5])));
  s.on("data", () => {}); s.on("error", () => {}); s.on("close", () => console.log("closed"));' "$port")
[ "$st" = closed ] && ok "a broken handshake is closed" || ko "broken handshake" "$st"
# A client that starts a handshake and stalls is closed by the handshake
# deadline (10 s, the one that covers the request head).
st=$(timeout 40 node -e '
  const s = require("net").connect(Number(process.argv[1]), "127.0.0.1", () => s.write(Buffer.from([0x16, 3, 1])));
  s.on("data", () => {}); s.on("error", () => {}); s.on("close", () => console.log("closed"));' "$port")
[ "$st" = closed ] && ok "a stalled handshake is closed by the deadline" || ko "stalled handshake" "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$c/ca.pem" \
     -X POST -H "Content-Type: text/plain" -d '{}' "$https")
[ "$st" = 415 ] && ok "https POST not JSON: 415 (the HTTP checks run over TLS)" ||
  ko "https POST not JSON" "status $st"
out=$(timeout 30 $wrap "$acp" client --quiet --url "$wss" --ca "$c/ca.pem" -p "still here" 2>&1)
[ "$out" = "still here" ] && ok "the server keeps serving after the faults" ||
  ko "serving after faults" "$out"

# ---- hostname mismatch -----------------------------------------------------------
start_serve "$work/serve-wrongname.log" --tls "$c/wrongname.pem" "$c/wrongname.key" -- "$acp" agent
out=$(timeout 30 $wrap "$acp" client --quiet --url "wss://127.0.0.1:$port/acp" \
      --ca "$c/ca.pem" -p "hi" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "certificate verify failed.*mismatch"; then
  ok "a certificate for another IP address is refused ($(printf '%s' "$out" | head -1))"
else ko "IP address mismatch" "exit $rc: $out"; fi
out=$(timeout 30 $wrap "$acp" client --quiet --url "wss://localhost:$port/acp" \
      --ca "$c/ca.pem" -p "hi" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "certificate verify failed: hostname mismatch"; then
  ok "a certificate for another DNS name is refused ($(printf '%s' "$out" | head -1))"
else ko "hostname mismatch" "exit $rc: $out"; fi

# ---- mutual TLS -------------------------------------------------------------------
start_serve "$work/serve-mtls.log" --tls "$c/server.pem" "$c/server.key" \
  --client-ca "$c/ca.pem" -- "$acp" agent
murl="wss://127.0.0.1:$port/acp"
out=$(timeout 30 $wrap "$acp" client --quiet --url "$murl" --ca "$c/ca.pem" \
      --cert "$c/client.pem" --key "$c/client.key" -p "with my cert" 2>&1)
[ "$out" = "with my cert" ] && ok "mTLS: the right client certificate gets in" ||
  ko "mTLS right cert" "$out"
out=$(timeout 30 $wrap "$acp" client --quiet --url "https://127.0.0.1:$port/acp" --http \
      --verbose --ca "$c/ca.pem" --cert "$c/client.pem" --key "$c/client.key" \
      -p "https mtls" 2>"$work/err")
# Its later sockets resume the first's session: no new certificate check.
if [ "$out" = "https mtls" ] && grep -q "socket 2 .*TLS session resumed" "$work/err"; then
  ok "mTLS over https (Streamable HTTP), later sockets resumed"
else ko "mTLS https" "$out" "$(cat "$work/err")"; fi
out=$(timeout 30 $wrap "$acp" client --quiet --url "$murl" --ca "$c/ca.pem" -p "no cert" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "TLS"; then
  ok "mTLS: no client certificate is refused ($(printf '%s' "$out" | head -1))"
else ko "mTLS without a cert" "exit $rc: $out"; fi
if wait_log "$work/serve-mtls.log" "TLS handshake refused from 127\.0\.0\.1:[0-9]*: TLS: .*certificate"; then
  ok "mTLS: the server logs why it refused the client ($(grep -m1 'TLS handshake refused' "$work/serve-mtls.log"))"
else ko "log of an mTLS refusal" "$(cat "$work/serve-mtls.log")"; fi
out=$(timeout 30 $wrap "$acp" client --quiet --url "$murl" --ca "$c/ca.pem" \
      --cert "$c/stranger.pem" --key "$c/stranger.key" -p "wrong ca" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "TLS"; then
  ok "mTLS: a certificate from another CA is refused ($(printf '%s' "$out" | head -1))"
else ko "mTLS with another CA's cert" "exit $rc: $out"; fi
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$c/ca.pem" \
     -X POST -H "Content-Type: text/plain" -d '{}' "https://127.0.0.1:$port/acp")
[ "$st" = 000 ] && ok "mTLS: curl without a certificate gets no HTTP answer" ||
  ko "mTLS curl" "status $st"
out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/sdk_client.mjs" \
      --dialect acp --scenario echo --url "$murl" 2>&1)
[ $? -ne 0 ] && ok "mTLS: the SDK ws-client without a certificate is refused" ||
  ko "mTLS SDK without a cert" "$out"
out=$(timeout 30 $wrap "$acp" client --quiet --url "$murl" --ca "$c/ca.pem" \
      --cert "$c/client.pem" --key "$c/client.key" -p "still serving" 2>&1)
[ "$out" = "still serving" ] && ok "mTLS: the server keeps serving after refusals" ||
  ko "mTLS after refusals" "$out"

# --client-ca and --token: both needed
start_serve "$work/serve-both.log" --tls "$c/server.pem" "$c/server.key" \
  --client-ca "$c/ca.pem" --token s3cret -- "$acp" agent
burl="wss://127.0.0.1:$port/acp"
out=$(timeout 30 $wrap "$acp" client --quiet --url "$burl" --ca "$c/ca.pem" \
      --cert "$c/client.pem" --key "$c/client.key" -p "no token" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "401"; then
  ok "mTLS + token: a certificate without the token gets 401"
else ko "mTLS + token, no token" "exit $rc: $out"; fi
out=$(timeout 30 $wrap "$acp" client --quiet --url "$burl" --ca "$c/ca.pem" \
      --cert "$c/client.pem" --key "$c/client.key" --token s3cret -p "both" 2>&1)
[ "$out" = "both" ] && ok "mTLS + token: both get in" || ko "mTLS + token" "$out"

# ---- session resumption ---------------------------------------------------------
# acp client --http opens a socket per exchange kind (the POST socket, the
# SSE stream, a session stream, the DELETE): the first does a full
# handshake, every later one resumes its session (TLS 1.3 ticket).
start_serve "$work/serve-resume.log" --tls "$c/server.pem" "$c/server.key" -- "$acp" agent
rport=$port
rurl="https://127.0.0.1:$rport/acp"
# resumed_ok ERRFILE: socket 1 full, a socket 2, and every later one resumed.
resumed_ok() {
  grep -q "acp client: socket 1 (POST) to 127\.0\.0\.1:$rport: TLS full handshake (TLSv1\.3" "$1" &&
  grep -q "acp client: socket 2 (SSE stream) to 127\.0\.0\.1:$rport: TLS session resumed (TLSv1\.3" "$1" &&
  ! grep "acp client: socket [0-9]* " "$1" | grep -v "socket 1 " | grep -qv "TLS session resumed"
}
out=$(timeout 60 $wrap "$acp" client --quiet --url "$rurl" --http --verbose \
      --ca "$c/ca.pem" -p "resume me" 2>"$work/err")
rc=$?
if [ $rc -eq 0 ] && [ "$out" = "resume me" ] && resumed_ok "$work/err"; then
  ok "acp client --http over https: later sockets resume the first's session ($(grep -c 'TLS session resumed' "$work/err") resumed: $(grep -m1 'socket 2' "$work/err" | sed 's/^acp client: //'))"
else ko "acp client --http: TLS session resumption" "exit $rc: $out" "$(cat "$work/err")"; fi
# acp conductor and acp bench-client pass --verbose to their remote client.
out=$(timeout 30 "$acp" client --quiet -p "verbose chain" -- \
      $wrap "$acp" conductor agent --http --verbose --ca "$c/ca.pem" "$acp proxy arrow" "$rurl" 2>"$work/err")
if [ "$out" = ">verbose chain" ] &&
   grep -q "acp conductor: $rurl: socket 1 (POST) to 127\.0\.0\.1:$rport: TLS full handshake" "$work/err" &&
   grep -q "acp conductor: $rurl: socket 2 (SSE stream) to 127\.0\.0\.1:$rport: TLS session resumed" "$work/err"; then
  ok "acp conductor --verbose: its https:// component's sockets, full then resumed"
else ko "acp conductor --verbose" "$out" "$(cat "$work/err")"; fi
start_serve "$work/serve-echo.log" --tls "$c/server.pem" "$c/server.key" -- "$acp" agent --echo
out=$(timeout 60 "$acp" bench-client --payload 16 --turns 2 --url "https://127.0.0.1:$port/acp" \
      --http --ca "$c/ca.pem" --verbose 2>"$work/err")
if printf '%s' "$out" | grep -q '"turns":2,' &&
   grep -q "acp bench-client: socket 1 (POST) to 127\.0\.0\.1:$port: TLS full handshake" "$work/err" &&
   grep -q "acp bench-client: socket 2 (SSE stream) to 127\.0\.0\.1:$port: TLS session resumed" "$work/err"; then
  ok "acp bench-client --verbose: its sockets, full then resumed"
else ko "acp bench-client --verbose" "$out" "$(cat "$work/err")"; fi
out=$(timeout 60 $wrap "$acp" client --quiet --url "wss://127.0.0.1:$rport/acp" --verbose \
      --ca "$c/ca.pem" -p "ws verbose" 2>"$work/err")
if [ "$out" = "ws verbose" ] &&
   grep -q "acp client: socket 1 (WebSocket) to 127\.0\.0\.1:$rport: TLS full handshake (TLSv1\.3, ALPN http/1\.1)" "$work/err"; then
  ok "acp client --verbose over wss: says how its socket was set up"
else ko "acp client --verbose over wss" "$out" "$(cat "$work/err")"; fi
# acp serve --verbose (start_serve passes it) says per connection how TLS
# was set up and how the client ended it: acp client's sockets all end
# with close_notify (the two acp client runs above; the first one's lines
# are surely written by now).
slog="$work/serve-resume.log"
if grep -q "acp serve: TLS from 127\.0\.0\.1:[0-9]*: TLS full handshake (TLSv1\.3" "$slog" &&
   grep -q "acp serve: TLS from 127\.0\.0\.1:[0-9]*: TLS session resumed (TLSv1\.3" "$slog" &&
   grep -q "acp serve: TLS end from 127\.0\.0\.1:[0-9]*: close_notify (a clean close)" "$slog" &&
   ! grep -q "without close_notify" "$slog"; then
  ok "acp serve --verbose: per connection full/resumed, and acp client's TLS ends are clean ($(grep -c 'TLS session resumed' "$slog") resumed, $(grep -c 'close_notify (a clean' "$slog") close_notify)"
else ko "acp serve --verbose TLS lines" "$(cat "$slog")"; fi
# node_resume PORT REUSED NAME: node:tls connecting three times to PORT,
# each time with the session it was given (TLS 1.3 tickets, TLS 1.2 tickets,
# TLS 1.2 session ids): isSessionReused() of the three is REUSED.
node_resume() {
  for m in tls13 tls12 tls12-id; do
    out=$(timeout 60 node "$here/tls_resume.mjs" "$1" "$c/ca.pem" $m 2>&1)
    if printf '%s' "$out" | grep -qF "\"reused\":[$2]"; then
      ok "$3 ($m): isSessionReused() ($out)"
    else ko "$3 ($m)" "$out"; fi
  done
}
# Node's own TLS client reconnecting with the session it was given.
node_resume "$rport" false,true,true "node:tls reconnecting with its session"

# The same with --no-tls-resumption: every socket does a full handshake.
start_serve "$work/serve-noresume.log" --tls "$c/server.pem" "$c/server.key" \
  --no-tls-resumption -- "$acp" agent
nport=$port
out=$(timeout 60 $wrap "$acp" client --quiet --url "https://127.0.0.1:$nport/acp" --http \
      --verbose --ca "$c/ca.pem" -p "no resume" 2>"$work/err")
rc=$?
if [ $rc -eq 0 ] && [ "$out" = "no resume" ] &&
   grep -q "socket 2 (SSE stream) to 127\.0\.0\.1:$nport: TLS full handshake" "$work/err" &&
   ! grep -q "TLS session resumed" "$work/err"; then
  ok "--no-tls-resumption: acp client's later sockets do full handshakes ($(grep -c 'TLS full handshake' "$work/err") of them)"
else ko "--no-tls-resumption with acp client" "exit $rc: $out" "$(cat "$work/err")"; fi
node_resume "$nport" false,false,false "--no-tls-resumption: node:tls is never resumed"
out=$("$acp" serve --no-tls-resumption -- "$acp" agent 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "goes with --tls"; then
  ok "--no-tls-resumption without --tls: exit 2, says so"
else ko "--no-tls-resumption without --tls" "exit $rc: $out"; fi

# --tls-ticket-key-period: tickets made and opened by our own key ring
# (rotation itself is driven by test_remote_tls, which forces it and moves a
# fake clock; here no test waits for a period to pass). Node resumes with
# them as with OpenSSL's built-in keys; bad values are refused.
start_serve "$work/serve-tkp.log" --tls "$c/server.pem" "$c/server.key" \
  --tls-ticket-key-period 600 -- "$acp" agent
node_resume "$port" false,true,true "--tls-ticket-key-period 600: node:tls resumes"
for bad in 0 604801 1h; do
  out=$("$acp" serve --tls "$c/server.pem" "$c/server.key" --tls-ticket-key-period "$bad" \
        -- "$acp" agent 2>&1)
  rc=$?
  if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "tls-ticket-key-period: expected a number 1..604800, not '$bad'"; then
    ok "--tls-ticket-key-period $bad: exit 2, says so"
  else ko "--tls-ticket-key-period $bad" "exit $rc: $out"; fi
done
out=$("$acp" serve --tls-ticket-key-period 60 -- "$acp" agent 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q -- "--tls-ticket-key-period goes with --tls"; then
  ok "--tls-ticket-key-period without --tls: exit 2, says so"
else ko "--tls-ticket-key-period without --tls" "exit $rc: $out"; fi

# ---- ALPN: a server that offers only http/1.1 -----------------------------------------
start_serve "$work/serve-alpn.log" --tls "$c/server.pem" "$c/server.key" \
  --alpn http/1.1 -- "$acp" agent
aport=$port
aurl="https://127.0.0.1:$aport/acp"
if full_turn out.txt "written over the ALPN fallback" --url "$aurl" --http --h2 --verbose \
     --ca "$c/ca.pem" &&
   grep -q "the server's ALPN chose http/1.1" "$work/turn.err" &&
   grep -q "connected over HTTP/1.1" "$work/turn.err" &&
   grep -q "socket 1 (HTTP/2, or HTTP/1.1 by ALPN) to 127\.0\.0\.1:$aport: TLS full handshake (TLSv1\.3, ALPN http/1\.1)" "$work/turn.err"; then
  ok "--alpn http/1.1: acp client --http --h2 falls back to HTTP/1.1, full turn (permission, read, write)"
else ko "acp client --h2 against --alpn http/1.1" "exit $turn_rc" "$turn_out" "$(cat "$work/turn.err")"; fi
# node:http2 offers h2 only: refused in the handshake (no_application_protocol).
out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 30 node -e '
  const s = require("node:http2").connect(process.argv[1]);
  s.on("connect", () => { console.log("connected, ALPN " + s.alpnProtocol); s.close(); });
  s.on("error", (e) => { console.log("error " + (e.code || "") + ": " + e.message); process.exitCode = 1; });' "$aurl" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -qi "no.application.protocol"; then
  ok "--alpn http/1.1: node:http2 gets a clear failure ($out)"
else ko "node:http2 against --alpn http/1.1" "exit $rc: $out"; fi
if wait_log "$work/serve-alpn.log" "TLS handshake refused from 127\.0\.0\.1:[0-9]*: TLS: .*no application protocol"; then
  ok "--alpn http/1.1: the server logs why ($(grep -m1 'no application protocol' "$work/serve-alpn.log"))"
else ko "log of an ALPN refusal" "$(cat "$work/serve-alpn.log")"; fi
v=$(curl -s --http2 --cacert "$c/ca.pem" -o /dev/null -w '%{http_version}' -X POST \
    -H 'Content-Type: text/plain' -d x "$aurl")
[ "$v" = "1.1" ] && ok "--alpn http/1.1: curl --http2 gets HTTP/1.1" || ko "curl --http2 against --alpn http/1.1" "version $v"
out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/h2_peer.mjs" echo "$aurl" 2>&1)
[ $? -ne 0 ] && ok "--alpn http/1.1: the HTTP/2 peer does not get in" ||
  ko "h2_peer against --alpn http/1.1" "$out"
# And the reverse: --alpn h2 refuses an HTTP/1.1-only client, takes HTTP/2.
start_serve "$work/serve-alpn-h2.log" --tls "$c/server.pem" "$c/server.key" \
  --alpn h2 -- "$acp" agent
out=$(timeout 30 $wrap "$acp" client --quiet --url "https://127.0.0.1:$port/acp" --http \
      --ca "$c/ca.pem" -p "h1 only" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "no application protocol"; then
  ok "--alpn h2: an HTTP/1.1-only client is refused ($(printf '%s' "$out" | head -1))"
else ko "--alpn h2 with an HTTP/1.1 client" "exit $rc: $out"; fi
out=$(NODE_EXTRA_CA_CERTS="$c/ca.pem" timeout 60 node "$here/h2_peer.mjs" echo "https://127.0.0.1:$port/acp" 2>&1)
[ $? -eq 0 ] && ok "--alpn h2: node:http2 gets in" || ko "node:http2 against --alpn h2" "$out"
out=$("$acp" serve --tls "$c/server.pem" "$c/server.key" --alpn h2,h3 -- "$acp" agent 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "unknown ALPN protocol 'h3'"; then
  ok "--alpn with an unknown protocol: exit 2, says so"
else ko "--alpn h2,h3" "exit $rc: $out"; fi

# acp serve stops cleanly on SIGTERM; under ACP_VALGRIND_WRAP (or a
# sanitizer build as ACP_BIN) its report lands in its log.
check_serve_logs
finish
