package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// ProcStats is a sample of a process's resource use from /proc.
type ProcStats struct {
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64
	// RSSPeakBytes is VmHWM, the peak resident set size.
	RSSPeakBytes int64
}

// ReadProc samples /proc/PID/stat and /proc/PID/status.
func ReadProc(pid int) (ProcStats, error) {
	var st ProcStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	if st.CPUSeconds, err = parseStatCPU(stat); err != nil {
		return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	if st.RSSPeakBytes, err = parseStatusHWM(status); err != nil {
		return st, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return st, nil
}

// parseStatCPU reads utime+stime (fields 14 and 15) from a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces,
// so fields are counted after the last ')'.
func parseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q", f[11], f[12])
	}
	return float64(u+s) / clockTicks, nil
}

// parseStatusHWM reads "VmHWM:  1234 kB" from /proc/PID/status.
func parseStatusHWM(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bad VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad VmHWM line %q", line)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmHWM")
}

// Watch samples the process pid (when > 0) around a run and puts the
// broker's usage in the run's result.
func Watch(pid int, run func() (*Result, error)) (*Result, error) {
	if pid <= 0 {
		return run()
	}
	before, err := ReadProc(pid)
	if err != nil {
		return nil, fmt.Errorf("--broker-pid: %w", err)
	}
	res, err := run()
	if res == nil {
		return res, err
	}
	after, perr := ReadProc(pid)
	if perr != nil {
		return res, fmt.Errorf("--broker-pid: %w", perr)
	}
	res.Broker = &BrokerUsage{CPUSeconds: after.CPUSeconds - before.CPUSeconds, RSSPeakMiB: float64(after.RSSPeakBytes) / (1 << 20)}
	res.finish()
	return res, err
}
