package fakeapi

// Cancel cancels run's context, as SIGTERM does, and returns at once: the
// test then waits for Ended as it needs (Stop waits for it, and fails the
// test if run does not return within Wait).
func (r *Run) Cancel() { r.cancel() }
