package snap

// maxSpecTokens bounds SpecTokens: engineStats counts accepted tokens per position in an array.
const MaxSpecTokens = 16
