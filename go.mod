module github.com/vllmstat/vllmstat

go 1.25.0
