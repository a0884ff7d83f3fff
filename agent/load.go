package agent

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// loadSampler measures the machine for heartbeats from /proc. Where /proc
// is missing (not Linux) it reports zeros, which the server stores as no
// load rather than failing the heartbeat.
type loadSampler struct {
	mu          sync.Mutex
	idle, total uint64 // the previous /proc/stat sample: CPU use is the change since
}

// sample returns CPU use (0..1 since the previous sample), the 1-minute load
// average per core and memory use (0..1).
func (s *loadSampler) sample() (cpu, load1, memory float64) {
	return s.cpuUse(), load1PerCore(), memoryUse()
}

func (s *loadSampler) cpuUse() float64 {
	idle, total, ok := readCPUTimes()
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dIdle, dTotal := idle-s.idle, total-s.total
	first := s.total == 0
	s.idle, s.total = idle, total
	if first || dTotal == 0 || dIdle > dTotal {
		return 0
	}
	return 1 - float64(dIdle)/float64(dTotal)
}

// readCPUTimes sums the first line of /proc/stat: idle (with iowait) and
// all time (guest time is already inside user time, so it is left out).
func readCPUTimes() (idle, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle, total, true
}

func load1PerCore() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v < 0 {
		return 0
	}
	return v / float64(runtime.NumCPU())
}

func memoryUse() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total, available float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			available = v
		}
	}
	if total <= 0 || available > total {
		return 0
	}
	return 1 - available/total
}
