package httpapi_test

import (
	"log/slog"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/sales"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// services builds the handlers' use cases over the test's database and
// svc's Redis stores, numbers and clock, as the api's wiring does.
func (ts *testServer) services(svc *placing.Service, log *slog.Logger) httpapi.Services {
	db := ts.db.DB
	now := time.Now
	if svc.Now != nil {
		now = svc.Now
	}
	lc := &lifecycle.Service{DB: db.Orders, Payments: db.Payments, Stock: svc.Reservations, Numbers: svc.Numbers,
		Lists: db.Orders, Refunds: db.Payments, Log: log}
	out := httpapi.Services{
		Lifecycle: lc,
		Draws:     &draws.Service{Store: db.Draws, Summaries: db.Draws, Now: now},
		Sales: &sales.Service{Sales: db.Activities, Warmups: db.Activities, Restocks: db.Restocks, Items: db.Activities,
			Tallies: db.Activities, Stock: svc.Stock, Closer: lc, Now: now, SoldOut: svc.ClearSoldOut,
			PaymentWindow: svc.PaymentWindow, Log: log},
	}
	if svc.Rooms != nil {
		out.Rooms = waitingroom.New(svc.Rooms, db.Rooms, log, now)
		out.Rooms.PaymentWindow, out.Rooms.HeldOrder = svc.PaymentWindow, svc.HeldOrder
	}
	return out
}
