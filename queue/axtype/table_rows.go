package axtype

// TableRows is the statistics' estimate of a table's live and dead rows.
type TableRows struct {
	Live, Dead int64
}
