package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// addRoutes registers every route of the API on r, and the answers to a
// path or method no route has.
func (s *Server) addRoutes(r *gin.Engine) {
	r.HandleMethodNotAllowed = true
	r.NoRoute(func(c *gin.Context) { writeError(c, http.StatusNotFound, "NOT_FOUND", "no such route") })
	r.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method not allowed")
	})

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)
	if s.metricsHandler != nil {
		r.GET("/metrics", gin.WrapH(s.metricsHandler))
	}

	// The sale page needs no token: the crowd refreshes it before the drop.
	r.GET("/api/v1/activities/:id", s.limitIP, s.salePageView)
	// The waiting page: HTML and its two files, the same for every sale.
	r.GET("/sale/:id", s.limitIP, s.waitingPage)
	r.GET("/static/:file", s.limitIP, s.staticFile)
	// The operator console: its page and files need no token, its every
	// action calls /admin/v1 with the operator's.
	r.GET("/console", s.limitIP, s.consolePage)
	r.GET("/console/:file", s.limitIP, s.consoleAsset)
	// A draw's record is public: anyone may check it (draw.Verify).
	r.GET("/api/v1/activities/:id/draw", s.limitIP, s.drawRecord)

	// Signed by the payment provider, not by a buyer's token.
	r.POST("/payments/v1/notifications", s.paymentNotification)

	buyer := r.Group("/api/v1", s.limitIP, s.authenticate(false), s.limitUser)
	buyer.GET("/orders", s.listOrders)
	buyer.GET("/orders/:order_no", s.getOrder)
	buyer.POST("/orders/:order_no/pay", s.payOrder)
	buyer.POST("/orders/:order_no/cancel", s.cancelOrder)
	buyer.GET("/activities/:id/queue", s.pollQueue)
	buyer.GET("/activities/:id/queue/challenge", s.queueChallenge)
	buyer.GET("/activities/:id/entries/me", s.myEntry)
	// Orders, joins and draw entries take stock or a place in line: they
	// alone pass the address's deny list and limit, before the token is
	// checked. The rest stays open to every address: an accepted order is
	// paid or cancelled from wherever its buyer is, the shop's back office
	// and the payment provider often sit in the data-centre ranges a deny
	// list names, and reads take nothing.
	take := r.Group("/api/v1", s.limitIP, s.guardAddr, s.authenticate(false), s.limitUser)
	take.POST("/orders", s.placeOrder)
	take.POST("/activities/:id/queue", s.joinQueue)
	take.POST("/activities/:id/entries", s.enterDraw)

	admin := r.Group("/admin/v1", s.limitIP, s.authenticate(true))
	admin.POST("/items", s.createItem)
	admin.GET("/items/:id/stock", s.itemStock)
	admin.POST("/items/:id/restock", s.restock)
	admin.POST("/activities", s.createActivity)
	admin.GET("/activities", s.listActivities)
	admin.POST("/activities/:id/warmup", s.warmup)
	admin.PATCH("/activities/:id", s.patchActivity)
	admin.POST("/activities/:id/end", s.endActivity)
	admin.POST("/activities/:id/cancel", s.cancelActivity)
	admin.GET("/activities/:id/summary", s.activitySummary)
	admin.GET("/activities/:id/room/key", s.roomKey)
	admin.GET("/activities/:id/room", s.roomState)
	admin.PATCH("/activities/:id/room", s.controlRoom)
	admin.GET("/activities/:id/audit", s.saleAudit)
	admin.POST("/activities/:id/codes", s.addCodes)
	admin.GET("/activities/:id/codes", s.codesSummary)
	admin.DELETE("/activities/:id/codes/:code", s.revokeCode)
	admin.POST("/webhooks", s.createWebhook)
	admin.GET("/webhooks", s.listWebhooks)
	admin.GET("/webhooks/:id", s.getWebhook)
	admin.PATCH("/webhooks/:id", s.patchWebhook)
	admin.DELETE("/webhooks/:id", s.deleteWebhook)
	admin.POST("/webhooks/:id/rotate", s.rotateWebhook)
	admin.GET("/webhooks/:id/deliveries", s.listDeliveries)
	admin.POST("/webhooks/:id/replay", s.replayWebhook)
}
