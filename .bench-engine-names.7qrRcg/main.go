package main

import (
	"fmt"

	"github.com/vllmstat/vllmstat/internal/page"
)

func main() {
	for _, n := range page.SampleNames() {
		fmt.Println(n)
	}
}
