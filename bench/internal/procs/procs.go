// Package procs starts and stops what the bench runs against: the backing
// services (through scripts/services) and the api and consumer programs,
// built from this module. It stops only what it started.
package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ModuleRoot returns the directory of the main module's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module: run the bench from the repository")
	}
	return filepath.Dir(mod), nil
}

// Services runs scripts/services for the named services and remembers
// which ones it started.
type Services struct {
	root    string
	started []string
}

// EnsureServices starts, with `scripts/services up`, every service of
// checks (by its scripts/services name: redis, mysql, kafka, redis-cluster,
// ...) whose check fails, and waits for it. Services that already answer are
// left alone.
func EnsureServices(ctx context.Context, root string, checks map[string]func(context.Context) error) (*Services, error) {
	s := &Services{root: root}
	var down []string
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		check := checks[name]
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := check(cctx)
		cancel()
		if err != nil {
			down = append(down, name)
		}
	}
	if len(down) == 0 {
		return s, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "services"), append([]string{"up"}, down...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return s, fmt.Errorf("scripts/services up %s: %w", strings.Join(down, " "), err)
	}
	s.started = down
	return s, nil
}

// Started lists the services this run started.
func (s *Services) Started() []string { return s.started }

// Stop stops the services EnsureServices started (their data is kept).
func (s *Services) Stop() error {
	if s == nil || len(s.started) == 0 {
		return nil
	}
	cmd := exec.Command(filepath.Join(s.root, "scripts", "services"), append([]string{"down"}, s.started...)...)
	cmd.Dir = s.root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// Build compiles the programs of this module named by pkgs (default
// ./api and ./consumer) into dir.
func Build(ctx context.Context, root, dir string, pkgs ...string) error {
	if len(pkgs) == 0 {
		pkgs = []string{"./api", "./consumer"}
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, stderr.String())
	}
	return nil
}

// Outcome is how a program run to its end (RunToEnd) ended.
type Outcome struct {
	// Code is the exit code (-1 when a signal ended it).
	Code int
	// Took is from the start to the exit.
	Took time.Duration
	// MaxRSS is the process's peak resident set, in bytes (getrusage's
	// ru_maxrss).
	MaxRSS int64
}

// RunToEnd runs bin with args and env added to the bench's own
// environment, its standard output and error written to the files
// stdoutPath and stderrPath, and waits for it to exit. A non-zero exit is
// an Outcome, not an error; ctx ending kills it.
func RunToEnd(ctx context.Context, bin string, args, env []string, stdoutPath, stderrPath string) (Outcome, error) {
	stdout, err := os.Create(stdoutPath)
	if err != nil {
		return Outcome{}, err
	}
	defer stdout.Close()
	stderr, err := os.Create(stderrPath)
	if err != nil {
		return Outcome{}, err
	}
	defer stderr.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	start := time.Now()
	err = cmd.Run()
	o := Outcome{Took: time.Since(start), Code: -1}
	if cmd.ProcessState == nil {
		return o, fmt.Errorf("run %s: %w", filepath.Base(bin), err)
	}
	o.Code = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		o.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return o, fmt.Errorf("run %s: %w", filepath.Base(bin), err)
	}
	if ctx.Err() != nil {
		return o, ctx.Err()
	}
	return o, nil
}

// Process is one program the bench started.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan error
}

// Start runs bin with env added to the bench's own environment, its output
// appended to logPath.
func Start(name, bin string, env []string, logPath string) (*Process, error) {
	return StartArgs(name, bin, nil, env, logPath)
}

// StartArgs is Start with arguments.
func StartArgs(name, bin string, args, env []string, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		logf.Close()
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to grace, then kills.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	if exited, _ := p.Exited(); exited {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	err := <-p.done
	p.done <- err
	return fmt.Errorf("%s (pid %d) did not stop within %s and was killed", p.Name, p.Pid(), grace)
}

// FreePort returns a loopback TCP port nobody listens on right now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitReady polls url until it answers 200, the process exits, or the
// timeout passes.
func WaitReady(ctx context.Context, url string, p *Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited while starting (%v); see %s", p.Name, err, p.Log)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready at %s after %s: %v; see %s", p.Name, url, timeout, last, p.Log)
}
