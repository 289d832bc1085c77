import sys
from render import render, sched_labels, tok_labels

def sched_values(running, queue, usage, used, gen_tp):
    return {"num_running_reqs": running, "num_queue_reqs": queue, "token_usage": usage, "full_token_usage": usage,
            "num_used_tokens": used, "kv_used_tokens": used, "gen_throughput": gen_tp, "max_total_num_tokens": 46080,
            "context_len": 40960, "cache_hit_rate": 0.0, "new_token_ratio": 0.7}

def sched(v, retracted=0, realtime=(0, 0, 0), queue_obs=(), weight=None, paused=0, by_priority=None):
    def f(s):
        vals = dict(v, num_paused_reqs=paused)
        s.log_stats(vals, by_priority)
        if retracted:
            s.retracted.labels(**s.labels).inc(retracted)
            s.retracted_in.labels(**s.labels).inc(retracted * 611)
            s.retracted_out.labels(**s.labels).inc(retracted * 254)
        for mode, n in zip(("prefill_compute", "prefill_cache", "decode"), realtime):
            if n:
                s.realtime.labels(**s.labels, mode=mode).inc(n)
        for q in queue_obs:
            s.queue.labels(**s.labels).observe(q)
        if weight is not None:
            s.weight_load.labels(**s.labels, source="distributed").set(weight)
    return f

def tok(reqs):
    def f(t):
        for r in reqs:
            t.finished(*r)
        if reqs:
            t.itl.labels(**t.labels).observe(0.021)
    return f

def dp_server(model, dp, tp=1, scale=1, priority=False, pid0=2001, streaming=False, weight=None):
    scheds = []
    for d in range(dp):
        for r in range(tp):
            byp = None
            running, queue = 3 + d, 1 + d
            if priority:
                byp = {"num_running_reqs": {0: 1 + d, 5: 2}, "num_queue_reqs": {0: d, 5: 1}}
            scheds.append((sched_labels(model, r, dp=d if dp > 1 else None, priority=priority),
                           sched(sched_values(running, queue, 0.25 + 0.1 * d, 4096 * (d + 1), 812.5), retracted=scale * (5 + 5 * d),
                                 realtime=(scale * 9488 * (d + 1), scale * 39024 * (d + 1), scale * 113952 * (d + 1)),
                                 queue_obs=[0.0005, 0.003, 0.02] * scale, weight=weight, by_priority=byp)))
    reqs = [(1024, 256 + i, 512, 4.5 + i, 0.3) for i in range(3 * scale)]
    if streaming:
        reqs += [(2048, 128, 0, 2.5, 0.15, True)]
    reqs = [r if len(r) == 6 else r + (False,) for r in reqs]
    return render(scheds, (tok_labels(model), tok(reqs)), pid0=pid0)

if __name__ == "__main__":
    which = sys.argv[1]
    if which == "sim-dp2":
        print(dp_server("Qwen/Qwen3-1.7B", 2, weight=1.25), end="")
    elif which == "dp2-tp2":
        print(dp_server("Qwen/Qwen3-8B", 2, tp=2, streaming=True), end="")
    elif which == "priority":
        print(dp_server("Qwen/Qwen3-8B", 1, priority=True), end="")
    elif which == "server-a":
        print(dp_server("Qwen/Qwen3-8B", 2, pid0=2001), end="")
    elif which == "server-b":
        print(dp_server("Qwen/Qwen3-8B", 2, scale=2, pid0=3001), end="")
    elif which == "server-nodp":
        print(dp_server("Qwen/Qwen3-8B", 1, pid0=4001), end="")
