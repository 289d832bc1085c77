// Package sglangpage writes a simulated SGLang server's /metrics page: its scheduler's and
// tokenizer manager's families, per data-parallel rank. It reads the model only through package
// snap.
package sglangpage
