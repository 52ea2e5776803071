# common.sh — what lib/bench's shell benchmarks share; sourced, not run.

now() { date +%s.%N; }
# since prints the seconds from $1 to $2, or to now.
since() { echo "${2:-$(now)} $1" | awk '{printf "%.2f", $1 - $2}'; }

# servings prints how many times the mqd log $1 says "mqd serving" (0
# when it does not exist yet).
servings() {
	cat "$1" 2>/dev/null | grep -c 'msg="mqd serving"' || true
}

# await_serving LOG COUNT PID NAME waits until LOG says "mqd serving" more
# than COUNT times (the mqd PID, started after COUNT was read, is ready:
# every partition open and led, READY=1 sent), or fails with LOG's end
# when PID exits first. NAME starts the failure's message.
await_serving() {
	until [ "$(servings "$1")" -gt "$2" ]; do
		kill -0 "$3" 2>/dev/null || { echo "$4: mqd exited:" >&2; tail -20 "$1" >&2; exit 1; }
		sleep 0.01
	done
}
