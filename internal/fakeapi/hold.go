package fakeapi

// ReleaseAndHold sends the events of a resource held back so far, and
// holds back those to come: Release and Hold at once, with no event of the
// controller's in between.
func (s *Server) ReleaseAndHold(resource string) {
	s.Lock()
	defer s.Unlock()
	s.held[resource] = s.rv
	s.cond.Broadcast()
}
