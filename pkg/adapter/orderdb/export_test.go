package orderdb

// SetRecordPage sets how many ranking rows a read of a draw's record takes
// at a time, and returns what puts it back.
func SetRecordPage(n int) (restore func()) {
	old := recordPage
	recordPage = n
	return func() { recordPage = old }
}
