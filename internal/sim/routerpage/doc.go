// Package routerpage writes SGLang's router's pages: the servers' pages merged as the router
// does on its /engine_metrics endpoint, and the router's own metrics (Metrics). It reads the
// servers' pages and the router's counts, not the model.
package routerpage
