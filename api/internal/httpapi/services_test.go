package httpapi_test

import (
	"log/slog"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/api/wiring"
	"github.com/seckill/seckill/pkg/service/placing"
)

// services builds the handlers' use cases over the test's database as the
// api's wiring does; webhook endpoints may be on loopback (the tests'
// receivers are).
func (ts *testServer) services(svc *placing.Service, log *slog.Logger) httpapi.Services {
	return wiring.Services(svc, ts.db.DB, log, true, nil)
}
