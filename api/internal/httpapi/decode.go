package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
)

// decode reads a JSON object into v: at most limit bytes, no unknown
// fields, nothing after the object.
func decode(c *gin.Context, v any, limit int64) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errTooLarge
		}
		return order.Errorf(order.ErrInvalidArgument, "cannot read body")
	}
	return DecodeJSON(body, v)
}

var errTooLarge = errors.New("body too large")

// DecodeJSON strictly decodes one JSON object from body into v. The order
// and entry bodies take a fast path first (decodePlaceOrderFast,
// decodeEntryFast).
func DecodeJSON(body []byte, v any) error {
	switch b := v.(type) {
	case *PlaceOrderBody:
		if decodePlaceOrderFast(body, b) {
			return nil
		}
	case *EntryBody:
		if decodeEntryFast(body, b) {
			return nil
		}
	}
	return decodeStrict(body, v)
}

// decodeStrict decodes with encoding/json and no unknown fields, nothing
// after the object, no field in another case or twice.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return order.Errorf(order.ErrInvalidArgument, "body is not a valid JSON object of the expected shape: %s", jsonProblem(err))
	}
	if dec.More() {
		return order.Errorf(order.ErrInvalidArgument, "unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return order.Errorf(order.ErrInvalidArgument, "unexpected data after the JSON object")
	}
	return exactKeys(body, v)
}

// exactKeys refuses what encoding/json lets through: field names in another
// case ("ACTIVITY_ID") and a field given twice.
func exactKeys(body []byte, v any) error {
	allowed := fieldNames(reflect.TypeOf(v))
	if allowed == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		if !allowed[key] {
			return order.Errorf(order.ErrInvalidArgument, "unknown field %q", strings.ToValidUTF8(key, ""))
		}
		if seen[key] {
			return order.Errorf(order.ErrInvalidArgument, "field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

var fieldCache sync.Map // reflect.Type -> map[string]bool

// fieldNames returns the JSON names of a struct pointer's fields.
func fieldNames(t reflect.Type) map[string]bool {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	st := t.Elem()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = st.Field(i).Name
		}
		if name != "-" {
			m[name] = true
		}
	}
	fieldCache.Store(t, m)
	return m
}

// jsonProblem is the client's text for a body encoding/json refused.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q must be %s", te.Field, te.Type)
	}
	msg := err.Error()
	if len(msg) > 120 {
		// Cut on a character boundary: the message goes to the client.
		msg = strings.ToValidUTF8(msg[:120], "")
	}
	return msg
}

// decodeOr400 decodes the body (at most MaxBody bytes) into v, or
// answers 413 or 400 and returns false.
func (s *Server) decodeOr400(c *gin.Context, v any) bool {
	return s.decodeUpToOr400(c, v, MaxBody)
}

// decodeUpToOr400 is decodeOr400 for a body of at most limit bytes.
func (s *Server) decodeUpToOr400(c *gin.Context, v any, limit int64) bool {
	err := decode(c, v, limit)
	if errors.Is(err, errTooLarge) {
		writeError(c, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("the body must be at most %d bytes", limit))
		return false
	}
	if err != nil {
		s.fail(c, err)
		return false
	}
	return true
}

// pathID is the :id of the path, or false after answering 404 when it is
// not a positive integer.
func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return 0, false
	}
	return id, true
}

// idempotencyKeyOr400 returns the request's Idempotency-Key header, or
// answers 400 when it is missing or malformed.
func idempotencyKeyOr400(c *gin.Context) (string, bool) {
	key := c.GetHeader("Idempotency-Key")
	if !order.ValidIdempotencyKey(key) {
		writeError(c, http.StatusBadRequest, "INVALID_ARGUMENT", "the Idempotency-Key header is required: 1-64 characters of A-Z a-z 0-9 _ -")
		return "", false
	}
	return key, true
}

// pageOr400 reads a list's page from the query: ?limit (a number, default
// 50; the use case holds it to 1..most) and ?before (an id of the list,
// what names it, for the next page; 0 when left out), or answers 400.
func (s *Server) pageOr400(c *gin.Context, most int, what string) (limit int, before int64, ok bool) {
	limit = 50
	var err error
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			s.fail(c, order.Errorf(order.ErrInvalidArgument, "limit is a number between 1 and %d", most))
			return 0, 0, false
		}
	}
	if v := c.Query("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			s.fail(c, order.Errorf(order.ErrInvalidArgument, "before is %s", what))
			return 0, 0, false
		}
	}
	return limit, before, true
}
