package calc

// Sub returns a minus b.
func Sub(a, b int) int { return a + b }
