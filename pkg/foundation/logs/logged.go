package logs

import "errors"

// loggedError is an error whose failure was logged already.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// Logged marks err as logged by the code that handled it (with the order
// number and request id), so the transport that answers the client does
// not log the same failure again. Errors.Is and errors.As see through it.
func Logged(err error) error {
	if err == nil {
		return nil
	}
	return loggedError{err}
}

// IsLogged reports whether err, or an error it wraps, was marked Logged.
func IsLogged(err error) bool {
	var l loggedError
	return errors.As(err, &l)
}
