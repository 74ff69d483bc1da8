#!/bin/sh
# Writes the certificates server_security_test uses into DIR (made at test
# time, never committed): two CAs ("ca" signs everything, "wrong-ca" is one
# the server does not trust), server and server2 (both for 127.0.0.1 and
# localhost, signed by ca), a client certificate from each CA, and an
# expired server and client certificate (valid only on 2020-01-01).
#   make_test_certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
log=openssl.log
: > "$log"
ossl() { openssl "$@" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }; }
key() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1.key"; }

for ca in ca wrong-ca; do
  key "$ca"
  ossl req -x509 -new -key "$ca.key" -out "$ca.pem" -days 30 -subj "/CN=$ca"
done

# leaf NAME CA SAN
leaf() {
  key "$1"
  ossl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf 'subjectAltName=%s\n' "$3" > "$1.ext"
  ossl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 30 \
    -extfile "$1.ext" -out "$1.pem"
}
leaf server ca "IP:127.0.0.1,DNS:localhost"
leaf server2 ca "IP:127.0.0.1,DNS:localhost"
leaf client ca "DNS:client"
leaf wrong-client wrong-ca "DNS:client"

# Expired: `openssl x509 -days` cannot go back in time, `openssl ca` can.
mkdir -p expired-db
: > expired-db/index.txt
echo 01 > expired-db/serial
cat > expired.cnf <<EOC
[ca]
default_ca = test_ca
[test_ca]
database = expired-db/index.txt
new_certs_dir = expired-db
serial = expired-db/serial
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
EOC
for name in expired-server expired-client; do
  key "$name"
  ossl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$name" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost"
  ossl ca -batch -config expired.cnf -cert ca.pem -keyfile ca.key \
    -startdate 20200101000000Z -enddate 20200102000000Z -in "$name.csr" -out "$name.pem"
done
