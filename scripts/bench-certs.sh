# Sourced by the webhook benchmarks: bench_certs DIR writes a throwaway CA (DIR/ca.pem) and a
# serving certificate for 127.0.0.1 from it (DIR/cert.pem, DIR/key.pem), so the load generators
# verify the servers.
bench_certs() {
  local dir=$1
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -days 1 -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj /CN=bench-ca 2>/dev/null
  openssl req "${ec[@]}" -keyout "$dir/key.pem" -out "$dir/leaf.csr" -subj /CN=127.0.0.1 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$dir/leaf.ext"
  openssl x509 -req -in "$dir/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 1 -extfile "$dir/leaf.ext" -out "$dir/cert.pem" 2>/dev/null
}
