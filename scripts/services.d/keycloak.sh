# shellcheck shell=bash
# keycloak: an identity provider for the end-to-end sign-in test (e2e/keycloak_test.go, `make
# test-idp`), sourced by scripts/services; started only when named (`up keycloak`).
#
#   keycloak  127.0.0.1:18180  Keycloak (keycloak-quarkus-dist from Maven Central, Java 17+),
#                              dev mode (its own H2 database under the distribution's data/),
#                              realm `shop` imported from scripts/keycloak/shop-realm.json at the
#                              first start: client `seckill-api` (public, password grant, an
#                              audience mapper putting seckill-api in `aud`), client
#                              `seckill-console` (the operator console's: public, code flow
#                              with PKCE S256, redirect URIs on 127.0.0.1/localhost), realm role
#                              `seckill-admin`, users buyer/buyer-password and
#                              operator/operator-password (seckill-admin)
#
# The api is pointed at it with SECKILL_JWT_JWKS_URL=http://127.0.0.1:18180/realms/shop/protocol/
# openid-connect/certs and SECKILL_JWT_ISSUER=http://127.0.0.1:18180/realms/shop.
#
# Environment: KEYCLOAK_VERSION (default 26.0.7).

keycloak_version=${KEYCLOAK_VERSION:-26.0.7}
keycloak_port=18180
keycloak_home=$base/cache/keycloak-$keycloak_version

keycloak_addr() { echo "127.0.0.1:$keycloak_port"; }
keycloak_nodes() { echo keycloak; }

# keycloak_answers: the realm's OpenID configuration answers 200 (so the realm is imported).
keycloak_answers() {
	local status
	status=$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$keycloak_port
		printf 'GET /realms/shop/.well-known/openid-configuration HTTP/1.0\r\nHost: 127.0.0.1:$keycloak_port\r\n\r\n' >&3
		head -n 1 <&3" 2>/dev/null) || return 1
	[[ $status == *" 200"* ]]
}

# keycloak_dist: fetch and unpack the distribution once.
keycloak_dist() {
	[[ -f $keycloak_home/.complete ]] && return 0
	if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
		install "install a Java runtime (>=17) and Maven (e.g. default-jre-headless maven)" default-jre-headless maven
	fi
	command -v unzip >/dev/null 2>&1 || install "install unzip" unzip
	local zip=$base/cache/keycloak-quarkus-dist-$keycloak_version.zip
	if [[ ! -s $zip ]]; then
		log "keycloak: fetching keycloak-quarkus-dist $keycloak_version from Maven Central"
		mvn -q -B -Dstyle.color=never dependency:copy \
			-Dartifact="org.keycloak:keycloak-quarkus-dist:$keycloak_version:zip" \
			-DoutputDirectory="$base/cache" >&2 || die "could not fetch keycloak-quarkus-dist $keycloak_version with Maven"
	fi
	rm -rf "$keycloak_home" "$base/cache/keycloak-$keycloak_version.tmp"
	mkdir -p "$base/cache/keycloak-$keycloak_version.tmp"
	unzip -q "$zip" -d "$base/cache/keycloak-$keycloak_version.tmp" || die "could not unpack $zip"
	mv "$base/cache/keycloak-$keycloak_version.tmp/keycloak-$keycloak_version" "$keycloak_home"
	rm -rf "$base/cache/keycloak-$keycloak_version.tmp"
	mkdir -p "$keycloak_home/data/import"
	cp "$root/scripts/keycloak/shop-realm.json" "$keycloak_home/data/import/"
	touch "$keycloak_home/.complete"
}

keycloak_up() {
	local pid
	if keycloak_answers; then
		if pid=$(pid_of keycloak); then
			log "keycloak ready on 127.0.0.1:$keycloak_port (pid $pid)"
		else
			log "keycloak ready on 127.0.0.1:$keycloak_port (external, reused)"
		fi
		return 0
	fi
	if ! pid=$(pid_of keycloak); then
		port_open "$keycloak_port" && die "127.0.0.1:$keycloak_port is in use by something that does not answer as Keycloak; stop it"
		keycloak_dist
		command -v java >/dev/null 2>&1 || install "install a Java runtime (>=17)" default-jre-headless
		mkdir -p "$log_dir"
		launch keycloak "$log_dir/keycloak.log" env KC_BOOTSTRAP_ADMIN_USERNAME=admin KC_BOOTSTRAP_ADMIN_PASSWORD=admin \
			JAVA_OPTS_KC_HEAP="-Xms64m -Xmx512m" "$keycloak_home/bin/kc.sh" start-dev \
			--http-host=127.0.0.1 --http-port="$keycloak_port" --import-realm
		pid=$(<"$run_dir/keycloak.pid")
		log "keycloak starting (pid $pid)"
	fi
	local i
	for ((i = 0; i < 900; i++)); do
		if keycloak_answers; then
			log "keycloak ready on 127.0.0.1:$keycloak_port (pid $pid)"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	show_log "$log_dir/keycloak.log"
	die "keycloak did not start on 127.0.0.1:$keycloak_port within 180s"
}

# keycloak_node_up NODE: start it again after `kill keycloak`.
keycloak_node_up() { keycloak_up; }
