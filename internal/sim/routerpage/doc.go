// Package routerpage merges the pages of SGLang servers as SGLang's router does on its
// /engine_metrics endpoint. It reads the servers' pages, not the model.
package routerpage
