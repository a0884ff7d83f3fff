package schedule

import "context"

// FirePass is one pass's fires of the loop (fireDueTogether), for tests.
func (l *TriggerLoop) FirePass(ctx context.Context) (fired int, full bool, err error) {
	return l.fireDueTogether(ctx)
}
