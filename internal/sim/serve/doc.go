// Package serve is a simulated fleet's HTTP side: each server's /metrics, health, OpenAI
// completion and chat endpoints, vLLM's and SGLang's control and version endpoints, the faults
// a server shows, and SGLang's router in front of the servers. Requests and control calls reach
// the model through the fleet's run goroutine.
package serve
