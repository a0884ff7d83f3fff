package axtype

// TableRows is the statistics' estimate of a table's live and dead rows,
// and whether the current role may vacuum it (VACUUM skips a table of
// another owner with a mere warning).
type TableRows struct {
	Live, Dead int64
	MayVacuum  bool
}
