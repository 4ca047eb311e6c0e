// Package otlptest is a small OTLP/HTTP trace receiver on loopback: point a
// program's OTEL_EXPORTER_OTLP_ENDPOINT at it to read the spans it exports
// (the end-to-end tests) or just to count them (the bench's sink).
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span, flattened.
type Span struct {
	Service      string
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	// Attrs are the span's attributes, their values as strings.
	Attrs map[string]string
	// Links are the trace ids of the span's links.
	Links []string
	// Error is true for a span with status ERROR.
	Error bool
}

// Receiver accepts POST /v1/traces (protobuf, gzip or not).
type Receiver struct {
	// URL is the base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	keep bool
	srv  *http.Server
	ln   net.Listener

	mu       sync.Mutex
	spans    []Span
	requests int64
	count    int64
	bytes    int64
}

// Start listens on a free loopback port. keep makes it store the spans
// (Spans); without it, it only counts them (Stats).
func Start(keep bool) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), keep: keep, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.traces)
	r.srv = &http.Server{Handler: mux}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops it.
func (r *Receiver) Close() error { return r.srv.Close() }

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	n := int64(0)
	for _, rs := range ex.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = value(a.Value)
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				n++
				if !r.keep {
					continue
				}
				sp := Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), ParentSpanID: hex.EncodeToString(s.ParentSpanId),
					Attrs: map[string]string{}, Error: s.GetStatus().GetCode() == 2}
				for _, a := range s.Attributes {
					sp.Attrs[a.Key] = value(a.Value)
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.TraceId))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.requests++
	r.count += n
	r.bytes += int64(len(b))
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns a copy of the spans received so far (keep only).
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Stats says how many export requests, spans and protobuf bytes arrived.
func (r *Receiver) Stats() (requests, spans, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.count, r.bytes
}
