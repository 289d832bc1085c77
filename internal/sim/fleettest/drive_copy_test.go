package fleettest

import (
	"strings"
)

func words(n int, word string) string { return strings.TrimSpace(strings.Repeat(word+" ", n)) }
