package axtype

// ConsoleSession is a live console session and the key it was opened with.
type ConsoleSession struct {
	CSRF string
	Key  *APIKey
}
