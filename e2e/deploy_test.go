package e2e_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/goccy/go-yaml"
)

// The Kubernetes manifests parse, name only the three programs, and read
// their settings from the ConfigMap and Secret they define.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../deploy/k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	type container struct {
		Command []string `yaml:"command"`
		EnvFrom []struct {
			ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
			SecretRef    *struct{ Name string } `yaml:"secretRef"`
		} `yaml:"envFrom"`
	}
	type podSpec struct {
		Containers []container `yaml:"containers"`
	}
	type doc struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Template    struct{ Spec podSpec }
			JobTemplate struct {
				Spec struct{ Template struct{ Spec podSpec } }
			} `yaml:"jobTemplate"`
		}
	}
	defined := map[string]bool{}
	var pods []podSpec
	programs := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range bytes.Split(b, []byte("\n---\n")) {
			var d doc
			if err := yaml.Unmarshal(part, &d); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if d.APIVersion == "" || d.Kind == "" || d.Metadata.Name == "" {
				t.Fatalf("%s: a document lacks apiVersion, kind or metadata.name", f)
			}
			defined[d.Kind+"/"+d.Metadata.Name] = true
			pods = append(pods, d.Spec.Template.Spec, d.Spec.JobTemplate.Spec.Template.Spec)
		}
	}
	for _, p := range pods {
		for _, c := range p.Containers {
			if len(c.Command) != 1 || !slices.Contains([]string{"api", "consumer", "reconciler"}, c.Command[0]) {
				t.Fatalf("container command %v is not one of the programs", c.Command)
			}
			programs[c.Command[0]] = true
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil && !defined["ConfigMap/"+ef.ConfigMapRef.Name] ||
					ef.SecretRef != nil && !defined["Secret/"+ef.SecretRef.Name] {
					t.Fatalf("%s reads a ConfigMap or Secret the manifests do not define", c.Command[0])
				}
			}
		}
	}
	if len(programs) != 3 || !defined["CronJob/seckill-reconciler"] {
		t.Fatalf("want the api, the consumer and the reconciler as a CronJob; got %v", programs)
	}
}
