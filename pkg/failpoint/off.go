//go:build !failpoints

package failpoint

// Inject does nothing in a production build.
func Inject(string) {}

// Enabled is always false in a production build.
func Enabled(string) bool { return false }
