#!/bin/sh
# cert.sh - the cluster CA, node certificates and enrolment tokens for
# rametr's tls+tcp:// transport (see docs/deploy.md).
#
#   scripts/cert.sh init DIR
#       makes DIR/ca.pem (the cluster CA's certificate, give it to every
#       host), DIR/ca.key (keep it on the host that issues certificates) and
#       DIR/cluster.secret (the aggregator's secret for enrolment tokens)
#   scripts/cert.sh issue DIR NAME [DNS-NAME-OR-IP ...]
#       makes DIR/NAME.pem (certificate signed by the CA, then its key) and
#       DIR/NAME.token (the node's enrolment token: HMAC-SHA256 of
#       "rametr-node-v1:NAME" keyed with the cluster secret). For the
#       aggregator, list the names collectors dial it by.
#
# Uses Debian's openssl command: no code of ours parses X.509 or keys.
# Keys are EC P-256 (what nng's mbedTLS handles fast); files holding keys
# or secrets are made mode 0600.
set -eu

usage() {
	echo "usage: $0 init DIR | issue DIR NAME [DNS-NAME-OR-IP ...]" >&2
	exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
umask 077

case "$cmd" in
init)
	mkdir -p "$dir"
	if [ -e "$dir/ca.key" ]; then
		echo "cert.sh: '$dir/ca.key' exists; not replacing the cluster CA" >&2
		exit 1
	fi
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 -subj "/CN=rametr cluster CA" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "$dir/ca.pem"
	chmod 0644 "$dir/ca.pem"
	openssl rand -hex 32 > "$dir/cluster.secret"
	echo "cert.sh: made '$dir/ca.pem', '$dir/ca.key' and '$dir/cluster.secret'"
	;;
issue)
	[ $# -ge 1 ] || usage
	name=$1
	shift
	case "$name" in
	*[!A-Za-z0-9._-]* | "" | -*)
		echo "cert.sh: invalid name '$name' (letters, digits, '.', '_', '-')" >&2
		exit 2
		;;
	esac
	for f in ca.pem ca.key cluster.secret; do
		[ -r "$dir/$f" ] || { echo "cert.sh: no '$dir/$f' (run: $0 init $dir)" >&2; exit 1; }
	done
	san="DNS:$name"
	for a in "$@"; do
		case "$a" in
		*[!0-9.]*) case "$a" in *:*) san="$san,IP:$a" ;; *) san="$san,DNS:$a" ;; esac ;;
		*) san="$san,IP:$a,DNS:$a" ;; # mbedTLS compares the name as text
		esac
	done
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/key" 2>/dev/null
	openssl req -new -key "$tmp/key" -subj "/CN=$name" -out "$tmp/csr"
	printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
		"$san" > "$tmp/ext"
	openssl x509 -req -in "$tmp/csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 825 -sha256 -extfile "$tmp/ext" \
		-out "$tmp/crt" 2>/dev/null
	cat "$tmp/crt" "$tmp/key" > "$dir/$name.pem"
	secret=$(head -n 1 "$dir/cluster.secret")
	printf 'rametr-node-v1:%s' "$name" |
		openssl dgst -sha256 -mac HMAC -macopt "key:$secret" -r | cut -d' ' -f1 > "$dir/$name.token"
	echo "cert.sh: made '$dir/$name.pem' and '$dir/$name.token' ($san)"
	;;
*)
	usage
	;;
esac
