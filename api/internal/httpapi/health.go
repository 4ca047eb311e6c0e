package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Checker reports whether one dependency is reachable.
type Checker struct {
	Name  string
	Check func(context.Context) error
}

// readyz answers 200 when every dependency answers within 2 s, else 503
// naming the unreachable ones.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{}
	var down []string
	for _, ch := range s.ready {
		if err := ch.Check(ctx); err != nil {
			checks[ch.Name] = "unreachable"
			down = append(down, ch.Name)
		} else {
			checks[ch.Name] = "ok"
		}
	}
	if len(down) > 0 {
		c.Header("Retry-After", "1")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "checks": checks,
			"error": gin.H{"code": "UNAVAILABLE", "message": "unreachable: " + strings.Join(down, ", ")}})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok", "checks": checks})
}
