package agents

// Held is what b keeps about runs under way: the capped keys with calls
// under way or runs waiting for room, and the keys a run asks for more of.
func (b *Budgets) Held() (flights, asking int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.flights), len(b.asking)
}
