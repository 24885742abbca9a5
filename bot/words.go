package bot

import "strconv"

// Count writes n with the noun in the number it needs: "1 schedule",
// "3 schedules", "0 messages".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
