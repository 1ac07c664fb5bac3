# shellcheck shell=bash
# scripts/lib/cg_common.sh — what the callgrind scripts (cg_handshake.sh, cg_manyconns.sh) share,
# sourced by them: a temporary folder with the processes to stop and the callgrind files to keep
# on exit, the bench's nginx origin serving a 1 KiB file, an ECDSA P-256 certificate, and
# h2gate's bench configuration with its timeouts raised for valgrind's pace.
#
# cg_start PREFIX: sets tmp (a new folder /tmp/PREFIX.XXXXXX), pids
# (the processes to stop), and the EXIT trap that stops them, copies $tmp/cg.* to $KEEP when it
# is set, and removes tmp.
# cg_origin: sets OP, TP and HP (free ports: origin, TLS, cleartext) and ngx (the origin's
# folder, www/1k.bin); starts nginx as the origin; writes $tmp/key.pem and $tmp/cert.pem.
# cg_h2gate_config DATE: writes $tmp/h2gate.yaml from bench/h2gate.yaml.in (pool 64, no
# pipelining, CIPHER) with every timeout that valgrind's pace can outlast raised to 600 s
# (500 handshakes take tens of seconds, and queued requests, origin connects and reads as long;
# a SETTINGS ACK can wait in the socket past 10 s on a loaded machine); DATE=fixed sets Date
# to a constant (response_headers: set); EXTRA, when set, is YAML appended to it (@TMP@ becomes
# the temporary folder), e.g. an access log. Checks it with `h2gate -t`.
# The sourcing script sets root (the checkout), H2GATE and CIPHER.

cg_start() {
  tmp=$(mktemp -d "/tmp/$1.XXXXXX")
  pids=()
  trap cg_cleanup EXIT
}

cg_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$tmp"/cg.* "$KEEP"/ 2>/dev/null || true
  fi
  rm -rf "$tmp"
}

cg_origin() {
  read -r OP TP HP < <(/usr/bin/python3 "${root:?}/scripts/lib/ports.py" 3)
  ngx=$tmp/nginx
  mkdir -p "$ngx/www" "$ngx/tmp" "$tmp/ngs"/{body,proxy,fastcgi,uwsgi,scgi} \
    "$tmp/ngp"/{body,proxy,fastcgi,uwsgi,scgi}
  head -c 1024 /dev/urandom >"$ngx/www/1k.bin"
  sed -e "s|@DIR@|$ngx|g" -e "s|@PORT@|$OP|g" "$root/bench/nginx.conf.in" >"$ngx/nginx.conf"
  nginx -c "$ngx/nginx.conf" -p "$ngx" >"$ngx/out.log" 2>&1 &
  pids+=("$!")
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
}

cg_h2gate_config() {
  sed -e "s|@DIR@|$tmp|g" -e "s|@TLS_PORT@|$TP|g" -e "s|@H2C_PORT@|$HP|g" \
    -e "s|@ORIGIN_PORT@|$OP|g" -e "s|@CIPHER@|$CIPHER|g" -e "s|@POOL@|64|g" \
    -e "s|@PIPELINE@|1|g" "$root/bench/h2gate.yaml.in" >"$tmp/h2gate.yaml"
  sed -i -e 's/^    pipeline: 1$/&\n    connect_timeout: 600s\n    read_timeout: 600s\n    queue_timeout: 600s\n    response_timeout: 600s/' \
    -e 's/^  graceful_shutdown: 1s$/&\n  handshake: 600s\n  first_request: 600s\n  header: 600s/' \
    "$tmp/h2gate.yaml"
  printf 'h2:\n  settings_timeout: 600s\n' >>"$tmp/h2gate.yaml"
  if [ "${1:-}" = fixed ]; then
    printf 'response_headers:\n  set: {Date: "Mon, 07 Dec 2026 10:00:00 GMT"}\n' >>"$tmp/h2gate.yaml"
  fi
  [ -z "${EXTRA:-}" ] || printf '%s\n' "${EXTRA//@TMP@/$tmp}" >>"$tmp/h2gate.yaml"
  "$H2GATE" -t -c "$tmp/h2gate.yaml" >/dev/null
}
