package main

import (
	"context"
	"fmt"
	"os"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/bench/internal/cpu"
)

// sessionCPU is the CPU time so far of each MySQL server thread serving a
// connection to the bench's database, by thread id. MariaDB (10.5 and
// later) names each connection's thread in PROCESSLIST.TID and runs one
// thread a connection, so this is what the programs' statements cost the
// server, apart from whatever else the server does for others meanwhile
// (other databases' clients, its background threads). nil when the server
// does not say (MySQL, another host, another thread model).
func (e *env) sessionCPU(ctx context.Context) map[int]time.Duration {
	cfg, err := mysqldrv.ParseDSN(e.opts.mysqlDSN)
	if err != nil || cfg.DBName == "" || e.db == nil {
		return nil
	}
	var pid int
	for _, p := range cpu.FindServices() {
		if p.Name == "mysql" {
			pid = p.Pid
		}
	}
	if pid == 0 {
		return nil
	}
	var tids []int
	err = e.db.Gorm().WithContext(ctx).Raw("SELECT TID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
		cfg.DBName).Scan(&tids).Error
	if err != nil {
		return nil
	}
	out := make(map[int]time.Duration, len(tids))
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue
		}
		if d, err := cpu.ParseProcStat(b); err == nil {
			out[tid] = d
		}
	}
	return out
}

// sessionPct is the CPU, in % of one CPU, the sessions used between a and
// b (sessionCPU) over wall: a thread only in b started meanwhile and counts
// whole. -1 when either is unknown.
func sessionPct(a, b map[int]time.Duration, wall time.Duration) float64 {
	if a == nil || b == nil || wall <= 0 {
		return -1
	}
	var used time.Duration
	for tid, end := range b {
		used += end - a[tid]
	}
	return float64(int64(1000*used.Seconds()/wall.Seconds()+0.5)) / 10
}
