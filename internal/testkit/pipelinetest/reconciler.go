package pipelinetest

import (
	"bytes"
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Run is a program started with arguments whose exit code and separate
// standard output and error the test reads (the reconciler, run once).
type Run struct {
	Name   string
	cmd    *exec.Cmd
	done   chan struct{}
	stdout *bytes.Buffer
	stderr *bytes.Buffer
	mu     sync.Mutex
	code   int
	err    error
}

// RunResult is how a Run ended.
type RunResult struct {
	// Code is the exit code (-1 when killed by a signal).
	Code           int
	Stdout, Stderr string
}

// StartArgs runs program with args and the pipeline's environment plus
// env, without waiting for it. It is killed when the test ends.
func (p *Pipeline) StartArgs(program string, args []string, env ...string) *Run {
	p.t.Helper()
	cmd := exec.Command(Binary(p.t, program), args...)
	cmd.Env = append(p.Env(), env...)
	r := &Run{Name: program, cmd: cmd, done: make(chan struct{}), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	cmd.Stdout = lockedWriter{&r.mu, r.stdout}
	cmd.Stderr = lockedWriter{&r.mu, r.stderr}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("pipelinetest: start %s: %v", program, err)
	}
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		r.code, r.err = cmd.ProcessState.ExitCode(), err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.err = nil // a non-zero exit is a result, not a failure
		}
		r.mu.Unlock()
		close(r.done)
	}()
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	})
	return r
}

// Wait waits up to timeout for the program to exit and returns how it
// ended; it fails the test if the program does not exit in time.
func (r *Run) Wait(t testing.TB, timeout time.Duration) RunResult {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		t.Fatalf("pipelinetest: %s did not exit within %v; stderr:\n%s", r.Name, timeout, tail(r.stderr.String(), 4096))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		t.Fatalf("pipelinetest: %s: %v", r.Name, r.err)
	}
	return RunResult{Code: r.code, Stdout: r.stdout.String(), Stderr: r.stderr.String()}
}

// Reconcile runs the reconciler once with args and waits for it (up to a
// minute).
func (p *Pipeline) Reconcile(args ...string) RunResult {
	p.t.Helper()
	return p.StartArgs("reconciler", args).Wait(p.t, time.Minute)
}
