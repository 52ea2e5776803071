package config

// closest returns the candidate nearest to name, for a "did you mean"
// hint: at most two edits away (a typo, a swapped or missing letter), and
// fewer edits than half of name's length. "" when none is that close.
func closest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist && 2*d < len(name) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes (property
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// topicNames lists the names of every topic config, sorted.
func topicNames() []string {
	names := make([]string, len(topicProperties))
	for i := range topicProperties {
		names[i] = topicProperties[i].name
	}
	return names
}
