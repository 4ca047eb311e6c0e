// Package schematest holds events to their documented JSON Schema
// (docs/schemas/order-event.schema.json), for the tests of every package
// that writes or carries them.
package schematest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/seckill/seckill/pkg/domain/outbox"
)

var (
	once     sync.Once
	compiled *jsonschema.Schema
	err      error
)

// schema is the events' schema, compiled once per test binary with its
// formats asserted (a timestamp that is not a date-time fails).
func schema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		compiled, err = c.Compile(filepath.Join(filepath.Dir(here), "../../../docs/schemas/order-event.schema.json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	return compiled
}

// Check tells how the JSON document raw breaks the schema (nil: it
// follows it); a document that is not JSON fails the test.
func Check(t testing.TB, raw []byte) error {
	t.Helper()
	doc, jerr := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if jerr != nil {
		t.Fatal(jerr)
	}
	return schema(t).Validate(doc)
}

// CheckEvent is Check of e as the outbox's JSON writes it.
func CheckEvent(t testing.TB, e outbox.Event) error {
	t.Helper()
	b, jerr := json.Marshal(e)
	if jerr != nil {
		t.Fatal(jerr)
	}
	return Check(t, b)
}
