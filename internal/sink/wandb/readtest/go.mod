module github.com/vllmstat/vllmstat/internal/sink/wandb/readtest

go 1.26.0

replace github.com/vllmstat/vllmstat => ../../../..

require (
	github.com/vllmstat/vllmstat v0.0.0-00010101000000-000000000000
	github.com/wandb/simplejsonext v0.0.0-20241203202201-90635f1d8677
	github.com/wandb/wandb/core v0.0.0-20250729185623-a4a5afae2b2a
	go.yaml.in/yaml/v3 v3.0.6
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.42.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250728155136-f173205681a0 // indirect
	google.golang.org/grpc v1.74.2 // indirect
)
