// Package benchpage generates exposition pages for benchmarks and load servers: pages shaped like
// the ones vllmstat scrapes in the field, and variants of a page whose values move from one scrape
// to the next while its lines and labels stay the same.
package benchpage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/pyfloat"
)

// Ray returns a Ray node metrics-agent page of about targetBytes (never less than one worker's
// worth, about 140 KB): Ray's own node, task, actor, object store, gRPC, scheduler and component
// families for as many workers as reach the size, and beside them the ray_vllm_ families of two
// Ray Serve LLM replicas, which are a small part of the page. The same targetBytes gives the
// same page.
func Ray(targetBytes int) []byte {
	// The page grows linearly with the workers: measure one and two, then solve for the rest.
	one, two := len(rayPage(1)), len(rayPage(2))
	w := 1
	if per := two - one; per > 0 && targetBytes > one {
		w = 1 + (targetBytes-one+per/2)/per
	}
	return rayPage(w)
}

const (
	rayNode    = "10.0.0.5"
	raySession = "session_2026-05-04_10-21-33_481516_2342"
	rayVersion = "2.49.1"
	rayModel   = "Qwen/Qwen2.5-7B-Instruct"
)

// label is one label pair; a series' labels are sorted by name when written, as Ray does.
type label struct{ name, value string }

// pageWriter is a page being written, with a fixed random source for its values.
type pageWriter struct {
	b   strings.Builder
	rnd *rand.Rand
}

func (p *pageWriter) family(name, typ, help string) {
	fmt.Fprintf(&p.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *pageWriter) sample(name string, ls []label, v float64) {
	p.b.WriteString(name)
	if len(ls) > 0 {
		ls = slices.Clone(ls)
		slices.SortFunc(ls, func(a, b label) int { return strings.Compare(a.name, b.name) })
		p.b.WriteByte('{')
		for i, l := range ls {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(l.name)
			p.b.WriteString(`="`)
			p.b.WriteString(escape(l.value))
			p.b.WriteByte('"')
		}
		p.b.WriteByte('}')
	}
	p.b.WriteByte(' ')
	p.b.Write(pyfloat.AppendGo(nil, v))
	p.b.WriteByte('\n')
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// hist writes one histogram series: cumulative buckets, _count (the +Inf bucket) and _sum.
func (p *pageWriter) hist(name string, ls []label, bounds []float64, mean float64) {
	var cum float64
	for _, le := range append(slices.Clone(bounds), inf) {
		cum += float64(p.rnd.IntN(50))
		p.sample(name+"_bucket", with(ls, label{"le", leString(le)}), cum)
	}
	p.sample(name+"_count", ls, cum)
	p.sample(name+"_sum", ls, round3(cum*mean*(0.5+p.rnd.Float64())))
}

var inf = math.Inf(1)

func leString(le float64) string {
	if le == inf {
		return "+Inf"
	}
	return string(pyfloat.AppendGo(nil, le))
}

func round3(v float64) float64 { return float64(int64(v*1000)) / 1000 }

func with(ls []label, more ...label) []label {
	return append(slices.Clone(ls), more...)
}

// base are the tags Ray puts on every series its node's processes report.
func base(component string) []label {
	return []label{{"Component", component}, {"NodeAddress", rayNode}, {"SessionName", raySession}, {"Version", rayVersion}}
}

// workerID is a worker's 56-hex-digit id, fixed by its number.
func workerID(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	var b strings.Builder
	for range 56 {
		b.WriteByte("0123456789abcdef"[r.IntN(16)])
	}
	return b.String()
}

func rayPage(workers int) []byte {
	p := &pageWriter{rnd: rand.New(rand.NewPCG(1, 2))}
	node := []label{{"InstanceId", ""}, {"IsHeadNode", "false"}, {"NodeAddress", rayNode}, {"SessionName", raySession}, {"Version", rayVersion}, {"ip", rayNode}}

	for _, f := range []struct{ name, help string }{
		{"ray_node_cpu_utilization", "Total CPU usage on a ray node"},
		{"ray_node_cpu_count", "Total CPUs available on a ray node"},
		{"ray_node_mem_used", "Memory usage on a ray node"},
		{"ray_node_mem_available", "Memory available on a ray node"},
		{"ray_node_mem_total", "Total memory on a ray node"},
		{"ray_node_disk_io_read_speed", "Disk read speed."},
		{"ray_node_disk_io_write_speed", "Disk write speed."},
		{"ray_node_disk_usage", "Total disk usage (bytes) on a ray node"},
		{"ray_node_disk_free", "Total disk free (bytes) on a ray node"},
		{"ray_node_network_sent", "Total network sent"},
		{"ray_node_network_received", "Total network received"},
		{"ray_node_network_send_speed", "Network send speed"},
		{"ray_node_network_receive_speed", "Network receive speed"},
	} {
		p.family(f.name, "gauge", f.help)
		p.sample(f.name, node, float64(p.rnd.IntN(1<<30)))
	}
	for _, f := range []string{"ray_node_gpus_utilization", "ray_node_gram_used", "ray_node_gram_available"} {
		p.family(f, "gauge", "GPU "+strings.TrimPrefix(f, "ray_node_")+" on a ray node")
		for g := range 8 {
			p.sample(f, with(node, label{"GpuDeviceName", "NVIDIA H100 80GB HBM3"}, label{"GpuIndex", fmt.Sprint(g)}), float64(p.rnd.IntN(100)))
		}
	}

	ids := make([]string, workers)
	for i := range ids {
		ids[i] = workerID(i)
	}
	// Per worker process: its tasks by state, resident memory and CPU.
	p.family("ray_tasks", "gauge", "Current number of tasks currently in a particular state.")
	for i, id := range ids {
		for _, st := range []string{"RUNNING", "FINISHED", "PENDING_NODE_ASSIGNMENT", "SUBMITTED_TO_WORKER"} {
			p.sample("ray_tasks", with(base("core_worker"), label{"IsRetry", "0"}, label{"Name", fmt.Sprintf("Trainer.step_%d", i%7)},
				label{"Source", "executor"}, label{"State", st}, label{"WorkerId", id}), float64(p.rnd.IntN(20)))
		}
	}
	p.family("ray_actors", "gauge", "Current number of actors currently in a particular state.")
	for i, id := range ids {
		for _, st := range []string{"ALIVE", "IDLE", "RUNNING_TASK"} {
			p.sample("ray_actors", with(base("core_worker"), label{"Name", fmt.Sprintf("RolloutWorker_%d", i)},
				label{"Source", "executor"}, label{"State", st}, label{"WorkerId", id}), float64(p.rnd.IntN(2)))
		}
	}
	for _, f := range []struct{ name, help string }{
		{"ray_component_rss_mb", "RSS usage of all components on the node."},
		{"ray_component_uss_mb", "USS usage of all components on the node."},
		{"ray_component_cpu_percentage", "Total CPU usage of the components on a node."},
		{"ray_component_num_fds", "Number of open fds of all components on the node."},
		{"ray_component_mem_shared_bytes", "SHM usage of all components of the node."},
	} {
		p.family(f.name, "gauge", f.help)
		for i := range ids {
			p.sample(f.name, with(node, label{"Component", fmt.Sprintf("ray::RolloutWorker_%d", i)}, label{"pid", fmt.Sprint(4000 + i)}),
				round3(p.rnd.Float64()*4096))
		}
		for _, c := range []string{"raylet", "gcs_server", "agent", "dashboard"} {
			p.sample(f.name, with(node, label{"Component", c}, label{"pid", fmt.Sprint(100 + len(c))}), round3(p.rnd.Float64()*1024))
		}
	}
	p.family("ray_object_store_memory", "gauge", "Object store memory by various sub-kinds on this node")
	for _, loc := range []string{"MMAP_SHM", "MMAP_DISK", "SPILLED", "WORKER_HEAP"} {
		for _, st := range []string{"SEALED", "UNSEALED"} {
			p.sample("ray_object_store_memory", with(base("raylet"), label{"Location", loc}, label{"ObjectState", st}), float64(p.rnd.IntN(1<<34)))
		}
	}
	for _, f := range []string{"ray_object_store_available_memory", "ray_object_store_used_memory", "ray_object_store_num_local_objects", "ray_object_store_fallback_memory"} {
		p.family(f, "gauge", "Object store "+strings.TrimPrefix(f, "ray_object_store_")+".")
		p.sample(f, base("raylet"), float64(p.rnd.IntN(1<<32)))
	}
	for _, f := range []string{"ray_scheduler_tasks", "ray_scheduler_unscheduleable_tasks", "ray_scheduler_failed_worker_startup_total", "ray_scheduler_placement_time_s"} {
		p.family(f, "gauge", "Scheduler "+strings.TrimPrefix(f, "ray_scheduler_")+".")
		for _, st := range []string{"Executing", "Dispatched", "Waiting", "Infeasible", "SpilledBack"} {
			p.sample(f, with(base("raylet"), label{"State", st}), float64(p.rnd.IntN(64)))
		}
	}
	for _, f := range []string{"ray_spill_manager_objects", "ray_spill_manager_objects_bytes", "ray_spill_manager_request_total", "ray_spill_manager_throughput_mb"} {
		p.family(f, "gauge", "Spill manager "+strings.TrimPrefix(f, "ray_spill_manager_")+".")
		for _, st := range []string{"Pinned", "PendingRestore", "PendingSpill", "Spilled", "Restored", "Failed"} {
			p.sample(f, with(base("raylet"), label{"Type", st}), float64(p.rnd.IntN(4096)))
		}
	}
	for _, f := range []string{"ray_pull_manager_requested_bundles", "ray_pull_manager_requests", "ray_pull_manager_active_bundles", "ray_pull_manager_retries_total", "ray_pull_manager_usage_bytes", "ray_pull_manager_num_object_pins"} {
		p.family(f, "gauge", "Pull manager "+strings.TrimPrefix(f, "ray_pull_manager_")+".")
		for _, t := range []string{"Get", "Wait", "TaskArgs", "Queued", "Active", "Pinned"} {
			p.sample(f, with(base("raylet"), label{"Type", t}), float64(p.rnd.IntN(1024)))
		}
	}
	for _, f := range []string{"ray_internal_num_processes_started", "ray_internal_num_processes_skipped_job_mismatch", "ray_internal_num_processes_skipped_runtime_env_mismatch", "ray_internal_num_spilled_tasks", "ray_internal_num_infeasible_scheduling_classes"} {
		p.family(f, "gauge", "Internal "+strings.TrimPrefix(f, "ray_internal_")+".")
		p.sample(f, base("raylet"), float64(p.rnd.IntN(1024)))
	}

	// gRPC servers: per method, a counter and a latency histogram.
	methods := []string{"NodeManagerService.grpc_server.RequestWorkerLease", "NodeManagerService.grpc_server.ReturnWorker",
		"NodeManagerService.grpc_server.PinObjectIDs", "NodeManagerService.grpc_server.GetResourceLoad",
		"NodeManagerService.grpc_server.ReportWorkerBacklog", "CoreWorkerService.grpc_server.PushTask",
		"CoreWorkerService.grpc_server.GetObjectStatus", "CoreWorkerService.grpc_server.PubsubLongPolling",
		"ObjectManagerService.grpc_server.Push", "ObjectManagerService.grpc_server.Pull"}
	for _, f := range []string{"ray_grpc_server_req_new_total", "ray_grpc_server_req_handling_total", "ray_grpc_server_req_finished_total", "ray_grpc_server_req_succeeded_total", "ray_grpc_server_req_failed_total"} {
		p.family(f, "counter", "Number of gRPC server requests, by method.")
		for _, m := range methods {
			p.sample(f, with(base("raylet"), label{"Method", m}), float64(p.rnd.IntN(1<<20)))
		}
	}
	msBounds := []float64{0.1, 1, 10, 100, 1000, 10000}
	p.family("ray_grpc_server_req_process_time_ms", "histogram", "Request latency in grpc server")
	for _, m := range methods {
		p.hist("ray_grpc_server_req_process_time_ms", with(base("raylet"), label{"Method", m}), msBounds, 3)
	}
	// Per worker process, its own gRPC and event loop latencies: most of a big page.
	p.family("ray_grpc_client_req_time_ms", "histogram", "Request latency in grpc client")
	for _, id := range ids {
		for _, m := range methods[5:8] {
			p.hist("ray_grpc_client_req_time_ms", with(base("core_worker"), label{"Method", m}, label{"WorkerId", id}), msBounds, 2)
		}
	}
	p.family("ray_io_context_event_loop_lag_ms", "gauge", "Latency of a task from post to execution")
	for _, id := range ids {
		for _, n := range []string{"core_worker_io", "core_worker_main", "task_execution"} {
			p.sample("ray_io_context_event_loop_lag_ms", with(base("core_worker"), label{"Name", n}, label{"WorkerId", id}), float64(p.rnd.IntN(5)))
		}
	}

	rayVLLM(p)
	return []byte(p.b.String())
}

// rayVLLM writes the vLLM families of two Ray Serve LLM replicas, as vLLM's Ray stat logger
// names and tags them.
func rayVLLM(p *pageWriter) {
	replicas := []struct{ replica, worker string }{{"k7qz2m1d", workerID(1000)}, {"p3xw9c4e", workerID(1001)}}
	tags := func(i int) []label {
		return with(base("core_worker"), label{"ReplicaId", replicas[i].replica}, label{"WorkerId", replicas[i].worker},
			label{"engine", "0"}, label{"model_name", rayModel})
	}
	for _, g := range []struct{ name, help string }{
		{"ray_vllm_num_requests_running", "Number of requests in model execution batches."},
		{"ray_vllm_num_requests_waiting", "Number of requests waiting to be processed."},
	} {
		p.family(g.name, "gauge", g.help)
		for i := range replicas {
			p.sample(g.name, tags(i), float64(p.rnd.IntN(64)))
		}
	}
	p.family("ray_vllm_kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
	for i := range replicas {
		p.sample("ray_vllm_kv_cache_usage_perc", tags(i), round3(p.rnd.Float64()))
	}
	for _, c := range []struct{ name, help string }{
		{"ray_vllm_prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."},
		{"ray_vllm_prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."},
		{"ray_vllm_num_preemptions", "Cumulative number of preemption from the engine."},
		{"ray_vllm_prompt_tokens", "Number of prefill tokens processed."},
		{"ray_vllm_generation_tokens", "Number of generation tokens processed."},
	} {
		p.family(c.name, "counter", c.help)
		for i := range replicas {
			p.sample(c.name+"_total", tags(i), float64(p.rnd.IntN(1<<24)))
		}
	}
	p.family("ray_vllm_request_success", "counter", "Count of successfully processed requests.")
	for i := range replicas {
		for _, r := range []string{"abort", "length", "stop"} {
			p.sample("ray_vllm_request_success_total", with(tags(i), label{"finished_reason", r}), float64(p.rnd.IntN(1<<14)))
		}
	}
	secs := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	for _, h := range []struct{ name, help string }{
		{"ray_vllm_time_to_first_token_seconds", "Histogram of time to first token in seconds."},
		{"ray_vllm_inter_token_latency_seconds", "Histogram of inter-token latency in seconds."},
		{"ray_vllm_e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."},
		{"ray_vllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."},
	} {
		p.family(h.name, "histogram", h.help)
		for i := range replicas {
			p.hist(h.name, tags(i), secs, 0.3)
		}
	}
}
