package e2e_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The compose file fits together (no engine runs it here, so this is what
// CI can check): the backing services publish the loopback addresses the
// tests and scripts/services use, each has a health check that `make up`
// waits for, the programs wait for them to be healthy, images are pinned,
// and every volume and config named is defined.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		Image       string         `yaml:"image"`
		Build       any            `yaml:"build"`
		Profiles    []string       `yaml:"profiles"`
		Ports       []string       `yaml:"ports"`
		Volumes     []string       `yaml:"volumes"`
		Healthcheck map[string]any `yaml:"healthcheck"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Configs []struct {
			Source string `yaml:"source"`
		} `yaml:"configs"`
	}
	var f struct {
		Services map[string]service `yaml:"services"`
		Volumes  map[string]any     `yaml:"volumes"`
		Configs  map[string]any     `yaml:"configs"`
	}
	// Compose overrides merged (<<) keys; the parser must allow that.
	if err := yaml.UnmarshalWithOptions(b, &f, yaml.AllowDuplicateMapKey()); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}

	backing := map[string][]string{
		"redis":         {"127.0.0.1:6379:6379"},
		"mysql":         {"127.0.0.1:3306:3306"},
		"kafka":         {"127.0.0.1:9092:9092", "127.0.0.1:19093:19093"}, // 19093: the listener fault tests proxy
		"redis-cluster": {"127.0.0.1:7001-7003:7001-7003"},
	}
	for name, ports := range backing {
		s, ok := f.Services[name]
		if !ok {
			t.Errorf("service %s missing", name)
			continue
		}
		if !slices.Equal(s.Ports, ports) {
			t.Errorf("service %s publishes %v, want %v (loopback only, the addresses the tests use)", name, s.Ports, ports)
		}
		if s.Healthcheck["test"] == nil {
			t.Errorf("service %s has no health check for `up --wait`", name)
		}
	}
	if !slices.Equal(f.Services["redis-cluster"].Profiles, []string{"cluster"}) {
		t.Errorf("redis-cluster profiles %v: it runs only when named (make up)", f.Services["redis-cluster"].Profiles)
	}

	// make up names exactly the backing services.
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`docker compose up -d --wait ([a-z -]+);`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no `docker compose up -d --wait ...` in up")
	}
	named := strings.Fields(string(m[1]))
	for name := range backing {
		if !slices.Contains(named, name) {
			t.Errorf("make up does not start %s (it starts %v)", name, named)
		}
	}

	// The replicated profile: every node on the host's network (the addresses scripts/services
	// uses), with a health check, and make chaos-cluster names services that exist.
	type replicated struct {
		Services map[string]struct {
			Profiles    []string       `yaml:"profiles"`
			NetworkMode string         `yaml:"network_mode"`
			Healthcheck map[string]any `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	var rf replicated
	if err := yaml.UnmarshalWithOptions(b, &rf, yaml.AllowDuplicateMapKey()); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"kafka-1", "kafka-2", "kafka-3", "redis-7101", "redis-7102", "redis-7103", "redis-7104", "redis-7105",
		"redis-7106", "redis-replicas", "mysql-3307", "mysql-3308", "mysql-standby"}
	for _, name := range nodes {
		s, ok := rf.Services[name]
		switch {
		case !ok:
			t.Errorf("replicated service %s missing", name)
		case !slices.Equal(s.Profiles, []string{"replicated"}) || s.NetworkMode != "host":
			t.Errorf("service %s: profiles %v, network_mode %q; want [replicated] and host", name, s.Profiles, s.NetworkMode)
		case s.Healthcheck["test"] == nil:
			t.Errorf("service %s has no health check for `up --wait`", name)
		}
	}
	m = regexp.MustCompile(`REPLICATED_DOCKER := ([a-z0-9 -]+)\n`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no REPLICATED_DOCKER")
	}
	for _, name := range strings.Fields(string(m[1])) {
		if _, ok := rf.Services[name]; !ok {
			t.Errorf("make chaos-cluster starts %s, which docker-compose.yml does not define", name)
		}
	}

	pinned := regexp.MustCompile(`^[a-z0-9./-]+:v?[0-9][0-9A-Za-z.-]*$`)
	for name, s := range f.Services {
		if s.Image != "" && s.Build == nil && !pinned.MatchString(s.Image) {
			t.Errorf("service %s image %q is not pinned to a version", name, s.Image)
		}
		for dep, d := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown %s", name, dep)
			}
			if _, isBacking := backing[dep]; isBacking && d.Condition != "service_healthy" {
				t.Errorf("service %s starts before %s is healthy (condition %q)", name, dep, d.Condition)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := f.Volumes[src]; !ok {
					t.Errorf("service %s mounts undefined volume %s", name, src)
				}
			} else if _, err := os.Stat("../" + src); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
		}
		for _, c := range s.Configs {
			if _, ok := f.Configs[c.Source]; !ok {
				t.Errorf("service %s uses undefined config %s", name, c.Source)
			}
		}
	}
	for _, prog := range []string{"api", "consumer", "reconciler"} {
		s, ok := f.Services[prog]
		if !ok || s.Build == nil {
			t.Errorf("program %s missing or not built from the Dockerfile", prog)
			continue
		}
		for _, dep := range []string{"redis", "mysql", "kafka"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("program %s does not wait for %s", prog, dep)
			}
		}
	}
}
