package e2e_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/kafkatest"
	"github.com/seckill/seckill/pkg/pipelinetest"
)

// The README's first command, `make run` (scripts/dev-run), brings up the
// pipeline with a demo sale and prints an order command that works; Ctrl-C
// stops the api and the consumer cleanly.
func TestMakeRun(t *testing.T) {
	t.Parallel()
	addr := pipelinetest.FreeAddr(t)
	cmd := exec.Command("make", "--no-print-directory", "run")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "SECKILL_HTTP_ADDR="+addr, "SECKILL_ADMIN_ADDR=off",
		// Its own topic and keys, so it shares nothing with the other tests.
		"SECKILL_KAFKA_TOPIC="+kafkatest.Name("devrun"), "SECKILL_REDIS_PREFIX="+kafkatest.Name("devrun"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})

	// Read until the ready banner and the order command it prints.
	var printed strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Then poll it with") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("make run ended before it was ready: %v\n%s\n%s", err, printed.String(), stderr.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run not ready after 3 minutes:\n%s\n%s", printed.String(), stderr.String())
	}

	// The api it runs is alive and reports every dependency reachable.
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, dep := range []string{`"redis":"ok"`, `"mysql":"ok"`, `"kafka":"ok"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(rb), dep) {
			t.Fatalf("readyz: %d %s, want 200 with %s", resp.StatusCode, rb, dep)
		}
	}

	// Place the order exactly as the banner says.
	text := printed.String()
	tok := regexp.MustCompile(`Authorization: Bearer ([A-Za-z0-9._-]+)`).FindStringSubmatch(text)
	body := regexp.MustCompile(`-d '(\{"activity_id": \d+, "quantity": 1\})'`).FindStringSubmatch(text)
	if tok == nil || body == nil {
		t.Fatalf("no order command in the banner:\n%s", text)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/orders", strings.NewReader(body[1]))
	req.Header.Set("Authorization", "Bearer "+tok[1])
	req.Header.Set("Idempotency-Key", fmt.Sprintf("devrun-%d", time.Now().UnixNano()))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(b), `"order_no"`) {
		t.Fatalf("the printed order command: %d %s", resp.StatusCode, b)
	}

	// Ctrl-C (to the whole foreground group, as a terminal sends it).
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("make run did not stop within 60s of Ctrl-C:\n%s", stderr.String())
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("the api still answers after Ctrl-C")
	}
}
