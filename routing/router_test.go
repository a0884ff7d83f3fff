package routing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewRouter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  *Config
		want    Config
		wantErr string
	}{
		{name: "nil is the defaults", config: nil, want: Config{LoadThreshold: 0.8, Slots: 65536}},
		{name: "zero is the defaults", config: &Config{}, want: Config{LoadThreshold: 0.8, Slots: 65536}},
		{name: "custom", config: &Config{LoadThreshold: 1.5, Slots: 1000}, want: Config{LoadThreshold: 1.5, Slots: 1000}},
		{name: "negative threshold", config: &Config{LoadThreshold: -0.1}, wantErr: "LoadThreshold"},
		{name: "NaN threshold", config: &Config{LoadThreshold: math.NaN()}, wantErr: "LoadThreshold"},
		{name: "negative slots", config: &Config{Slots: -1}, wantErr: "Slots"},
		{name: "too many slots", config: &Config{Slots: maxSlots + 1}, wantErr: "Slots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			router, err := NewRouter(tt.config)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, router.Config())
		})
	}
}

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for _, strategy := range Strategies() {
		got, err := ParseStrategy(string(strategy))
		require.NoError(t, err)
		require.Equal(t, strategy, got)
	}
	_, err := ParseStrategy("sticky")
	require.ErrorContains(t, err, `"sticky"`)
	require.True(t, StrategyLoadAware.NeedsKey())
	require.False(t, StrategyRoundRobin.NeedsKey())
}

// defaultRouter and the helpers below route with the default Config, as
// most tests do; ax itself builds its Router with NewRouter.
var defaultRouter = &Router{config: Config{LoadThreshold: defaultLoadThreshold, Slots: defaultSlots}}

// NewRing builds the Ring of ids with the default Config.
func NewRing(ids []string) *Ring {
	return defaultRouter.NewRing(ids)
}

// Pick routes one task among agents with the default Config and no Ring:
// see Pool.Pick. Keyed strategies then cost one score per healthy agent, so
// hot paths should keep a Ring and a Pool instead.
func Pick(req Request, agents []Agent) (string, bool) {
	return defaultRouter.NewPool(agents, nil).Pick(req)
}

// Broadcast returns the IDs of the healthy agents in agents, sorted: a
// broadcast job runs one task on each.
func Broadcast(agents []Agent) []string {
	return defaultRouter.NewPool(agents, nil).Broadcast()
}
