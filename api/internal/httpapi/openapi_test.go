package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
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

// specCheck validates the test server's answers against docs/openapi.yaml:
// the status must be declared for the operation, and the headers and the
// body must match it. (e2e/openapi_test.go does the same against the
// programs.)
type specCheck struct {
	ts     *testServer
	doc    *openapi3.T
	router routers.Router
	seen   map[string]map[int]bool // "METHOD /path/{template}" -> statuses
}

func newSpecCheck(t *testing.T, ts *testServer) *specCheck {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: ts.url}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &specCheck{ts: ts, doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// do sends r to the test server, checks the status is want and the answer
// matches the spec, and returns the answer.
func (sc *specCheck) do(t *testing.T, r request, want int) response {
	t.Helper()
	res := sc.ts.do(t, sc.ts.url, r)
	if res.status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", r.method, r.path, res.status, want, res.body)
	}
	req, err := http.NewRequest(r.method, sc.ts.url+r.path, bytes.NewReader([]byte(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	route, params, err := sc.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the spec: %v", r.method, r.path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.status,
		Header:                 res.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(res.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s -> %d %s\ndoes not match the spec: %v", r.method, r.path, res.status, res.body, err)
	}
	op := route.Method + " " + route.Path
	if sc.seen[op] == nil {
		sc.seen[op] = map[int]bool{}
	}
	sc.seen[op][res.status] = true
	return res
}

// unseen lists the statuses the spec declares for the operations under
// prefix that no call produced, but those of a fault or a limit (429, 500,
// 503), which a healthy test server does not give.
func (sc *specCheck) unseen(prefix string) []string {
	var out []string
	for path, item := range sc.doc.Paths.Map() {
		if len(path) < len(prefix) || path[:len(prefix)] != prefix {
			continue
		}
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				switch code {
				case "429", "500", "503":
					continue
				}
				var n int
				if _, err := fmt.Sscan(code, &n); err != nil || !sc.seen[method+" "+path][n] {
					out = append(out, method+" "+path+" "+code)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
