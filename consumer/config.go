package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// settings is the consumer's configuration, read once at start.
type settings struct {
	level       string
	redis       stockredis.Config
	mysql       orderdb.Config
	kafka       orderevents.Config
	loop        orderevents.RouterConfig
	entries     orderevents.RouterConfig // the draw entries' loop
	drawGrace   time.Duration
	window      time.Duration // the payment window of sales that set none
	sweepAfter  time.Duration
	sweepEvery  time.Duration
	closeEvery  time.Duration
	drawEvery   time.Duration
	healEvery   time.Duration // 0: no watch for lost Redis data
	warmupLead  time.Duration // 0: no warm-up
	relayEvery  time.Duration // the outbox relay's pause between passes
	outboxTopic string
	webhooks    config.Webhooks
	outboxKeep  time.Duration // how long events and their deliveries are kept
	admin       metrics.AdminConfig
	clockOffset time.Duration
	instance    string // names this process in locks and log lines
}

// loadSettings reads and checks the environment; an error lists every
// variable that is wrong.
func loadSettings(lookup func(string) (string, bool)) (settings, error) {
	env := config.New(lookup)
	config.GC(env)
	kcfg := config.Kafka(env)
	s := settings{
		level: config.LogLevel(env),
		redis: config.Redis(env), mysql: config.MySQL(env), kafka: kcfg,
		window: config.PaymentWindow(env),
		loop: orderevents.RouterConfig{
			Brokers:      kcfg.Brokers,
			Topic:        kcfg.Topic,
			GroupID:      env.String("SECKILL_CONSUMER_GROUP", "seckill-consumer"),
			MaxBatch:     env.Int("SECKILL_CONSUMER_BATCH", 2000, 1, 4000),
			Linger:       env.Duration("SECKILL_CONSUMER_LINGER", 5*time.Millisecond),
			DrainTimeout: env.Duration("SECKILL_CONSUMER_DRAIN_TIMEOUT", 30*time.Second),
		},
		drawGrace:   config.DrawGrace(env, kcfg),
		sweepAfter:  env.Duration("SECKILL_SWEEP_AFTER", 10*time.Second),
		sweepEvery:  env.Duration("SECKILL_SWEEP_EVERY", 2*time.Second),
		closeEvery:  env.Duration("SECKILL_CLOSER_EVERY", time.Second),
		drawEvery:   env.Duration("SECKILL_DRAW_EVERY", time.Second),
		healEvery:   config.HealEvery(env),
		warmupLead:  config.WarmupLead(env),
		relayEvery:  env.Duration("SECKILL_OUTBOX_RELAY_EVERY", 50*time.Millisecond),
		outboxTopic: env.String("SECKILL_OUTBOX_TOPIC", outbox.Topic),
		webhooks:    config.WebhookSettings(env),
		outboxKeep:  env.Duration("SECKILL_OUTBOX_RETENTION", 7*24*time.Hour),
		admin:       config.Admin(env, "127.0.0.1:9100"),
		clockOffset: config.TestClockOffset(env),
		instance:    fmt.Sprintf("consumer-%d", os.Getpid()),
	}
	// The entries' loop: their own topic and group, the orders' sizes.
	s.entries = s.loop
	s.entries.Topic, s.entries.GroupID = orderevents.EntriesTopic(s.loop.Topic), s.loop.GroupID+".entries"
	if err := env.Err(); err != nil {
		return s, err
	}
	if err := tracing.Check(os.Getenv); err != nil {
		return s, fmt.Errorf("invalid configuration: %w", err)
	}
	return s, nil
}

// logStart writes the start-up line: the settings an operator checks first.
func (s settings) logStart(log *slog.Logger) {
	log.Info("consumer starting", "redis", s.redis.Addrs, "kafka", s.kafka.Brokers, "topic", s.kafka.Topic,
		"group", s.loop.GroupID, "batch", s.loop.MaxBatch, "sweep_after", s.sweepAfter.String(),
		"heal_every", s.healEvery.String(), "warmup_lead", s.warmupLead.String(),
		"outbox_topic", s.outboxTopic, "relay_every", s.relayEvery.String(),
		"admin_addr", s.admin.Addr, "pprof", s.admin.Pprof, "log_level", s.level)
}
