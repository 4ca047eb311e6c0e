package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/admission"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/room"
)

// RoomKeyView is the body of GET /admin/v1/activities/{id}/room/key: the
// public key that verifies the sale's admissions (package admission), in
// base64url and as a JWK.
type RoomKeyView struct {
	ActivityID int64         `json:"activity_id"`
	Algorithm  string        `json:"algorithm"`
	PublicKey  string        `json:"public_key"`
	JWK        admission.JWK `json:"jwk"`
}

// roomKey answers the sale's admission verification key, for a shop whose
// own checkout checks the room's admissions. It is public by nature, but
// it stays on the admin routes: it is the operator who hands it over, and
// it names sales not yet announced.
func (s *Server) roomKey(c *gin.Context) {
	a, ok := s.saleOf(c, func(a activity.Activity) bool { return a.Room.On() }, "sale %d has no waiting room, so no admissions to verify")
	if !ok {
		return
	}
	pub := room.PublicKey(a.Room.Key[:])
	c.JSON(http.StatusOK, RoomKeyView{ActivityID: a.ID, Algorithm: "Ed25519", PublicKey: admission.FormatPublicKey(pub),
		JWK: admission.JWKOf(pub)})
}
