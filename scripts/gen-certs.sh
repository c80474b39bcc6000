#!/usr/bin/env bash
# gen-certs.sh OUTDIR — test/demo PKI made with the openssl CLI (EC P-256, valid 10 years).
# Idempotent: a file that already exists is kept (delete OUTDIR to regenerate everything).
#
#   ca.crt / ca.key                     the trusted CA (listener client-CA and the clients' server CA)
#   server.crt / server.key             server cert for DNS:localhost, IP:127.0.0.1 (signed by ca)
#   agent-a.crt / agent-a.key           client, URI SAN spiffe://cluster.local/ns/default/sa/a (signed by ca)
#   agent-b.crt / agent-b.key           client, URI SAN spiffe://cluster.local/ns/default/sa/b (signed by ca)
#   agent-nospiffe.crt / .key           client signed by ca whose only URI SAN is not SPIFFE (https://example.com/agent)
#   other-ca.crt / other-ca.key         an unrelated CA
#   other-agent-a.crt / other-agent-a.key
#                                       client from other-ca claiming spiffe://cluster.local/ns/default/sa/a;
#                                       a listener trusting ca.crt must reject it in the handshake
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUT="$1"
mkdir -p "$OUT"
cd "$OUT"
DAYS=3650
made=()

key() {  # key NAME
    [ -f "$1.key" ] || { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key.tmp" 2>/dev/null \
        && chmod 600 "$1.key.tmp" && mv "$1.key.tmp" "$1.key"; }
}

ca() {  # ca NAME CN
    local name="$1" cn="$2"
    [ -f "$name.crt" ] && return 0
    key "$name"
    openssl req -x509 -new -key "$name.key" -sha256 -days "$DAYS" -subj "/O=Toolgate test/CN=$cn" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$name.crt.tmp" 2>/dev/null
    mv "$name.crt.tmp" "$name.crt"
    made+=("$name.crt")
}

leaf() {  # leaf NAME ISSUER CN SAN EKU
    local name="$1" issuer="$2" cn="$3" san="$4" eku="$5"
    [ -f "$name.crt" ] && return 0
    key "$name"
    local ext; ext="$(mktemp)"
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
        "$eku" "$san" > "$ext"
    openssl req -new -key "$name.key" -subj "/O=Toolgate test/CN=$cn" -out "$name.csr" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA "$issuer.crt" -CAkey "$issuer.key" -set_serial "0x$(openssl rand -hex 16)" \
        -sha256 -days "$DAYS" -extfile "$ext" -out "$name.crt.tmp" 2>/dev/null
    rm -f "$ext" "$name.csr"
    mv "$name.crt.tmp" "$name.crt"
    made+=("$name.crt")
}

ca ca "Toolgate test CA"
ca other-ca "Unrelated test CA"
leaf server ca localhost "DNS:localhost,IP:127.0.0.1" serverAuth
leaf agent-a ca agent-a "URI:spiffe://cluster.local/ns/default/sa/a" clientAuth
leaf agent-b ca agent-b "URI:spiffe://cluster.local/ns/default/sa/b" clientAuth
leaf agent-nospiffe ca agent-nospiffe "URI:https://example.com/agent" clientAuth
leaf other-agent-a other-ca other-agent-a "URI:spiffe://cluster.local/ns/default/sa/a" clientAuth

if ((${#made[@]})); then
    echo "gen-certs: wrote ${made[*]} in $OUT"
else
    echo "gen-certs: all certificates present in $OUT"
fi
