package api

// Check says why a target at rawURL (as target.Parse gives it) may not be added through the API,
// or returns nil: the policy's rules, for URLs that reach vllmstat otherwise than through the
// API (the servers a router's page names). It asks Local for the machine's addresses at each
// call.
func (p TargetPolicy) Check(rawURL string) error { return p.checker()(rawURL) }
