package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/service/codes"
)

// MaxCodesBody bounds the body of POST /admin/v1/activities/{id}/codes, the
// one route whose body is not small: access.MaxCodesPerRequest codes of
// 64 characters, each bound to a subject of up to about 150 bytes, fit.
const MaxCodesBody = 24 << 20

// CodesBody is the body of POST /admin/v1/activities/{id}/codes: Count
// (generate that many) or Codes (the shop's own), and each code's Uses.
type CodesBody struct {
	Count *int        `json:"count"`
	Codes []givenCode `json:"codes"`
	Uses  *int        `json:"uses"`
}

// givenCode is one of Codes: a string, or {"code": "...", "subject":
// "..."} for a code only that buyer may use.
type givenCode codes.Given

// UnmarshalJSON reads either form.
func (g *givenCode) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &g.Code)
	}
	var o struct {
		Code    *string `json:"code"`
		Subject string  `json:"subject"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.Code == nil {
		return order.Errorf(order.ErrInvalidArgument, `each of codes is a string or {"code": "...", "subject": "..."}`)
	}
	g.Code, g.Subject = *o.Code, o.Subject
	return nil
}

// CodesAddedView is the answer to a batch of codes: a generated batch's
// codes (shown this once), or the count of an imported one.
type CodesAddedView struct {
	ActivityID int64    `json:"activity_id"`
	Codes      []string `json:"codes,omitempty"`
	Count      int      `json:"count"`
	Uses       int      `json:"uses"`
	// Replayed: the Idempotency-Key added this batch before; this answer
	// is the first one's, and nothing was added now.
	Replayed bool `json:"replayed"`
}

// CodesSummaryView counts a sale's codes.
type CodesSummaryView struct {
	ActivityID int64 `json:"activity_id"`
	Codes      int64 `json:"codes"`
	Revoked    int64 `json:"revoked"`
	Uses       int64 `json:"uses"`
	Used       int64 `json:"used"`
}

// addCodes generates or imports a batch of a sale's codes (codes.Generate,
// codes.Import). An Idempotency-Key header, optional, makes the request
// repeatable: sent again, it answers the same codes and adds none.
func (s *Server) addCodes(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if key != "" && !order.ValidIdempotencyKey(key) {
		writeError(c, http.StatusBadRequest, "INVALID_ARGUMENT", "the Idempotency-Key header is 1-64 characters of A-Z a-z 0-9 _ -")
		return
	}
	var b CodesBody
	if !s.decodeUpToOr400(c, &b, MaxCodesBody) {
		return
	}
	if b.Uses == nil {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "uses is required: how many orders or entries may hold each code at once"))
		return
	}
	by := claimsOf(c).UserID
	var res codes.Added
	var err error
	switch {
	case (b.Count == nil) == (b.Codes == nil):
		err = order.Errorf(order.ErrInvalidArgument, "give count (codes generated for you) or codes (your own), not both")
	case b.Count != nil:
		res, err = s.codes.Generate(s.logContext(c), id, codes.Generate{Count: *b.Count, Uses: *b.Uses, Key: key, By: by})
	case len(b.Codes) > access.MaxCodesPerRequest:
		err = order.Errorf(order.ErrInvalidArgument, "codes must list from 1 to %d codes", access.MaxCodesPerRequest)
	default:
		given := make([]codes.Given, len(b.Codes))
		for i, g := range b.Codes {
			given[i] = codes.Given(g)
		}
		res, err = s.codes.Import(s.logContext(c), id, codes.Import{Codes: given, Uses: *b.Uses, Key: key, By: by})
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, CodesAddedView{ActivityID: id, Codes: res.Codes, Count: res.Count, Uses: res.Uses, Replayed: res.Replayed})
}

// revokeCode revokes one of a sale's codes (codes.Revoke): 204, also for
// a code revoked before; 404 for a code the sale never had.
func (s *Server) revokeCode(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	if err := s.codes.Revoke(s.logContext(c), id, c.Param("code"), claimsOf(c).UserID); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// codesSummary counts a sale's codes (codes.Summary).
func (s *Server) codesSummary(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	sum, err := s.codes.Summary(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, CodesSummaryView{ActivityID: id, Codes: sum.Codes, Revoked: sum.Revoked, Uses: sum.Uses, Used: sum.Used})
}
