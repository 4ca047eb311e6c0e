// Package cpu measures where the machine's CPU went during a load: the CPU
// time of each process of interest (the bench itself, api, consumer, Redis,
// MySQL, Kafka) and of the whole machine, from /proc, so a report can say
// what was busy and how much was taken by anything else on the box.
package cpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ticksPerSecond is USER_HZ, 100 on every Linux the bench runs on.
const ticksPerSecond = 100

// Proc is one process to watch.
type Proc struct {
	Name string
	Pid  int
}

// Snapshot is the CPU time used so far.
type Snapshot struct {
	At time.Time
	// Busy and Total are the machine's non-idle and total CPU time.
	Busy, Total time.Duration
	// Procs is each watched process's user+system CPU time.
	Procs map[string]time.Duration
}

// Usage is CPU use over an interval, in percent of one CPU (a busy
// 2-CPU machine shows 200).
type Usage struct {
	Seconds float64            `json:"seconds"`
	Machine float64            `json:"machine_busy_pct"`
	Procs   map[string]float64 `json:"process_pct"`
	// Other is the machine's busy time not used by any watched process.
	Other float64 `json:"other_pct"`
	// Capacity is 100 times the number of CPUs.
	Capacity float64 `json:"capacity_pct"`
}

// Take reads /proc for the machine and each process. Processes that are
// gone are left out.
func Take(procs []Proc) (Snapshot, error) {
	s := Snapshot{At: time.Now(), Procs: map[string]time.Duration{}}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	s.Busy, s.Total, err = ParseStat(b)
	if err != nil {
		return s, err
	}
	for _, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
		if err != nil {
			continue
		}
		if d, err := ParseProcStat(b); err == nil {
			s.Procs[p.Name] += d
		}
	}
	return s, nil
}

// ParseStat reads the aggregate "cpu" line of /proc/stat: busy is every
// field but idle and iowait (and the guest fields, already counted in user).
func ParseStat(b []byte) (busy, total time.Duration, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("cpu: unexpected /proc/stat")
	}
	var sum, idle int64
	for i, v := range f[1:] {
		if i >= 8 { // guest, guest_nice
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpu: /proc/stat field %d: %w", i+1, err)
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return ticks(sum - idle), ticks(sum), nil
}

// ParseProcStat reads utime+stime from a /proc/<pid>/stat line. The command
// name may contain spaces and parentheses, so fields count from the last ')'.
func ParseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("cpu: unexpected /proc/pid/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state(3) ppid(4) ... utime(14) stime(15): indexes 11, 12.
	if len(f) < 13 {
		return 0, errors.New("cpu: short /proc/pid/stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("cpu: bad utime/stime")
	}
	return ticks(u + s), nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / ticksPerSecond }

// Between is the usage from a to b on a machine with cpus CPUs.
func Between(a, b Snapshot, cpus int) Usage {
	wall := b.At.Sub(a.At).Seconds()
	u := Usage{Seconds: round1(wall), Procs: map[string]float64{}, Capacity: float64(100 * cpus)}
	if wall <= 0 {
		return u
	}
	pct := func(d time.Duration) float64 { return round1(100 * d.Seconds() / wall) }
	// The machine's counters are summed over CPUs; scale busy share to
	// the same "percent of one CPU" unit.
	if total := b.Total - a.Total; total > 0 {
		u.Machine = round1(float64(cpus) * 100 * float64(b.Busy-a.Busy) / float64(total))
	}
	var ours float64
	for name, end := range b.Procs {
		start, ok := a.Procs[name]
		if !ok {
			continue
		}
		p := pct(end - start)
		u.Procs[name] = p
		ours += p
	}
	u.Other = round1(max(u.Machine-ours, 0))
	return u
}

// Summary is a one-line rendering, biggest first: "api 95%, bench 60%, ...".
func (u Usage) Summary() string {
	names := make([]string, 0, len(u.Procs))
	for n := range u.Procs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return u.Procs[names[i]] > u.Procs[names[j]] })
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", n, u.Procs[n]))
	}
	parts = append(parts, fmt.Sprintf("other %.0f%%", u.Other))
	return fmt.Sprintf("machine %.0f%% of %.0f%%: %s", u.Machine, u.Capacity, strings.Join(parts, ", "))
}

// FindServices finds the pids of redis-server, MariaDB/MySQL and the Kafka
// broker by scanning /proc.
func FindServices() []Proc {
	var out []Proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		exe := filepath.Base(args[0])
		switch {
		case strings.HasPrefix(exe, "redis-server"):
			out = append(out, Proc{"redis", pid})
		case exe == "mariadbd" || exe == "mysqld":
			out = append(out, Proc{"mysql", pid})
		case exe == "java" && strings.Contains(string(cmd), "kafka.Kafka"):
			out = append(out, Proc{"kafka", pid})
		}
	}
	return out
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
