package snap

// BlockSize is the number of tokens per KV-cache block, vLLM's default for GPU engines.
const BlockSize = 16
