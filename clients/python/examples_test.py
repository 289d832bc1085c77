"""Tests of the runnable examples and of the fleet commands in README.md and docs/, with real
processes: a real `vllmstat sim` and `vllmstat run`, started as the docs start them but on free
ports, and the example scripts run as the docs run them (python3 examples/...), from the
repository's root, with VLLMSTAT_URL naming the run's API.

The blocks of README.md and docs/*.md that these tests stand for are marked
`<!-- run by: clients/python/examples_test.py Examples.test_... -->`; internal/docs checks that
every marker names a test here that exists.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from inprocess_test import WAIT, Lines, need, vllmstat_bin  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class Examples(unittest.TestCase):
    def setUp(self):
        need(shutil.which("go") is not None or os.environ.get("VLLMSTAT_BIN"),
             "no vllmstat binary: set VLLMSTAT_BIN or install Go to build one")
        self.bin = vllmstat_bin()
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.out = os.path.join(self.tmp, "out")

    def start(self, args, **kw):
        """Starts a process that the test stops with SIGINT (and kills if it must)."""
        p = subprocess.Popen(args, cwd=REPO, text=True, **kw)

        def stop():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(WAIT)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            for s in (p.stdout, p.stderr):
                if s:
                    s.close()
        self.addCleanup(stop)
        return p, stop

    def sim(self, *flags):
        """`vllmstat sim --servers 2 --dp 2 FLAGS`, on free ports: its two /metrics URLs."""
        p, _ = self.start([self.bin, "sim", "--servers", "2", "--dp", "2", "--port", "0"] + list(flags),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        urls = [p.stdout.readline().strip() for _ in range(2)]
        for u in urls:
            self.assertRegex(u, r"^http://127\.0\.0\.1:\d+/metrics$")
        return urls

    def run_vllmstat(self, args):
        """`vllmstat run ARGS` with its API on a free port and out_dir in the test's directory."""
        env = {k: v for k, v in os.environ.items() if k not in ("VLLMSTAT_API_TOKEN", "VLLMSTAT_URL")}
        p, stop = self.start([self.bin, "run"] + args + ["--listen", "127.0.0.1:0", "--out", self.out],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        log = Lines(p.stderr)
        url = log.expect(r"api listening\"? url=(\S+)").group(1)
        return p, stop, log, url

    def example(self, script, url, engines):
        """Runs examples/SCRIPT as the docs do, from the repository's root, with the engines'
        servers (their /metrics URLs) in $VLLM_URLS; its stdout."""
        env = dict(os.environ, VLLMSTAT_URL=url, VLLM_URLS=",".join(u[:-len("/metrics")] for u in engines))
        env.pop("VLLMSTAT_API_TOKEN", None)
        p = subprocess.run([PYTHON, os.path.join("examples", script)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=WAIT * 4)
        self.assertEqual(p.returncode, 0, "%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (script, p.returncode, p.stdout, p.stderr))
        self.assertNotIn("vllmstat", p.stderr, "the client warned: %s" % p.stderr)  # it never failed to reach vllmstat
        return p.stdout

    def steps(self):
        with open(os.path.join(self.out, "steps.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def check_loop(self, steps, n, eval_every):
        """n steps, ended by the loop with its own numbers, each with its phases, all 4 engines."""
        self.assertEqual([s["step"] for s in steps], list(range(1, n + 1)))
        for s in steps:
            want = ["eval", "rollout"] if s["step"] % eval_every == 0 else ["rollout"]
            self.assertEqual(sorted(s.get("phases", {})), want, s["step"])
            self.assertEqual(s["workers"], 4, s["step"])
        self.assertGreater(sum(s["phases"]["rollout"]["metrics"].get("vllm/generation_tokens", 0) for s in steps), 0)

    def check_usage(self, steps, usage):
        """Each step's phases hold exactly the tokens of the requests the loop sent in them:
        usage[step][phase] is the (prompt, completion) tokens of the answers' usage."""
        self.assertEqual(sorted(usage), [s["step"] for s in steps])
        for s in steps:
            self.assertEqual(sorted(usage[s["step"]]), sorted(s["phases"]), s["step"])
            for phase, (prompt, completion) in usage[s["step"]].items():
                m = s["phases"][phase]["metrics"]
                self.assertGreater(prompt, 0)
                self.assertEqual((m.get("vllm/prompt_tokens"), m.get("vllm/generation_tokens")), (prompt, completion),
                                 "step %d %s: the phase's tokens, then the answers' usage" % (s["step"], phase))

    def test_nemo_rl_grpo(self):
        # vllmstat sim --workload none --servers 2 --dp 2 --port 8100 &
        # vllmstat run --config examples/grpo.yaml --target 127.0.0.1:8100 --target 127.0.0.1:8101 &
        # python3 examples/nemo_rl_grpo.py
        urls = self.sim("--workload", "none")
        _, stop, log, url = self.run_vllmstat(["--config", os.path.join("examples", "grpo.yaml"),
                                               "--target", urls[0], "--target", urls[1]])
        out = self.example("nemo_rl_grpo.py", url, urls)
        # the config's vllm_cfg keys were read: a 0.5 s interval, steps only through the API
        self.assertRegex(log.text(), r"msg=scraping targets=2 interval_s=0\.5 step_every=0s")
        lines = out.splitlines()
        self.assertEqual([line.split(":")[0] for line in lines],
                         ["train step 1", "validation step 2", "train step 2", "train step 3",
                          "validation step 4", "train step 4"], out)
        self.assertTrue(all("'loss': 0.1" in line and "vllm/" in line for line in lines if line.startswith("train")), out)
        stop()
        steps = self.steps()
        self.check_loop(steps, 4, 2)
        usage = {}
        for line in lines:
            kind, step, logged = re.match(r"^(train|validation) step (\d+): (.*)$", line).groups()
            logged = ast.literal_eval(logged)
            if kind == "train":
                usage.setdefault(int(step), {})["rollout"] = (logged["rollout/prompt_tokens"], logged["rollout/completion_tokens"])
                self.assertEqual(logged["vllm/policy/version"], int(step), line)
            else:
                usage.setdefault(int(step), {})["eval"] = (logged["prompt_tokens"], logged["completion_tokens"])
        self.check_usage(steps, usage)
        # the engines slept while the policy trained, as the loop asked them to
        self.assertTrue(all(s["metrics"].get("vllm/time/asleep_s", 0) > 0 for s in steps), [s["metrics"] for s in steps])

    def test_plain_loop(self):
        # vllmstat sim --workload none --servers 2 --dp 2 --port 8100 &
        # vllmstat run --target 127.0.0.1:8100 --target 127.0.0.1:8101 --step-every 0 --interval 0.5 &
        # python3 examples/plain_loop.py
        urls = self.sim("--workload", "none")
        _, stop, _, url = self.run_vllmstat(["--target", urls[0], "--target", urls[1], "--step-every", "0",
                                             "--interval", "0.5"])
        out = self.example("plain_loop.py", url, urls)
        self.assertEqual([line.split(":")[0] for line in out.splitlines()], ["step %d" % i for i in range(1, 6)], out)
        stop()
        steps = self.steps()
        self.check_loop(steps, 5, 2)
        usage = {}
        for line in out.splitlines():
            step = int(line.split(":")[0].split()[1])
            usage[step] = {phase: (int(p), int(c)) for phase, p, c in
                           re.findall(r"(rollout|eval) usage (\d+) prompt \+ (\d+) completion tokens", line)}
        self.check_usage(steps, usage)

    def test_readme_fleet(self):
        # vllmstat sim --servers 2 --dp 2 --port 8100 &
        # vllmstat run --target 127.0.0.1:8100 --target 127.0.0.1:8101 --interval 0.5 --step-every 10s
        # with steps of 1 s instead of 10 s
        urls = self.sim()
        p, stop, log, _ = self.run_vllmstat(["--target", urls[0], "--target", urls[1], "--interval", "0.5",
                                             "--step-every", "1s"])
        for n in (1, 2):
            log.expect(r"^step %d \| [0-9.]+s \| workers 4 \| scrapes \d+ ok 0 failed \| hit " % n)
        stop()
        self.assertEqual(p.returncode, 0, log.text(eof=True))
        steps = self.steps()
        self.assertGreaterEqual(len(steps), 2)
        self.assertEqual([s["step"] for s in steps], list(range(1, len(steps) + 1)))
        self.assertTrue(all(s["workers"] == 4 for s in steps[:2]), steps[:2])

    def test_go_install(self):
        # go install ./cmd/vllmstat, into GOBIN instead of $(go env GOPATH)/bin
        need(shutil.which("go") is not None, "no go command to run the README's install line with")
        gobin = os.path.join(self.tmp, "bin")
        p = subprocess.run(["go", "install", "./cmd/vllmstat"], cwd=REPO, env=dict(os.environ, GOBIN=gobin),
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr)
        version = subprocess.run([os.path.join(gobin, "vllmstat"), "--version"], capture_output=True, text=True,
                                 timeout=WAIT)
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertRegex(version.stdout, r"^vllmstat \S+ \(commit ")


if __name__ == "__main__":
    unittest.main()
