# shellcheck shell=bash
# kafka-cluster: three Apache Kafka KRaft nodes on loopback, from the same Maven jars as the single
# broker (kafka_jars), sourced by scripts/services (docs/replicated.md).
#
#   node     client listener   internal listener   controller listener   data                    log
#   kafka-1  127.0.0.1:29092   127.0.0.1:29292     127.0.0.1:29192        data/kafka-cluster/1    log/kafka-1/server.log
#   kafka-2  127.0.0.1:29093   127.0.0.1:29293     127.0.0.1:29193        data/kafka-cluster/2    log/kafka-2/server.log
#   kafka-3  127.0.0.1:29094   127.0.0.1:29294     127.0.0.1:29194        data/kafka-cluster/3    log/kafka-3/server.log
#
# SECKILL_KAFKA_CLUSTER_PORTS, SECKILL_KAFKA_CLUSTER_INTERNAL_PORTS and
# SECKILL_KAFKA_CLUSTER_CONTROLLER_PORTS (three ports each, in node order) move the listeners, for
# a second, private cluster beside this one (the replicated soak's, `make soak TOPOLOGY=replicated`)
# in its own SECKILL_SERVICES_DIR.
#
# Each node is broker and controller (one voter each, scripts/kafka/cluster.properties): any two
# nodes keep both the controller quorum and min.insync.replicas=2; with one node left the cluster
# refuses writes. Programs use SECKILL_KAFKA_BROKERS=127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094
# with SECKILL_KAFKA_REPLICATION_FACTOR=3 SECKILL_KAFKA_MIN_INSYNC_REPLICAS=2.
#
# A node cut off from the others (`scripts/services cut kafka-N`, `heal kafka-N`; root and
# iptables, `scripts/services tool iptables`): the brokers replicate on the internal listener and
# elect on the controller one, and the programs use neither, so dropping those two is a network
# partition between the nodes that leaves every node answering its clients (a cut leader keeps
# taking requests it can no longer replicate). Loopback traffic passes the OUTPUT hook only, so the
# rules live there, in a chain of their own named after this cluster's first internal port (a
# private cluster's cut never touches another's, and a cluster started again on the same ports
# finds what a run that died left), hooked first into OUTPUT:
#   - anything to node N's internal and controller ports not sent by N itself (its peers reaching it);
#   - anything N sends to the other nodes' internal and controller ports (N reaching its peers).
# N's own packets are told apart by their owner's group: when this script runs as root each node's
# JVM runs with its own group id, its internal port number (uid root, no supplementary groups),
# which `-m owner --gid-owner` matches. A second `cut` adds nothing, `heal` removes the node's
# rules, `heal kafka-cluster` and `down kafka-cluster` remove the chain, and so does `up
# kafka-cluster` (what a test killed in the middle of a cut left).

# Not the single broker's id: two clusters, never one broker joining the other.
kafka_cluster_id_rf3=Qm8sXh0XTdm3rPpKc1uJ7A
kafka_cluster_ids=(1 2 3)

kafka_cluster_nodes() { printf 'kafka-%s\n' "${kafka_cluster_ids[@]}"; }
# shellcheck disable=SC2206 # lists of ports, split on spaces
kafka_cluster_ports=(${SECKILL_KAFKA_CLUSTER_PORTS:-29092 29093 29094})
# shellcheck disable=SC2206
kafka_cluster_controller_ports=(${SECKILL_KAFKA_CLUSTER_CONTROLLER_PORTS:-29192 29193 29194})
# shellcheck disable=SC2206
kafka_cluster_internal_ports=(${SECKILL_KAFKA_CLUSTER_INTERNAL_PORTS:-29292 29293 29294})

kafka_cluster_addr() { echo "127.0.0.1:${kafka_cluster_ports[0]}"; }
kafka_cluster_port() { echo "${kafka_cluster_ports[$1 - 1]}"; }
kafka_cluster_controller_port() { echo "${kafka_cluster_controller_ports[$1 - 1]}"; }
kafka_cluster_internal_port() { echo "${kafka_cluster_internal_ports[$1 - 1]}"; }
# kafka_cluster_gid ID: the group node ID's JVM runs as (its internal port: unique on the machine,
# whichever cluster the node belongs to).
kafka_cluster_gid() { kafka_cluster_internal_port "$1"; }

# kafka_cluster_voters: the controller quorum, as controller.quorum.voters wants it.
kafka_cluster_voters() {
	local id voters=()
	for id in "${kafka_cluster_ids[@]}"; do voters+=("$id@127.0.0.1:$(kafka_cluster_controller_port "$id")"); done
	local IFS=,
	echo "${voters[*]}"
}

# kafka_cluster_request PORT BYTES HEADLEN: send one request (printf escapes) and print the first
# HEADLEN bytes of the reply as hex.
kafka_cluster_request() {
	timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; printf "$2" >&3; head -c "$3" <&3' _ "$@" 2>/dev/null |
		od -An -tx1 | tr -d ' \n'
}

# kafka_cluster_node_answers ID: the node replies to ApiVersions v0 with no error.
kafka_cluster_node_answers() {
	local reply
	reply=$(kafka_cluster_request "$(kafka_cluster_port "$1")" \
		'\x00\x00\x00\x0d\x00\x12\x00\x00\x00\x00\x00\x07\x00\x03svc' 10) || return 1
	[[ ${reply:8:12} == 000000070000 ]]
}

# kafka_cluster_brokers ID: how many live (registered, unfenced) brokers node ID's metadata lists
# (a Metadata v0 request; the reply starts with the correlation id, then the broker array's length).
kafka_cluster_brokers() {
	local reply
	reply=$(kafka_cluster_request "$(kafka_cluster_port "$1")" \
		'\x00\x00\x00\x11\x00\x03\x00\x00\x00\x00\x00\x07\x00\x03svc\x00\x00\x00\x00' 12) || return 1
	[[ ${reply:8:8} == 00000007 ]] || return 1
	echo $((16#${reply:16:8}))
}

# kafka_cluster_answers: every node answers and lists all three brokers.
kafka_cluster_answers() {
	local id
	for id in "${kafka_cluster_ids[@]}"; do
		kafka_cluster_node_answers "$id" || return 1
		[[ $(kafka_cluster_brokers "$id") == "${#kafka_cluster_ids[@]}" ]] || return 1
	done
}

# kafka_cluster_conf ID: write node ID's config (and make its folders).
kafka_cluster_conf() {
	local id=$1
	mkdir -p "$data_dir/kafka-cluster/$id" "$log_dir/kafka-$id"
	sed -e "s|@NODE_ID@|$id|" -e "s|@PORT@|$(kafka_cluster_port "$id")|" \
		-e "s|@INTERNAL_PORT@|$(kafka_cluster_internal_port "$id")|" -e "s|@CONTROLLER_PORT@|$(kafka_cluster_controller_port "$id")|" \
		-e "s|@VOTERS@|$(kafka_cluster_voters)|" \
		-e "s|@LOG_DIRS@|$data_dir/kafka-cluster/$id|" "$root/scripts/kafka/cluster.properties" >"$run_dir/kafka-$id.properties"
}

# kafka_cluster_format ID: format node ID's data folder, unless it was.
kafka_cluster_format() {
	local id=$1 name=kafka-$1
	[[ -f $data_dir/kafka-cluster/$id/meta.properties ]] && return 0
	kafka_cluster_conf "$id"
	log "$name: formatting $data_dir/kafka-cluster/$id (cluster id $kafka_cluster_id_rf3)"
	java -Xmx256m -cp "$kafka_lib/*" -Dlog4j.configuration="file:$root/scripts/kafka/tools-log4j.properties" \
		kafka.tools.StorageTool format -t "$kafka_cluster_id_rf3" -c "$run_dir/$name.properties" --ignore-formatted \
		>>"$log_dir/$name.log" 2>&1 || {
		show_log "$log_dir/$name.log"
		die "formatting $name's data folder failed"
	}
}

# kafka_cluster_launch ID: start node ID from its config and data (formatting the data folder the
# first time), unless it runs already.
kafka_cluster_launch() {
	local id=$1 name=kafka-$1 pid port cport iport conf as=()
	pid_of "$name" >/dev/null && return 0
	port=$(kafka_cluster_port "$id")
	cport=$(kafka_cluster_controller_port "$id")
	iport=$(kafka_cluster_internal_port "$id")
	port_open "$port" && die "127.0.0.1:$port ($name) is in use by something this script did not start"
	port_open "$iport" && die "127.0.0.1:$iport ($name's internal listener) is in use by something this script did not start"
	port_open "$cport" && die "127.0.0.1:$cport ($name's controller) is in use by something this script did not start"
	# Its own group, so that `cut` can tell its packets from its peers' (only root can set it;
	# elsewhere the node runs as the caller, and `cut` refuses).
	[[ $(id -u) == 0 ]] && as=(setpriv --regid "$(kafka_cluster_gid "$id")" --clear-groups)
	kafka_jars
	command -v java >/dev/null 2>&1 || install "install a Java runtime (>=17)" default-jre-headless
	conf=$run_dir/$name.properties
	kafka_cluster_conf "$id"
	kafka_cluster_format "$id"
	# A fresh server.log, so readiness is judged on this start only.
	[[ -f $log_dir/$name/server.log ]] && mv -f "$log_dir/$name/server.log" "$log_dir/$name/server.log.prev"
	launch "$name" "$log_dir/$name.log" "${as[@]}" java -Xms128m -Xmx384m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.io.tmpdir="$tmp_dir" \
		-Dkafka.logs.dir="$log_dir/$name" -Dlog4j.configuration="file:$root/scripts/kafka/log4j.properties" \
		-cp "$kafka_lib/*" kafka.Kafka "$conf"
	log "$name starting (pid $(<"$run_dir/$name.pid"))"
}

# kafka_cluster_wait ID: wait until node ID has started and answers.
kafka_cluster_wait() {
	local id=$1 name=kafka-$1 pid i
	# Not pid_of: right after launch the process may not be java yet, and pid_of would take the
	# pid file for stale and remove it.
	[[ -s $run_dir/$name.pid ]] || die "$name is not running"
	pid=$(<"$run_dir/$name.pid")
	for ((i = 0; i < 450; i++)); do
		if grep -q 'Kafka Server started' "$log_dir/$name/server.log" 2>/dev/null && kafka_cluster_node_answers "$id"; then
			log "$name ready on 127.0.0.1:$(kafka_cluster_port "$id") (pid $pid)"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	show_log "$log_dir/$name/server.log"
	show_log "$log_dir/$name.log"
	die "$name did not start on 127.0.0.1:$(kafka_cluster_port "$id") within 90s"
}

# kafka_cluster_registered ID: wait until node ID lists every live node of ours as a broker.
kafka_cluster_registered() {
	local id=$1 want=0 n i node
	for node in $(kafka_cluster_nodes); do pid_of "$node" >/dev/null && want=$((want + 1)); done
	for ((i = 0; i < 300; i++)); do
		n=$(kafka_cluster_brokers "$id") || n=0
		((n >= want)) && return 0
		sleep 0.2
	done
	die "kafka-$id lists $n brokers, want $want"
}

kafka_cluster_up() {
	local id
	# Whole means no node cut off either (a cut node may still be listed for a few seconds).
	kafka_cluster_heal_all
	if kafka_cluster_answers; then
		log "kafka-cluster ready on 127.0.0.1:${kafka_cluster_ports[0]}-${kafka_cluster_ports[-1]}"
		return 0
	fi
	kafka_jars
	command -v java >/dev/null 2>&1 || install "install a Java runtime (>=17)" default-jre-headless
	# A first start formats the three data folders side by side (a JVM each).
	local formats=() pid
	for id in "${kafka_cluster_ids[@]}"; do
		pid_of "kafka-$id" >/dev/null || { kafka_cluster_format "$id" & formats+=($!); }
	done
	for pid in "${formats[@]}"; do wait "$pid" || exit 1; done
	# All at once: a node finishes starting only when the controller quorum (two of three) is up.
	for id in "${kafka_cluster_ids[@]}"; do kafka_cluster_launch "$id"; done
	for id in "${kafka_cluster_ids[@]}"; do kafka_cluster_wait "$id"; done
	for id in "${kafka_cluster_ids[@]}"; do kafka_cluster_registered "$id"; done
	kafka_cluster_answers || die "kafka-cluster: a node does not list three brokers"
	log "kafka-cluster ready on 127.0.0.1:${kafka_cluster_ports[0]}-${kafka_cluster_ports[-1]}"
}

# kafka_cluster_node_up kafka-N: start one node again from its data (after `kill`) and wait until
# it answers and is registered (with only one other node alive, that is when the controller quorum
# is back).
kafka_cluster_node_up() {
	local id=${1#kafka-}
	kafka_cluster_launch "$id"
	kafka_cluster_wait "$id"
	kafka_cluster_registered "$id"
}

# kafka_cluster_down: SIGTERM every node at once, then wait (SIGKILL after 60 s). One at a time,
# the last node would wait for a controller quorum that is gone before it shuts down.
kafka_cluster_down() {
	local node pid pids=() names=() i
	for node in $(kafka_cluster_nodes); do
		pid=$(pid_of "$node") || continue
		log "$node stopping (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		pids+=("$pid") names+=("$node")
	done
	for i in "${!pids[@]}"; do stop_pid "${names[$i]}" "${pids[$i]}" 60; done
	kafka_cluster_heal_all
}

# ---------------------------------------------------------------- cut and heal

# kafka_cluster_chain: the iptables chain of this cluster's cuts (at most 28 characters).
kafka_cluster_chain() { echo "seckill-kafka-cut-${kafka_cluster_internal_ports[0]}"; }

# kafka_cluster_ipt ARGS...: iptables, waiting for the xtables lock; iptables-legacy where the
# nf_tables one does not work.
kafka_cluster_ipt() {
	if iptables -w -S OUTPUT >/dev/null 2>&1; then
		iptables -w "$@"
	else
		iptables-legacy -w "$@"
	fi
}

# kafka_cluster_rules ID: node ID's two rules, one a line, as iptables arguments after the chain.
kafka_cluster_rules() {
	local id=$1 gid other others=()
	gid=$(kafka_cluster_gid "$id")
	for other in "${kafka_cluster_ids[@]}"; do
		[[ $other == "$id" ]] && continue
		others+=("$(kafka_cluster_internal_port "$other")" "$(kafka_cluster_controller_port "$other")")
	done
	local IFS=,
	echo "-p tcp -d 127.0.0.1 -m multiport --dports $(kafka_cluster_internal_port "$id"),$(kafka_cluster_controller_port "$id") -m owner ! --gid-owner $gid -m comment --comment kafka-$id -j DROP"
	echo "-p tcp -d 127.0.0.1 -m multiport --dports ${others[*]} -m owner --gid-owner $gid -m comment --comment kafka-$id -j DROP"
}

# kafka_cluster_cut kafka-N: cut node N off from the other two (see the header); idempotent.
kafka_cluster_cut() {
	local id=${1#kafka-} chain pid rule
	[[ $(id -u) == 0 ]] || die "cut: needs root (iptables, and nodes started with a group of their own)"
	command -v iptables >/dev/null 2>&1 || die "cut: no iptables; run \`$0 tool iptables\`"
	pid=$(pid_of "$1") || die "cut: $1 is not running"
	# A node started before the nodes had groups of their own would not be matched by the rules.
	[[ $(awk '/^Gid:/ {print $2}' "/proc/$pid/status") == "$(kafka_cluster_gid "$id")" ]] ||
		die "cut: $1 (pid $pid) does not run as group $(kafka_cluster_gid "$id"); stop and start it again"
	chain=$(kafka_cluster_chain)
	kafka_cluster_ipt -S "$chain" >/dev/null 2>&1 || kafka_cluster_ipt -N "$chain"
	kafka_cluster_ipt -C OUTPUT -j "$chain" 2>/dev/null || kafka_cluster_ipt -I OUTPUT 1 -j "$chain"
	while read -r rule; do
		# shellcheck disable=SC2086 # a rule's arguments, split on spaces
		kafka_cluster_ipt -C "$chain" $rule 2>/dev/null || kafka_cluster_ipt -A "$chain" $rule
	done < <(kafka_cluster_rules "$id")
	log "$1 cut off from the other nodes (iptables chain $chain; its clients still reach it on 127.0.0.1:$(kafka_cluster_port "$id"))"
}

# kafka_cluster_heal kafka-N: remove node N's rules (nothing to do when there are none).
kafka_cluster_heal() {
	local id=${1#kafka-} chain rule
	chain=$(kafka_cluster_chain)
	command -v iptables >/dev/null 2>&1 && kafka_cluster_ipt -S "$chain" >/dev/null 2>&1 || {
		log "$1 not cut"
		return 0
	}
	while read -r rule; do
		# shellcheck disable=SC2086
		while kafka_cluster_ipt -C "$chain" $rule 2>/dev/null; do kafka_cluster_ipt -D "$chain" $rule; done
	done < <(kafka_cluster_rules "$id")
	log "$1 healed (no rule of its own left in $chain)"
}

# kafka_cluster_heal_all: remove the chain and its hook, every node healed.
kafka_cluster_heal_all() {
	local chain
	chain=$(kafka_cluster_chain)
	command -v iptables >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && kafka_cluster_ipt -S "$chain" >/dev/null 2>&1 || return 0
	while kafka_cluster_ipt -C OUTPUT -j "$chain" 2>/dev/null; do kafka_cluster_ipt -D OUTPUT -j "$chain"; done
	kafka_cluster_ipt -F "$chain"
	kafka_cluster_ipt -X "$chain"
	log "kafka-cluster: every node healed (chain $chain removed)"
}
