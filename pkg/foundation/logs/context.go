package logs

import "context"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves, for
// the log lines of layers below the transport (an order's pay and close).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries, or "" (work no request
// started, such as the closer's).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
