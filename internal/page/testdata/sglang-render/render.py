"""Renders SGLang servers' /metrics pages as prometheus_client renders SGLang's multiprocess
registry: one process per scheduler rank and one for the tokenizer, each writing its values
into the multiprocess directory, then MultiProcessCollector and generate_latest."""
import os, shutil, sys, tempfile

def render(schedulers, tokenizer, pid0=2001):
    """schedulers: list of (labels, fn(sched)); tokenizer: (labels, fn(tok)) or None."""
    d = tempfile.mkdtemp()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = d
    jobs = [("s", l, f) for l, f in schedulers] + ([("t", tokenizer[0], tokenizer[1])] if tokenizer else [])
    for i, (kind, labels, fn) in enumerate(jobs):
        pid = os.fork()
        if pid == 0:
            try:
                from prometheus_client import values
                fake = pid0 + i
                values.ValueClass = values.MultiProcessValue(lambda: fake)
                import sgl_decl
                c = sgl_decl.Scheduler(labels) if kind == "s" else sgl_decl.Tokenizer(labels)
                fn(c)
            except BaseException:
                import traceback; traceback.print_exc()
                os._exit(1)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert st == 0, st
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector
    reg = CollectorRegistry()
    MultiProcessCollector(reg, path=d)
    out = generate_latest(reg).decode()
    shutil.rmtree(d)
    del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    return out

def sched_labels(model, tp, pp=0, dp=None, priority=False, ep=0):
    l = {"model_name": model, "engine_type": "unified", "tp_rank": tp, "pp_rank": pp, "moe_ep_rank": ep}
    if priority:
        l["priority"] = ""
    if dp is not None:
        l["dp_rank"] = dp
    return l

def tok_labels(model):
    return {"model_name": model, "engine_type": "unified"}
