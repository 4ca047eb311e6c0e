package e2e_test

import (
	"testing"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
)

// A fresh api connects to Kafka before it says ready: its first order is
// published over connections it already holds, so the first buyers of a
// sale do not wait for metadata and dials. The api reaches Kafka through a
// proxy (the broker's PROXIED listener, advertised on 19092), which counts
// every connection it serves.
func TestAPIWarmsItsPublisherBeforeReady(t *testing.T) {
	px := proxytest.StartKafka(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, KafkaBrokers: []string{proxytest.KafkaProxied}})
	api := p.StartAPI()
	sale := api.CreateSale(10, 1)
	before := px.Accepted()
	placed, err := api.PlaceOrder(1, "first-buyer", sale.ActivityID, 1)
	if err != nil || placed.Code != 202 {
		t.Fatalf("first order: %+v %v", placed, err)
	}
	if after := px.Accepted(); after != before {
		t.Fatalf("the first order opened %d connections to Kafka: the api was not warm when ready", after-before)
	}
	if px.Connections() == 0 {
		t.Fatal("no connection to Kafka open after the first order")
	}
}
