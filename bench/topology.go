package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/seckill/seckill/bench/internal/report"
)

// topology is one set of backing services the bench can run against, by
// name (--topology), instead of the addresses the flags give.
type topology struct {
	name       string
	redisAddr  string // the Redis Cluster's seed nodes
	brokers    []string
	mysqlDSN   string
	programEnv []string // what the started programs need on it
	// Kafka replication of the topics made on it.
	replicationFactor, minInsync int
	// services names the scripts/services service behind each check.
	services map[string]string
}

// topologies are the ones --topology knows (`both` runs cluster, then
// replicated, side by side).
var topologies = map[string]topology{
	// One broker (replication factor 1), the 3-master Redis Cluster
	// without replicas, MySQL without a standby.
	"cluster": {
		name:      "cluster",
		redisAddr: "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003",
		brokers:   []string{"127.0.0.1:9092"},
		mysqlDSN:  "seckill:seckill@tcp(127.0.0.1:3306)/seckill?parseTime=true",
		services:  map[string]string{"redis": "redis-cluster", "mysql": "mysql", "kafka": "kafka"},
	},
	// README "Running replicated": three brokers with the orders topic at
	// replication factor 3 and min.insync.replicas 2, the Redis Cluster with a
	// replica per master, the MariaDB primary with its semi-synchronous
	// standby.
	"replicated": {
		name:              "replicated",
		redisAddr:         "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103,127.0.0.1:7104,127.0.0.1:7105,127.0.0.1:7106",
		brokers:           []string{"127.0.0.1:29092", "127.0.0.1:29093", "127.0.0.1:29094"},
		mysqlDSN:          "seckill:seckill@tcp(127.0.0.1:3307)/seckill?parseTime=true",
		programEnv:        []string{"SECKILL_KAFKA_REPLICATION_FACTOR=3", "SECKILL_KAFKA_MIN_INSYNC_REPLICAS=2"},
		replicationFactor: 3, minInsync: 2,
		services: map[string]string{"redis": "redis-replicas", "mysql": "mysql-standby", "kafka": "kafka-cluster"},
	},
}

// parseTopology turns --topology into the topologies to run in turn (none:
// the flags' addresses).
func parseTopology(v string) ([]topology, error) {
	switch v {
	case "":
		return nil, nil
	case "both":
		return []topology{topologies["cluster"], topologies["replicated"]}, nil
	}
	if t, ok := topologies[v]; ok {
		return []topology{t}, nil
	}
	return nil, fmt.Errorf("--topology %q: want cluster, replicated or both", v)
}

// on is c running against t: its addresses, a Redis Cluster, and its
// program environment before --program-env (which still wins).
func (c options) on(t topology) options {
	c.topology = t.name
	c.redisAddr, c.redisCluster, c.brokers, c.mysqlDSN = t.redisAddr, true, t.brokers, t.mysqlDSN
	c.programEnv = append(append([]string(nil), t.programEnv...), c.programEnv...)
	c.serviceNames = t.services
	c.kafkaReplication, c.kafkaMinInsync = t.replicationFactor, t.minInsync
	return c
}

// serviceName is the scripts/services service behind a check (redis,
// mysql, kafka).
func (c options) serviceName(check string) string {
	if s, ok := c.serviceNames[check]; ok {
		return s
	}
	return check
}

// labelled names a run after the topology it ran on, when there is one.
func labelled(name, topology string) string {
	if topology == "" {
		return name
	}
	return name + " (" + topology + ")"
}

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// chartFile is the PNG file name of a run.
func chartFile(run string) string {
	return strings.Trim(unsafeFile.ReplaceAllString(run, "-"), "-") + ".png"
}

// replicationCost pairs the runs of each scenario on the two topologies of
// --topology both, for the side-by-side table.
func replicationCost(runs []*report.Run) []*report.TopologyRow {
	byScenario := map[string]map[string]*report.Run{}
	var order []string
	for _, r := range runs {
		if r.Topology == "" {
			continue
		}
		scen := strings.TrimSuffix(r.Name, " ("+r.Topology+")")
		if byScenario[scen] == nil {
			byScenario[scen] = map[string]*report.Run{}
			order = append(order, scen)
		}
		byScenario[scen][r.Topology] = r
	}
	var rows []*report.TopologyRow
	for _, scen := range order {
		a, b := byScenario[scen]["cluster"], byScenario[scen]["replicated"]
		if a == nil || b == nil {
			continue
		}
		rows = append(rows, &report.TopologyRow{Scenario: scen, Plain: a, Replicated: b})
	}
	return rows
}
