//go:build !failpoints

package failpoint

// Inject does nothing in a production build.
func Inject(string) {}
