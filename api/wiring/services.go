// Package wiring builds the api's use cases over the concrete stores: the
// one place the program and the handlers' tests share, so both run the
// services the same way.
package wiring

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/service/codes"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/sales"
	"github.com/seckill/seckill/pkg/service/waitingroom"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// Services builds the use cases the handlers call besides placing, over
// MySQL's stores and svc's Redis stores, numbers and clock. privateHooks
// lets webhook endpoints be on loopback or private addresses. entries is
// the draw entries' path through Redis and Kafka (ADR 7); nil writes each
// entry to MySQL in its own transaction (ADR 6).
func Services(svc *placing.Service, db *orderdb.DB, log *slog.Logger, privateHooks bool, entries *draws.Accepting) httpapi.Services {
	now := time.Now
	if svc.Now != nil {
		now = svc.Now
	}
	lc := &lifecycle.Service{Tx: db, Events: db.Outbox, DB: db.Orders, Payments: db.Payments, Stock: svc.Reservations, Numbers: svc.Numbers,
		Lists: db.Orders, Refunds: db.Payments, Log: log}
	out := httpapi.Services{
		Lifecycle: lc,
		Draws:     &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Summaries: db.Draws, Now: now, Accepting: entries},
		Sales: &sales.Service{Tx: db, Sales: db.Activities, Warmups: db.Activities, Restocks: db.Restocks, Items: db.Activities,
			Tallies: db.Activities, Lists: db.Activities, Stock: svc.Stock, Closer: lc, Now: now, SoldOut: svc.ClearSoldOut,
			PaymentWindow: svc.PaymentWindow, Log: log},
	}
	// The Redis store that takes entries closes them at a draw sale's end.
	if entries != nil {
		if c, ok := entries.Taking.(sales.EntriesCloser); ok {
			out.Sales.Entries = c
		}
	}
	out.Webhooks = &webhooks.Service{Store: db.Webhooks, NewSecret: webhook.NewSecret, Now: now,
		CheckURL: func(ctx context.Context, raw string) error { return webhook.CheckURL(ctx, raw, privateHooks) }}
	out.Sales.RoomControls, out.Sales.Audit = db.Rooms, db.Audit
	out.Codes = &codes.Service{Tx: db, Store: db.Codes, Sales: db.Activities, Audit: db.Audit, Key: db.Orders.OrderNumberKey,
		Now: now, Log: log}
	// The codes in Redis: written through by the operator's changes,
	// loaded by each warm-up of a coded sale.
	if st, ok := svc.Stock.(*stockredis.Stock); ok {
		out.Codes.Live = st.Codes()
		out.Sales.Codes, out.Sales.CodeReader = st.Codes(), db.Codes
	}
	if svc.Rooms != nil {
		out.Sales.LiveRooms = svc.Rooms
		out.Rooms = waitingroom.New(svc.Rooms, db.Rooms, log, now)
		out.Rooms.PaymentWindow, out.Rooms.HeldOrder = svc.PaymentWindow, svc.HeldOrder
		out.Rooms.CodeKey = svc.Codes.Key
		if svc.Codes.Guesses != nil {
			out.Rooms.Guesses = waitingroom.CodeGuesses{Counter: svc.Codes.Guesses, PerBuyer: svc.Codes.PerBuyer,
				PerAddr: svc.Codes.PerAddr, Log: log}
		}
		if st, ok := svc.Stock.(*stockredis.Stock); ok {
			out.Rooms.Codes = st.Codes()
		}
	}
	return out
}
