# scripts/services.d/redis-replicas.sh: sourced by scripts/services.
#
#   redis-replicas  127.0.0.1:7101-7106  a Redis Cluster of three masters with one replica each
#                                        (nodes redis-7101 ... redis-7106; created as masters
#                                        7101-7103, replicas 7104-7106; roles move on failover)
#
# Each node is redis-server in cluster mode with appendonly yes / appendfsync everysec, as the
# 3-master cluster on 7001-7003, and cluster-node-timeout 2000 ms: a master that stops answering
# for 2 s is flagged failing and its replica is elected about a second later (the election waits
# 500 ms + up to 500 ms at random + 1 s per rank): the chaos scenarios measured 3.2-4.4 s from
# kill -9 to the replica serving the slots, where 5000 ms (the other cluster's) would add 3 s to
# every failover. Much lower and a busy 2-CPU machine
# (a fork for the AOF rewrite, a GC pause of a JVM beside it) could fail over a healthy master.
# The replica validity factor stays at its default (10): a replica whose link to its master has
# been down longer than 10 s + 10 x 2 s refuses to fail over, so a long-stale copy is never
# promoted on its own.
#
# Ready means: cluster_state ok, three masters serving slots, each with a replica whose
# replication link is up (master_link_status:up). A node killed with `kill redis-710N` comes back
# with `start redis-710N` from its nodes.conf and AOF; a master that was failed over rejoins as a
# replica of the node promoted in its place. `up` on a cluster whose roles moved only starts the
# nodes that are down and waits: the cluster is created once, when no node has a nodes.conf yet.

# SECKILL_REDIS_REPLICAS_PORTS moves the six nodes (named after their ports), for a second, private
# cluster in its own SECKILL_SERVICES_DIR (the replicated soak's); the first three are created masters.
# shellcheck disable=SC2206 # a list of ports, split on spaces
replicas_ports=(${SECKILL_REDIS_REPLICAS_PORTS:-7101 7102 7103 7104 7105 7106})

redis_replicas_addr() { echo "127.0.0.1:${replicas_ports[0]}-${replicas_ports[-1]}"; }

# redis_replicas_nodes: the node names. For `down`, the replicas of the moment come first (when a
# node answers), so that they stop before their masters: a master stopped while its replica runs
# would be failed over to it by the other masters, and the roles would move at every `down`.
# Everywhere else (which service a node belongs to, kill, status) the fixed list.
redis_replicas_nodes() {
	if [[ " ${FUNCNAME[*]} " != *" cmd_down "* ]]; then
		printf 'redis-%s\n' "${replicas_ports[@]}"
		return 0
	fi
	local port replicas="" list=""
	for port in "${replicas_ports[@]}"; do
		replicas=$(replicas_cli "$port" cluster nodes | awk '$3 ~ /slave/ && $3 !~ /fail/ {split($2, a, "[:@]"); print "redis-" a[2]}') || replicas=""
		[[ -n $replicas ]] && break
	done
	[[ -n $replicas ]] && list=$replicas$'\n'
	for port in "${replicas_ports[@]}"; do
		grep -qx "redis-$port" <<<"$replicas" || list+="redis-$port"$'\n'
	done
	printf '%s' "$list"
}

# replicas_cli PORT ARGS...: redis-cli on one node, replies without \r.
replicas_cli() {
	local port=$1
	shift
	timeout 3 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

# redis_replicas_health: print why the cluster is not ready (nothing when it is); exit 1 then.
redis_replicas_health() {
	local port nodes="" state="" problems=()
	for port in "${replicas_ports[@]}"; do
		state=$(replicas_cli "$port" cluster info | sed -n 's/^cluster_state://p')
		[[ -n $state ]] || continue
		nodes=$(replicas_cli "$port" cluster nodes)
		break
	done
	if [[ -z $nodes ]]; then
		echo "no node answers"
		return 1
	fi
	[[ $state == ok ]] || problems+=("cluster_state $state")
	# CLUSTER NODES: id addr flags master-id ping pong epoch link slots...
	local masters=() id addr flags master link slots
	while read -r id addr flags master _ _ _ link slots; do
		[[ $flags == *master* && $flags != *fail* && -n $slots ]] && masters+=("$id ${addr%%@*}")
	done <<<"$nodes"
	((${#masters[@]} == 3)) || problems+=("${#masters[@]} masters serve slots, want 3")
	local m mid maddr synced
	for m in "${masters[@]}"; do
		mid=${m%% *} maddr=${m#* }
		synced=
		while read -r id addr flags master _ _ _ link slots; do
			[[ $master == "$mid" && $flags == *slave* && $flags != *fail* ]] || continue
			port=${addr%%@*}
			port=${port##*:}
			if [[ $(replicas_cli "$port" info replication | sed -n 's/^master_link_status://p') == up ]]; then
				synced=${addr%%@*}
			fi
		done <<<"$nodes"
		[[ -n $synced ]] || problems+=("master $maddr has no replica in sync")
	done
	((${#problems[@]} == 0)) && return 0
	local IFS=';'
	echo "${problems[*]}"
	return 1
}

redis_replicas_answers() { redis_replicas_health >/dev/null; }

# replicas_conf PORT: write the node's config (the generic redis_node_up starts a node from it).
replicas_conf() {
	local port=$1
	mkdir -p "$data_dir/redis-replicas/$port"
	cat >"$run_dir/redis-$port.conf" <<-EOF
		# generated by scripts/services (services.d/redis-replicas.sh)
		bind 127.0.0.1
		port $port
		protected-mode yes
		daemonize no
		dir $data_dir/redis-replicas/$port
		cluster-enabled yes
		cluster-config-file nodes.conf
		cluster-node-timeout 2000
		appendonly yes
		appendfsync everysec
		save ""
		logfile ""
	EOF
}

redis_replicas_node_up() {
	local port=${1#redis-}
	[[ -f $run_dir/redis-$port.conf ]] || replicas_conf "$port"
	redis_node_up "$port"
}

redis_replicas_up() {
	local port pid i fresh=1 why=""
	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		install "install redis-server (>=7) for the replicated Redis Cluster" redis-server redis-tools
	fi
	for port in "${replicas_ports[@]}"; do
		[[ -s $data_dir/redis-replicas/$port/nodes.conf ]] && fresh=
	done
	for port in "${replicas_ports[@]}"; do
		if pid=$(pid_of "redis-$port"); then continue; fi
		port_open "$port" && die "127.0.0.1:$port is in use by something else; redis-replicas needs ports ${replicas_ports[*]}"
		replicas_conf "$port"
		launch "redis-$port" "$log_dir/redis-$port.log" redis-server "$run_dir/redis-$port.conf"
	done
	for port in "${replicas_ports[@]}"; do
		for ((i = 0; i < 100; i++)); do
			[[ $(replicas_cli "$port" ping) == PONG ]] && break
			sleep 0.1
		done
		[[ $(replicas_cli "$port" ping) == PONG ]] || { show_log "$log_dir/redis-$port.log"; die "redis-$port did not answer PING"; }
	done
	if [[ -n $fresh ]]; then
		local nodes=()
		for port in "${replicas_ports[@]}"; do nodes+=("127.0.0.1:$port"); done
		log "creating the Redis Cluster ${nodes[*]} (3 masters, 1 replica each)"
		redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >>"$log_dir/redis-replicas.log" 2>&1 ||
			{ show_log "$log_dir/redis-replicas.log"; die "redis-cli --cluster create failed"; }
	fi
	# A fresh cluster needs a full sync per replica; a restarted node a partial or full one.
	for ((i = 0; i < 300; i++)); do
		if why=$(redis_replicas_health); then
			log "redis-replicas ready on $(redis_replicas_addr): 3 masters, each with a replica in sync"
			return 0
		fi
		sleep 0.2
	done
	for port in "${replicas_ports[@]}"; do show_log "$log_dir/redis-$port.log"; done
	die "redis-replicas on ports ${replicas_ports[*]} not ready after 60s: $why (wipe $data_dir/redis-replicas to recreate it)"
}
