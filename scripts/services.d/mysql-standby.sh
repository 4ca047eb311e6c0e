# shellcheck shell=bash
# mysql-standby: a MariaDB primary with a standby (docs/replicated.md), sourced by
# scripts/services.
#
#   mysql-3307  127.0.0.1:3307  the primary at first     data/mysql-3307
#   mysql-3308  127.0.0.1:3308  the standby at first     data/mysql-3308
#
# The same mariadbd binary as the single server, user seckill/seckill on both. Replication is
# GTID-based (gtid_strict_mode, binlog_format ROW, sync_binlog 1, log_slave_updates on both so
# the roles can swap) and semi-synchronous: rpl_semi_sync_master_wait_point AFTER_SYNC, so a
# COMMIT returns only once the standby has the transaction in its relay log; when the standby
# is gone (no semi-sync client left) the primary goes on asynchronously at once; a connected
# standby that is slow to acknowledge holds the commits instead, up to
# rpl_semi_sync_master_timeout (30 s; a standby slow for a second or two under load must not drop
# out of semi-sync, or a crash of the primary right then loses acknowledged orders); after that
# the primary goes on asynchronously too, and turns semi-sync on again by itself once the standby
# has caught up. Why these two and not MariaDB's defaults: docs/adr/0008-mariadb-standby-waits.md.
#
# The standby runs read_only=1. The seckill user has ALL PRIVILEGES but not READ_ONLY ADMIN
# (revoked), so read_only binds it: the programs cannot write to a standby by mistake. The
# standby reads the primary's binlog as the user repl/repl (REPLICATION SLAVE only).
#
# Which node is the primary is kept in data/mysql-standby.primary (3307 until a switch-over):
# `scripts/services promote mysql-3308` writes it. `up`/`start` start the primary writable and
# the other node read_only, and make the other node replicate from the primary if it does not:
# a node that was the primary before a switch-over comes back as the new standby (its GTID
# position is its own binlog's). When that fails because the node holds transactions the
# primary does not have (it crashed with commits the standby never received), `scripts/services
# reseed NODE` wipes the standby and copies everything again from the primary's binlog (binlogs
# are never purged here, so the primary's holds every transaction since the first start).
# docs/operations.md has the runbook.
#
# Environment: SECKILL_MYSQL_STANDBY_PORTS  the two nodes' ports ("3307 3308"; the nodes are named
# after them), for a second, private pair in its own SECKILL_SERVICES_DIR (the replicated soak's).
# MYSQL_PROMOTE_WAIT  seconds `promote` waits for the standby to apply what it
# received before it refuses (default 60).

# shellcheck disable=SC2206 # a list of ports, split on spaces
mysql_standby_ports=(${SECKILL_MYSQL_STANDBY_PORTS:-3307 3308})

mysql_standby_nodes() { printf 'mysql-%s\n' "${mysql_standby_ports[@]}"; }

# msb_primary: the port of the current primary.
msb_primary() {
	local f=$data_dir/mysql-standby.primary
	if [[ -s $f ]]; then cat "$f"; else echo "${mysql_standby_ports[0]}"; fi
}

# msb_other PORT: the other node's port.
msb_other() {
	if [[ $1 == "${mysql_standby_ports[0]}" ]]; then echo "${mysql_standby_ports[1]}"; else echo "${mysql_standby_ports[0]}"; fi
}

mysql_standby_addr() { echo "127.0.0.1:$(msb_primary)"; }

# msb_sql PORT SQL: SQL as the server's admin over the node's socket (tab-separated, no names).
msb_sql() {
	"$(mysql_client)" --no-defaults -u"$(id -un)" --socket="$run_dir/mysql-$1.sock" --connect-timeout=2 -Nse "$2"
}

# msb_tcp PORT SQL: SQL as seckill over TCP.
msb_tcp() {
	MYSQL_PWD=seckill "$(mysql_client)" --no-defaults --protocol=tcp -h127.0.0.1 -P"$1" -useckill \
		--connect-timeout=2 -Nse "$2"
}

# msb_slave_status PORT [USER]: SHOW SLAVE STATUS, one "Field: value" a line (empty when not a
# replica), as the admin over the socket, or as seckill over TCP.
msb_slave_status() {
	if [[ ${2:-} == seckill ]]; then
		MYSQL_PWD=seckill "$(mysql_client)" --no-defaults --protocol=tcp -h127.0.0.1 -P"$1" -useckill \
			--connect-timeout=2 -se 'SHOW SLAVE STATUS\G'
	else
		"$(mysql_client)" --no-defaults -u"$(id -un)" --socket="$run_dir/mysql-$1.sock" --connect-timeout=2 \
			-se 'SHOW SLAVE STATUS\G'
	fi
}

# msb_slave_field PORT FIELD: one field of SHOW SLAVE STATUS (empty when not a replica).
msb_slave_field() {
	msb_slave_status "$1" 2>/dev/null | sed -n "s/^ *$2: //p"
}

# msb_replicating PORT [USER]: the node's replica threads both run.
msb_replicating() {
	local status
	status=$(msb_slave_status "$1" "${2:-}" 2>/dev/null) || return 1
	grep -q '^ *Slave_IO_Running: Yes$' <<<"$status" && grep -q '^ *Slave_SQL_Running: Yes$' <<<"$status"
}

mysql_standby_answers() {
	local primary standby
	primary=$(msb_primary)
	standby=$(msb_other "$primary")
	[[ $(msb_tcp "$primary" 'SELECT @@read_only' 2>/dev/null) == 0 ]] &&
		[[ $(msb_tcp "$standby" 'SELECT @@read_only' 2>/dev/null) == 1 ]] &&
		msb_replicating "$standby" seckill
}

# msb_config PORT: write the node's option file for its current role.
msb_config() {
	local port=$1 read_only=1 semi_master=0
	[[ $port == "$(msb_primary)" ]] && read_only=0 semi_master=1
	cat >"$run_dir/mysql-$port.cnf" <<-EOF
		# generated by scripts/services (mysql-standby); the server reads only this file
		[mysqld]
		datadir = $data_dir/mysql-$port
		socket = $run_dir/mysql-$port.sock
		port = $port
		bind-address = 127.0.0.1
		pid-file = $run_dir/mysql-$port.pid
		tmpdir = $tmp_dir
		skip-name-resolve
		character-set-server = utf8mb4
		collation-server = utf8mb4_unicode_ci
		innodb_buffer_pool_size = 128M
		innodb_log_file_size = 64M
		innodb_flush_log_at_trx_commit = 1
		max_connections = 300
		log-error = $log_dir/mysql-$port.err
		server_id = $port
		log_bin = mysql-bin
		log_slave_updates = 1
		binlog_format = ROW
		sync_binlog = 1
		gtid_strict_mode = 1
		relay_log = relay-bin
		read_only = $read_only
		rpl_semi_sync_master_enabled = $semi_master
		rpl_semi_sync_slave_enabled = 1
		rpl_semi_sync_master_wait_point = AFTER_SYNC
		rpl_semi_sync_master_timeout = 30000
		rpl_semi_sync_master_wait_no_slave = OFF
	EOF
}

# msb_bootstrap PORT: the database and the users, on the primary (replicated to the standby).
msb_bootstrap() {
	"$(mysql_client)" --no-defaults -u"$(id -un)" --socket="$run_dir/mysql-$1.sock" <<-'EOF'
		CREATE DATABASE IF NOT EXISTS seckill CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
		CREATE USER IF NOT EXISTS 'seckill'@'%' IDENTIFIED BY 'seckill';
		CREATE USER IF NOT EXISTS 'seckill'@'localhost' IDENTIFIED BY 'seckill';
		CREATE USER IF NOT EXISTS 'seckill'@'127.0.0.1' IDENTIFIED BY 'seckill';
		GRANT ALL PRIVILEGES ON *.* TO 'seckill'@'%' WITH GRANT OPTION;
		GRANT ALL PRIVILEGES ON *.* TO 'seckill'@'localhost' WITH GRANT OPTION;
		GRANT ALL PRIVILEGES ON *.* TO 'seckill'@'127.0.0.1' WITH GRANT OPTION;
		REVOKE READ_ONLY ADMIN ON *.* FROM 'seckill'@'%', 'seckill'@'localhost', 'seckill'@'127.0.0.1';
		CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
		GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';
	EOF
}

# msb_gtid_in STATE POS: every GTID of POS (domain-server-seq, comma-separated) is in a binlog
# whose @@gtid_binlog_state is STATE (the last seq of each domain and server): a GTID of the same
# domain and server with a seq at least as high.
msb_gtid_in() {
	local state=$1 pos=$2 g h d s n hd hs hn found
	for g in ${pos//,/ }; do
		IFS=- read -r d s n <<<"$g"
		found=
		for h in ${state//,/ }; do
			IFS=- read -r hd hs hn <<<"$h"
			if [[ $hd == "$d" && $hs == "$s" ]] && ((hn >= n)); then
				found=1
				break
			fi
		done
		[[ -n $found ]] || return 1
	done
}

# msb_seq_reached POS WANT: for every domain of the position WANT, POS is at the same seq or past
# it (POS and WANT are points of one stream: the primary's binlog, as the replica receives it).
msb_seq_reached() {
	local pos=$1 want=$2 g h d n hd hn found
	for g in ${want//,/ }; do
		IFS=- read -r d _ n <<<"$g"
		found=
		for h in ${pos//,/ }; do
			IFS=- read -r hd _ hn <<<"$h"
			if [[ $hd == "$d" ]] && ((hn >= n)); then
				found=1
				break
			fi
		done
		[[ -n $found ]] || return 1
	done
}

# msb_follow PORT PRIMARY: make the node a replica of PRIMARY, from its own GTID position. A node
# whose binlog holds a transaction the primary's lacks (it crashed as the primary with commits
# the standby never acknowledged) is refused before it connects: it cannot follow, and it must
# not look as if it did (MariaDB refuses it with error 1236 only once its IO thread has
# connected, a moment after the threads first say they run).
msb_follow() {
	local port=$1 primary=$2 own state
	own=$(msb_sql "$port" 'SELECT @@gtid_binlog_pos') || die "mysql-$port: could not read its GTID position"
	state=$(msb_sql "$primary" 'SELECT @@gtid_binlog_state') ||
		die "mysql-$port: could not read the GTID state of the primary 127.0.0.1:$primary"
	msb_gtid_in "$state" "$own" ||
		die "mysql-$port holds transactions the primary 127.0.0.1:$primary lacks (its binlog ends at $own, the primary's state is $state),
  so it cannot follow it (it crashed as the primary with commits the standby never received);
  copy it again from the primary: $0 reseed mysql-$port"
	log "mysql-$port: replicating from 127.0.0.1:$primary (GTID position: its own binlog's)"
	msb_sql "$port" "STOP SLAVE; SET GLOBAL read_only = 1; SET GLOBAL rpl_semi_sync_master_enabled = 0;
		SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos;
		CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $primary, MASTER_USER = 'repl',
			MASTER_PASSWORD = 'repl', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
		START SLAVE" || die "mysql-$port: could not set up replication from 127.0.0.1:$primary"
}

mysql_standby_up() {
	local primary
	primary=$(msb_primary)
	mysql_standby_node_up "mysql-$primary"
	mysql_standby_node_up "mysql-$(msb_other "$primary")"
	log "mysql-standby ready: primary 127.0.0.1:$primary, standby 127.0.0.1:$(msb_other "$primary") (replicating)"
}

# mysql_standby_node_up NODE: start the node (if it is not running) in its role, and wait until
# it answers: the primary writable, the standby read-only with both replica threads running.
mysql_standby_node_up() {
	local node=$1 port=${1#mysql-} primary pid user sock fresh=
	primary=$(msb_primary)
	sock=$run_dir/mysql-$port.sock
	user=$(id -un)
	if ! pid=$(pid_of "$node"); then
		port_open "$port" && die "127.0.0.1:$port is in use by something this script did not start; mysql-standby needs ports ${mysql_standby_ports[*]}"
		local server install_db
		server=$(command -v mariadbd || command -v mysqld || true)
		install_db=$(command -v mariadb-install-db || command -v mysql_install_db || true)
		if [[ -z $server || -z $install_db ]] || ! command -v "$(mysql_client)" >/dev/null 2>&1; then
			install "install mariadb-server (>=10.6)" mariadb-server mariadb-client
			server=$(command -v mariadbd || command -v mysqld || true)
			install_db=$(command -v mariadb-install-db || command -v mysql_install_db || true)
			[[ -n $server && -n $install_db ]] || die "mariadb-server installed, but mariadbd/mariadb-install-db not found"
		fi
		msb_config "$port"
		if [[ ! -d $data_dir/mysql-$port/mysql ]]; then
			[[ $port == "$primary" ]] || fresh=1
			log "$node: initialising $data_dir/mysql-$port"
			rm -rf "$data_dir/mysql-$port"
			mkdir -p "$data_dir/mysql-$port"
			# No binlog while the system tables are made: a node's binlog holds only
			# what replicates.
			"$install_db" --no-defaults --user="$user" --datadir="$data_dir/mysql-$port" \
				--auth-root-authentication-method=socket --skip-test-db >>"$log_dir/mysql-$port.log" 2>&1 || {
				show_log "$log_dir/mysql-$port.log"
				rm -rf "$data_dir/mysql-$port"
				die "mariadb-install-db failed for $node"
			}
		fi
		rm -f "$sock"
		launch "$node" "$log_dir/mysql-$port.log" "$server" --defaults-file="$run_dir/mysql-$port.cnf" --user="$user"
		pid=$(<"$run_dir/$node.pid")
		log "$node starting (pid $pid)"
	fi
	local i
	for ((i = 0; i < 300; i++)); do
		[[ -S $sock ]] && msb_sql "$port" 'SELECT 1' >/dev/null 2>&1 && break
		kill -0 "$pid" 2>/dev/null || { show_log "$log_dir/mysql-$port.err"; die "$node exited while starting"; }
		sleep 0.2
	done
	((i < 300)) || { show_log "$log_dir/mysql-$port.err"; die "$node did not answer on $sock"; }

	if [[ $port == "$primary" ]]; then
		[[ -z $(msb_slave_field "$port" Master_Host) ]] ||
			die "$node is the primary (data/mysql-standby.primary) but replicates from another server; promote it or fix the file"
		msb_sql "$port" 'SET GLOBAL read_only = 0; SET GLOBAL rpl_semi_sync_master_enabled = 1' ||
			die "$node: could not make it writable"
		msb_bootstrap "$port" >/dev/null || die "$node: could not create the database and users"
		msb_tcp "$port" 'SELECT 1' >/dev/null 2>&1 || die "$node: seckill cannot log in over TCP"
		log "$node ready on 127.0.0.1:$port (primary, pid $pid)"
		return 0
	fi
	msb_sql "$port" 'SET GLOBAL read_only = 1' || die "$node: could not make it read-only"
	if [[ -z $(msb_slave_field "$port" Master_Host) ]]; then
		[[ -n $fresh ]] && log "$node: a fresh standby copies everything from 127.0.0.1:$primary's binlog"
		msb_follow "$port" "$primary"
	elif [[ $(msb_slave_field "$port" Master_Port) != "$primary" ]]; then
		die "$node replicates from port $(msb_slave_field "$port" Master_Port), not from the primary $primary"
	fi
	# Ready once it has received everything the primary had written when the wait began: the
	# threads run and the IO thread is past that point (it is connected and streaming, not
	# about to be refused).
	local target
	target=$(msb_sql "$primary" 'SELECT @@gtid_binlog_pos') || die "$node: could not read the primary's GTID position"
	for ((i = 0; i < 300; i++)); do
		if msb_replicating "$port" && msb_seq_reached "$(msb_slave_field "$port" Gtid_IO_Pos)" "$target" &&
			msb_tcp "$port" 'SELECT 1' >/dev/null 2>&1; then
			log "$node ready on 127.0.0.1:$port (standby of 127.0.0.1:$primary, read-only, received up to ${target:-the start}, pid $pid)"
			return 0
		fi
		# An error of the replica threads does not go away by waiting.
		if [[ -n $(msb_slave_field "$port" Last_IO_Error) || -n $(msb_slave_field "$port" Last_SQL_Error) ]] &&
			((i > 25)); then
			break
		fi
		sleep 0.2
	done
	msb_slave_status "$port" 2>/dev/null | grep -E 'Running:|Last_(IO|SQL)_Error:|Gtid_IO_Pos:' >&2 || true
	die "$node does not replicate from 127.0.0.1:$primary; if it holds transactions the primary lacks
  (it crashed as the primary), copy it again from the primary: $0 reseed $node"
}

# msb_applied_all PORT: the replica applied every transaction it received.
msb_applied_all() {
	local port=$1 io slave
	io=$(msb_slave_field "$port" Gtid_IO_Pos)
	slave=$(msb_sql "$port" 'SELECT @@gtid_slave_pos')
	[[ $(tr ',' '\n' <<<"$io" | sort) == $(tr ',' '\n' <<<"$slave" | sort) ]] &&
		[[ $(msb_slave_field "$port" Master_Log_File) == $(msb_slave_field "$port" Relay_Master_Log_File) ]] &&
		[[ $(msb_slave_field "$port" Read_Master_Log_Pos) == $(msb_slave_field "$port" Exec_Master_Log_Pos) ]]
}

# cmd_promote NODE: make the standby NODE the primary, once the old primary is stopped and NODE
# has applied everything it received. Refuses otherwise; changes nothing then.
cmd_promote() {
	[[ $# -eq 1 ]] || die "promote: name one node (${mysql_standby_ports[*]/#/mysql-})"
	local node=$1 port=${1#mysql-} old io i
	[[ " ${mysql_standby_ports[*]} " == *" $port "* && $node == mysql-* ]] || die "promote: '$node' is not a node of mysql-standby"
	pid_of "$node" >/dev/null || die "promote: $node is not running"
	old=$(msb_slave_field "$port" Master_Port)
	[[ -n $old ]] || die "promote: $node is not a replica (the primary already?)"
	if port_open "$old"; then
		die "promote: the primary 127.0.0.1:$old still runs; stop it first (\`$0 stop mysql-$old\`): two writable servers would each take orders"
	fi
	[[ -z $(msb_slave_field "$port" Last_SQL_Error) ]] ||
		die "promote: $node's SQL thread stopped on an error: $(msb_slave_field "$port" Last_SQL_Error)"
	# 1236: the primary refused its position; it holds transactions the primary lacks, and never
	# received what the primary committed since.
	[[ $(msb_slave_field "$port" Last_IO_Errno) != 1236 ]] ||
		die "promote: $node never followed the primary (it diverged: $(msb_slave_field "$port" Last_IO_Error)); it lacks what the primary committed"
	# Wait (up to MYSQL_PROMOTE_WAIT seconds, 60) until what the IO thread received is applied.
	io=$(msb_slave_field "$port" Gtid_IO_Pos)
	local start=$SECONDS
	if ! msb_applied_all "$port"; then
		log "promote: waiting for $node to apply what it received (received $io, applied $(msb_sql "$port" 'SELECT @@gtid_slave_pos'))"
		while ((SECONDS - start < ${MYSQL_PROMOTE_WAIT:-60})); do
			msb_applied_all "$port" && break
			[[ -z $(msb_slave_field "$port" Last_SQL_Error) ]] || break
			sleep 0.2
		done
		msb_applied_all "$port" ||
			die "promote: $node has not applied everything it received (received $io, applied $(msb_sql "$port" 'SELECT @@gtid_slave_pos')); not promoted"
		log "promote: $node applied everything it received after $((SECONDS - start)) s"
	fi
	msb_sql "$port" "STOP SLAVE" || die "promote: STOP SLAVE failed on $node"
	# The IO thread may have received more while the SQL thread was checked.
	if ! msb_applied_all "$port"; then
		msb_sql "$port" "START SLAVE" || true
		die "promote: $node received more while stopping; not promoted, try again"
	fi
	msb_sql "$port" "RESET SLAVE ALL; SET GLOBAL rpl_semi_sync_master_enabled = 1; SET GLOBAL read_only = 0" ||
		die "promote: could not make $node writable"
	echo "$port" >"$data_dir/mysql-standby.primary"
	msb_config "$port"
	[[ -f $run_dir/mysql-$old.cnf ]] && msb_config "$old"
	log "$node is the primary (GTID $(msb_sql "$port" 'SELECT @@gtid_binlog_pos')); point SECKILL_MYSQL_DSN at 127.0.0.1:$port;
  \`$0 start mysql-$old\` brings the old primary back as the standby"
}

# cmd_reseed NODE: wipe the standby NODE and copy it again from the primary (its whole binlog).
cmd_reseed() {
	[[ $# -eq 1 ]] || die "reseed: name one node"
	local node=$1 port=${1#mysql-} pid
	[[ " ${mysql_standby_ports[*]} " == *" $port "* && $node == mysql-* ]] || die "reseed: '$node' is not a node of mysql-standby"
	[[ $port != "$(msb_primary)" ]] || die "reseed: $node is the primary; promote the other node first"
	if pid=$(pid_of "$node"); then stop_pid "$node" "$pid" 60; fi
	log "$node: wiping $data_dir/mysql-$port"
	rm -rf "$data_dir/mysql-$port"
	mysql_standby_node_up "$node"
}
