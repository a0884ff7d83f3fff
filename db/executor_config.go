package db

import (
	"encoding/json"
	"fmt"

	"github.com/ax-scheduler/ax/queue/axtype"
)

func executorConfigFromJSON(raw []byte) (axtype.ExecutorConfig, error) {
	var c axtype.ExecutorConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("error decoding executor: %w", err)
	}
	return c, nil
}
