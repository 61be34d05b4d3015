package store

// SearchDriveMaxForTest sets how many search hits a count may read by id
// (0: never, so the count walks the list's plan; -1: always, whatever the
// costs), until restore runs.
func SearchDriveMaxForTest(n int64) (restore func()) {
	old := searchDriveMax
	searchDriveMax = n
	return func() { searchDriveMax = old }
}
