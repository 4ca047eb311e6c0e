package httpapi_test

import (
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/placing"
)

const specFile = "../../../docs/openapi.yaml"

// docs/openapi.yaml is a valid OpenAPI document that describes exactly the
// routes the server has, no more and no fewer. (e2e/openapi_test.go checks
// the real answers against it.)
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", specFile, err)
	}
	var inSpec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			inSpec = append(inSpec, method+" "+path)
		}
	}

	h := httpapi.New(&placing.Service{}, httpapi.Services{}, nil, nil, slog.New(slog.DiscardHandler),
		httpapi.WithMetrics(metrics.NewHTTP(prometheus.NewRegistry()), http.NotFoundHandler()))
	param := regexp.MustCompile(`:([a-z_]+)`)
	var served []string
	for _, r := range h.(*gin.Engine).Routes() {
		served = append(served, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(inSpec)
	sort.Strings(served)
	if len(served) == 0 || !equal(inSpec, served) {
		t.Fatalf("the spec and the server differ:\nspec:   %v\nserver: %v", inSpec, served)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
