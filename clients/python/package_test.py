"""Tests of the vllmstat Python package: start() running a real sidecar, the version that the
binary and the package share, VLLMSTAT_URL, and the package as pip installs it into a fresh
virtual environment of Debian's Python, with the binary built inside, run from there.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
(the install test builds its own binary with Go, whatever VLLMSTAT_BIN says).
"""

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.request
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from inprocess_test import CHILD_PY, WAIT, need, vllmstat_bin, wait_for  # noqa: E402
from vllmstat_client_test import FakeAPI, FakeClock  # noqa: E402

import vllmstat  # noqa: E402
import vllmstat_client  # noqa: E402
from vllmstat_client import Client, VllmstatError  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VERSION_FILE = os.path.join(REPO, "internal", "version", "VERSION")
# SHA-256 of the Apache License 2.0 as the Apache Software Foundation publishes it (LICENSE-2.0.txt).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
VERSION_LINE = re.compile(r"^vllmstat (\S+) \(commit ([0-9a-f]{40}(, modified)?|unknown); go\S+ \S+/\S+\)$")


def release_number():
    with open(VERSION_FILE) as f:
        return f.read().strip()


def alive(pid):
    """Whether pid is a process that has not ended (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Fleet:
    """A `vllmstat sim` of one server with two engines on a free port."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "sim", "--servers", "1", "--dp", "2", "--port", "0", "--speed", "4"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise AssertionError("vllmstat sim printed %r instead of its URL" % self.url)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def scraped(client, n=2):
    """Waits until every target of the sidecar has n good scrapes."""
    def enough():
        ts = client.live().get("targets", [])
        return ts and all(t.get("scrapes", 0) - t.get("failures", 0) >= n for t in ts)
    wait_for(enough, "%d good scrapes of every target" % n)


class SidecarTest(unittest.TestCase):
    """start() with the real binary (VLLMSTAT_BIN, or built from this repository)."""

    @classmethod
    def setUpClass(cls):
        cls.bin = vllmstat_bin()
        cls.fleet = Fleet(cls.bin)

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.out = os.path.join(self.tmp, "out")

    def start(self, config=None, **kw):
        kw.setdefault("binary", self.bin)
        kw.setdefault("echo", False)
        kw.setdefault("listen", "127.0.0.1:0")
        s = vllmstat_client.start(config, **kw)
        self.addCleanup(s.close)
        return s


class Start(SidecarTest):

    def test_a_step_end_to_end(self):
        with self.start(targets=[self.fleet.url], out_dir=self.out, step_every=0, interval=0.2, strict=True) as vs:
            self.assertIsInstance(vs, Client)
            self.assertRegex(vs.url, r"^http://127\.0\.0\.1:[1-9][0-9]*$")  # port 0 came back as the real one
            self.assertTrue(vs.health())
            self.assertTrue(alive(vs.pid))
            scraped(vs)
            rec = vs.end_step(1)
            self.assertEqual(rec["step"], 1)
            self.assertEqual(rec["workers"], 2)
            self.assertGreater(rec["metrics"]["vllm/generation_tokens"], 0)
            self.assertEqual(vs.step(1)["metrics"], rec["metrics"])
        self.assertEqual(vs.returncode, 0)  # stopped by SIGTERM, cleanly
        self.assertFalse(alive(vs.pid))
        self.assertEqual(vs.close(), 0)  # again: the same code
        with open(os.path.join(self.out, "steps.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([r["step"] for r in lines], [1])
        self.assertEqual(lines[0]["metrics"], rec["metrics"])
        # the step open at the stop is set apart, as a run stopped by SIGTERM does
        self.assertTrue(os.path.exists(os.path.join(self.out, "open-step.json")))

    def test_two_sidecars_on_port_zero(self):
        a = self.start(out_dir=self.out + "-a", step_every=0)
        b = self.start(out_dir=self.out + "-b", step_every=0)
        self.assertNotEqual(a.url, b.url)
        self.assertTrue(a.health() and b.health())

    def test_dict_config_sinks_and_echo(self):
        echo = io.StringIO()
        with self.start({"step_every": 0, "sinks": ["csv"], "targets": [self.fleet.url]},
                        out_dir=self.out, interval=0.2, echo=echo, strict=True) as vs:
            scraped(vs)
            self.assertEqual(vs.end_step(7)["step"], 7)
        self.assertIn("api listening", echo.getvalue())
        self.assertRegex(echo.getvalue(), r"(?m)^step 7 \|")  # the run's summary line
        self.assertEqual(vs.output()[-1], echo.getvalue().splitlines()[-1])
        with open(os.path.join(self.out, "steps.csv")) as f:
            self.assertEqual(len(f.read().splitlines()), 2)  # header and step 7

    def test_settings_override_a_config_file(self):
        cfg = os.path.join(self.tmp, "grpo.yaml")
        with open(cfg, "w") as f:
            f.write("policy:\n  generation:\n    vllm_cfg:\n      vllm_metrics_logger_interval: 5\n"
                    "vllmstat:\n  step_every: 0\n  out_dir: elsewhere\n")
        with self.start(cfg, targets=self.fleet.url, out_dir=self.out, interval=0.2, sinks="csv",
                        per_worker=True, strict=True) as vs:
            scraped(vs)
            rec = vs.end_step(1)
            self.assertEqual(len(rec["per_worker"]), 2)  # per_worker=True came through
        self.assertTrue(os.path.exists(os.path.join(self.out, "steps.csv")))
        with self.assertRaisesRegex(TypeError, "beside a config file.*put file_sd"):
            vllmstat_client.start(cfg, binary=self.bin, file_sd=["x.json"])
        with self.assertRaisesRegex(TypeError, "sink names"):
            vllmstat_client.start(cfg, binary=self.bin, sinks=[{"type": "csv"}])

    def test_relative_files_are_the_working_directory_s(self):
        os.makedirs(os.path.join(self.tmp, "sd"))
        with open(os.path.join(self.tmp, "sd", "fleet.json"), "w") as f:
            json.dump([{"targets": [self.fleet.url]}], f)
        cwd = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, cwd)
        vs = self.start(file_sd=["sd/*.json"], step_every=0, out_dir="out", interval=0.2)
        wait_for(lambda: vs.targets(), "the file_sd target")
        self.assertEqual(vs.targets(), [self.fleet.url])
        self.assertEqual(vs.out_dir, "out")
        vs.close()
        self.assertTrue(os.path.isdir(os.path.join(self.tmp, "out")))

    def test_api_token(self):
        env = os.environ.pop("VLLMSTAT_API_TOKEN", None)
        if env is not None:
            self.addCleanup(os.environ.__setitem__, "VLLMSTAT_API_TOKEN", env)
        vs = self.start(api_token="s3cret", out_dir=self.out, step_every=0, strict=True)
        self.assertEqual(vs.targets(), [])  # the sidecar's client has the token
        with self.assertRaises(VllmstatError) as cm:
            Client(vs.url, token="", strict=True).targets()  # no token (start() exported the sidecar's)
        self.assertEqual(cm.exception.status, 401)
        with open("/proc/%d/cmdline" % vs.pid, "rb") as f:
            self.assertNotIn(b"s3cret", f.read())  # not on the command line, which every user can read
        vs.close()
        for root, _, files in os.walk(self.out):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    self.assertNotIn(b"s3cret", f.read(), name)

    def test_a_run_that_cannot_start_says_why(self):
        with self.assertRaises(VllmstatError) as cm:
            vllmstat_client.start(binary=self.bin, echo=False, interval=-1, out_dir=self.out)
        msg = str(cm.exception)
        self.assertIn("exited with code 2 before its API answered", msg)
        self.assertIn("vllm_metrics_logger_interval", msg)  # vllmstat's own words, from its last lines
        with self.assertRaisesRegex(ValueError, "needs its API"):
            vllmstat_client.start(binary=self.bin, listen="")
        # a busy port: the second run cannot listen
        a = self.start(out_dir=self.out, step_every=0)
        with self.assertRaises(VllmstatError) as cm:
            vllmstat_client.start(binary=self.bin, echo=False, listen=a.url[len("http://"):],
                                  out_dir=self.out + "-2")
        self.assertIn("address already in use", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            vllmstat_client.start(binary=os.path.join(self.tmp, "no-such-binary"))

    def test_a_stopped_sidecar_costs_one_call_until_it_answers_again(self):
        vs = self.start(out_dir=self.out, step_every=0, strict=True)
        self.addCleanup(os.kill, vs.pid, signal.SIGCONT)  # before close: a stopped process ignores SIGTERM
        clock = FakeClock()
        vs.hang_timeout, vs.probe_timeout, vs.clock = 1.0, 0.3, clock
        os.kill(vs.pid, signal.SIGSTOP)
        began = time.monotonic()
        with self.assertRaisesRegex(VllmstatError, r"POST /v1/steps/end: no answer from .* within 0\.7s, nor to "
                                                   r"/healthz \(.*timed out after 0\.3s\): it looks stopped or hung"):
            vs.end_step(1)
        self.assertLess(time.monotonic() - began, vs.timeout / 2, "the call waited for its timeout")
        with self.assertRaisesRegex(VllmstatError, "GET /v1/live: not sent: vllmstat does not answer"):
            vs.live()
        os.kill(vs.pid, signal.SIGCONT)
        with self.assertRaisesRegex(VllmstatError, "not sent"):
            vs.live()  # not asked again before probe_every has passed
        clock.now += vs.probe_every
        self.assertEqual(vs.end_step(2)["step"], 2)
        self.assertIn(2, [r["step"] for r in vs.steps()])

    def test_a_sidecar_that_dies_is_reported_with_its_last_lines(self):
        vs = self.start(out_dir=self.out, step_every=0)
        quiet = self.start(out_dir=self.out + "-2", step_every=0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            os.kill(vs.pid, signal.SIGKILL)
            wait_for(lambda: w, "the warning about the dead sidecar")
            self.assertEqual(vs.end_step(1), {})  # not strict: empty, and one more warning
            quiet.close()  # a sidecar that is stopped is not reported
            time.sleep(0.2)
        msgs = [str(x.message) for x in w]
        self.assertEqual(len(msgs), 2, msgs)
        self.assertIn("(pid %d) exited with code -9; its last lines:" % vs.pid, msgs[0])
        self.assertIn("api listening", msgs[0])
        self.assertIn("POST /v1/steps/end: the vllmstat sidecar (pid %d) exited with code -9" % vs.pid, msgs[1])
        vs.strict = True
        with self.assertRaisesRegex(VllmstatError, "(?s)exited with code -9; its last lines:\n.*api listening"):
            vs.live()
        self.assertEqual(vs.close(), -9)

    def test_stopped_when_the_trainer_ends(self):
        # A trainer that returns (atexit), and one killed with SIGKILL (no atexit: the kernel's
        # parent-death signal), leave no sidecar behind, stopped cleanly by SIGTERM.
        script = textwrap.dedent("""
            import os, signal, sys, time
            sys.path.insert(0, %r)
            import vllmstat_client
            vs = vllmstat_client.start(binary=%r, echo=False, listen="127.0.0.1:0", out_dir=sys.argv[2],
                                       step_every=0)
            print(vs.pid, flush=True)
            if sys.argv[1] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        """) % (HERE, self.bin)
        for how in ("exit", "kill"):
            with self.subTest(how):
                out = os.path.join(self.tmp, how)
                p = subprocess.run([sys.executable, "-c", script, how, out], capture_output=True, text=True,
                                   timeout=WAIT)
                self.assertEqual(p.returncode, 0 if how == "exit" else -9, p.stderr)
                pid = int(p.stdout.split()[0])
                wait_for(lambda: not alive(pid), "the sidecar's end after the trainer's")
                # SIGTERM sets the open step apart; without its trainer the sidecar could still
                # log its way out (its output goes to a file, not a pipe that SIGPIPE ends)
                self.assertTrue(os.path.exists(os.path.join(out, "open-step.json")))
                self.assertNotIn("Warning", p.stderr)


    def test_exit_messages_are_kept_in_the_out_dir(self):
        # What the sidecar says when it exits or dies also lands in OUT/sidecar.log: written by
        # the sidecar itself, it is there after a trainer killed with SIGKILL too.
        script = textwrap.dedent("""
            import os, signal, sys
            sys.path.insert(0, %r)
            import vllmstat_client
            vs = vllmstat_client.start(binary=%r, echo=False, listen="127.0.0.1:0", out_dir=sys.argv[1],
                                       step_every=0)
            print(vs.pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        """) % (HERE, self.bin)
        out = os.path.join(self.tmp, "killed")
        p = subprocess.run([sys.executable, "-c", script, out], capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(p.returncode, -9, p.stderr)
        pid = int(p.stdout.split()[0])
        wait_for(lambda: not alive(pid), "the sidecar's end after the trainer's")
        with open(os.path.join(out, "sidecar.log")) as f:
            log = f.read()
        self.assertIn("api listening", log)
        self.assertIn("the step open at exit was not ended by the trainer", log)  # said after the trainer died

        # a sidecar that dies under a living trainer: the warning's first line is kept too
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            vs = self.start(out_dir=self.out, step_every=0)
            os.kill(vs.pid, signal.SIGKILL)
            wait_for(lambda: any("exited with code -9" in str(x.message) for x in w), "the warning of the death")
        with open(os.path.join(self.out, "sidecar.log")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[-1], "vllmstat: the sidecar (pid %d) exited with code -9" % vs.pid)
        vs.close()

        # a later sidecar of the same out_dir adds to the file and is found at its own address
        again = self.start(out_dir=self.out, step_every=0, strict=True)
        self.assertTrue(again.health())
        again.close()
        with open(os.path.join(self.out, "sidecar.log")) as f:
            log = f.read()
        self.assertEqual(log.count("api listening"), 2, log)
        self.assertTrue(log.startswith("\n".join(lines) + "\n"), log)


class Versions(unittest.TestCase):

    def test_binary_package_and_file_agree(self):
        number = release_number()
        self.assertRegex(number, r"^[0-9]+\.[0-9]+\.[0-9]+")
        self.assertEqual(vllmstat.__version__, number)
        self.assertEqual(vllmstat_client.__version__, number)
        for args in (["--version"], ["version"]):
            out = subprocess.run([vllmstat_bin()] + args, capture_output=True, text=True, check=True).stdout
            m = VERSION_LINE.match(out.strip())
            self.assertTrue(m, out)
            self.assertEqual(m.group(1), number)
        # one file: the package's VERSION is the Go package's
        self.assertEqual(os.path.realpath(os.path.join(HERE, "vllmstat", "VERSION")), os.path.realpath(VERSION_FILE))

    def test_license_is_the_apache_license_2_0(self):
        with open(os.path.join(REPO, "LICENSE"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), APACHE_2_SHA256)
        self.assertEqual(os.path.realpath(os.path.join(HERE, "LICENSE")),
                         os.path.join(os.path.realpath(REPO), "LICENSE"))
        with open(os.path.join(HERE, "pyproject.toml")) as f:
            self.assertIn('license = {text = "Apache-2.0"}', f.read())

    def test_healthz_reports_the_version(self):
        vs = vllmstat_client.start(binary=vllmstat_bin(), echo=False, listen="127.0.0.1:0", step_every=0,
                                   out_dir=tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, vs.out_dir, True)
        self.addCleanup(vs.close)
        with urllib.request.urlopen(vs.url + "/healthz", timeout=WAIT) as r:
            self.assertEqual(json.loads(r.read()), {"status": "ok", "version": release_number()})
        self.assertEqual(vs.version(), release_number())


class Types(unittest.TestCase):
    """The package's own types (the installed package's, as a user's mypy reads them: Installed)."""

    def test_the_client_type_checks(self):
        need(subprocess.run(["/usr/bin/python3", "-m", "mypy", "--version"], capture_output=True).returncode == 0,
             "no mypy for Debian's Python (apt-get install python3-mypy)")
        with tempfile.TemporaryDirectory() as cache:
            p = subprocess.run(["/usr/bin/python3", "-m", "mypy", "--cache-dir", cache, "--disallow-incomplete-defs",
                                "--check-untyped-defs", "--warn-unused-ignores", "vllmstat", "vllmstat_client.py"],
                               cwd=HERE, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_step_numbers_of_any_integer_type_check(self):
        # What end_step and the others take at run time (numpy's integers, 2.0) passes the types;
        # a string does not.
        need(subprocess.run(["/usr/bin/python3", "-m", "mypy", "--version"], capture_output=True).returncode == 0,
             "no mypy for Debian's Python (apt-get install python3-mypy)")
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "trainer.py")
            with open(script, "w") as f:
                f.write(textwrap.dedent("""\
                    import vllmstat_client
                    class Step:
                        def __index__(self) -> int:
                            return 3
                    vs = vllmstat_client.Client(warn_every=30.0)
                    vs.end_step(Step())
                    vs.end_step(2.0)
                    vs.set_policy_version(Step())
                    vs.steps(since=Step())
                    vs.step(4.0)
                    vs.end_step("3")
                """))
            p = subprocess.run(["/usr/bin/python3", "-m", "mypy", "--cache-dir", os.path.join(tmp, "cache"), script],
                               cwd=tmp, env=dict(os.environ, MYPYPATH=HERE), capture_output=True, text=True,
                               timeout=300)
        self.assertEqual(re.findall(r"trainer\.py:(\d+): error: .*\[([a-z-]+)\]", p.stdout), [("11", "arg-type")],
                         p.stdout + p.stderr)

    def test_the_public_functions_are_annotated(self):
        import inspect
        for name in vllmstat.__all__:
            obj = getattr(vllmstat, name)
            funcs = [(name, obj)] if inspect.isfunction(obj) else []
            if inspect.isclass(obj):
                funcs = [(name + "." + n, f) for n, f in vars(obj).items()
                         if inspect.isfunction(f) and (not n.startswith("_") or n == "__init__")]
            for qual, f in funcs:
                f = inspect.unwrap(f)
                sig = inspect.signature(f)
                missing = [p for p in sig.parameters if p not in ("self", "cls") and p not in f.__annotations__]
                self.assertEqual(missing, [], qual)
                self.assertIn("return", f.__annotations__, qual)


class Modules(unittest.TestCase):
    """The package's modules, and vllmstat.client (vllmstat_client), which offers all their names."""

    def test_the_client_module_offers_the_names_of_the_others(self):
        from vllmstat import exposition, page, sidecar
        self.assertIs(vllmstat_client, vllmstat.client)
        for name in vllmstat.__all__:
            self.assertIs(getattr(vllmstat_client, name), getattr(vllmstat, name), name)
        self.assertIs(vllmstat_client.start, sidecar.start)
        self.assertIs(vllmstat_client._ASKED, page._ASKED)
        # setting another module's state through it sets it where that module's functions read it
        saved, mark = exposition._exposure, object()
        try:
            vllmstat_client._exposure = mark
            self.assertIs(exposition._exposure, mark)
            self.assertIs(vllmstat_client._exposure, mark)
        finally:
            vllmstat_client._exposure = saved
        self.assertNotIn("_exposure", vars(vllmstat_client))
        # and the HTTP client's, which it held before vllmstat._api did
        from vllmstat import _api
        self.assertIs(vllmstat_client._compare_version, _api._compare_version)
        saved = _api._versions_warned
        try:
            vllmstat_client._versions_warned = mark
            self.assertIs(_api._versions_warned, mark)
        finally:
            vllmstat_client._versions_warned = saved
        self.assertNotIn("_versions_warned", vars(vllmstat_client))
        with self.assertRaises(AttributeError):
            vllmstat_client.no_such_name

    def test_no_module_is_over_800_lines(self):
        pkg = os.path.dirname(vllmstat.__file__)
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                with open(os.path.join(pkg, name), encoding="utf-8") as f:
                    self.assertLessEqual(len(f.read().splitlines()), 800, name)


class VersionWarning(unittest.TestCase):
    """The client warns once when vllmstat's version is not its own (a stand-in API)."""

    def setUp(self):
        self.api = FakeAPI()
        self.addCleanup(self.api.close)
        self.api.answers["/v1/steps/end"] = (200, {"step": 1, "metrics": {"vllm/x": 1}})
        vllmstat_client._versions_warned.clear()

    def calls(self, client):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            client.end_step(1)
            client.end_step(2)
            client.health()
        return w

    def test_another_version_is_warned_once(self):
        self.api.answers["/healthz"] = (200, {"status": "ok", "version": "9.9.9"})
        w = self.calls(Client(self.api.url))
        self.assertEqual([str(x.message) for x in w], [
            "vllmstat: the vllmstat at %s is version 9.9.9, this client is version %s; records and calls may "
            "differ from what this client documents" % (self.api.url, vllmstat.__version__)])
        self.assertEqual(w[0].filename, __file__)  # the trainer's line
        # once per process: another client of the same vllmstat does not warn again
        self.assertEqual(self.calls(Client(self.api.url)), [])
        health = [r for r in self.api.requests if r[1] == "/healthz"]
        self.assertEqual(len(health), 4)  # per client: once after its first answer, and health()

    def test_no_version(self):
        self.api.answers["/healthz"] = (200, {"status": "ok"})
        w = self.calls(Client(self.api.url))
        self.assertEqual(len(w), 1)
        self.assertIn("reports no version (it is older than this client)", str(w[0].message))

    def test_the_same_version_and_a_failing_healthz_are_silent(self):
        self.api.answers["/healthz"] = (200, {"status": "ok", "version": vllmstat.__version__})
        self.assertEqual(self.calls(Client(self.api.url)), [])
        vllmstat_client._versions_warned.clear()
        del self.api.answers["/healthz"]  # 404: the check is not the call's failure
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(Client(self.api.url).end_step(1)["step"], 1)
        self.assertEqual(w, [])


class URLFromEnvironment(unittest.TestCase):

    def setUp(self):
        old = os.environ.pop("VLLMSTAT_URL", None)
        if old is not None:
            self.addCleanup(os.environ.__setitem__, "VLLMSTAT_URL", old)
        else:
            self.addCleanup(os.environ.pop, "VLLMSTAT_URL", None)

    def test_client(self):
        self.assertEqual(Client().url, "http://127.0.0.1:9400")
        os.environ["VLLMSTAT_URL"] = "http://10.1.2.3:9500/"
        self.assertEqual(Client().url, "http://10.1.2.3:9500")
        os.environ["VLLMSTAT_URL"] = "trainer-0:9400"
        self.assertEqual(Client().url, "http://trainer-0:9400")
        self.assertEqual(Client("http://127.0.0.1:1").url, "http://127.0.0.1:1")  # given: wins
        os.environ["VLLMSTAT_URL"] = ""
        self.assertEqual(Client().url, "http://127.0.0.1:9400")

    def test_expose_registers_with_it(self):
        need(CHILD_PY, "no Python with prometheus_client (run with /usr/bin/python3)")
        vs = vllmstat_client.start(binary=vllmstat_bin(), echo=False, listen="127.0.0.1:0", step_every=0,
                                   out_dir=tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, vs.out_dir, True)
        self.addCleanup(vs.close)
        env = dict(os.environ, VLLMSTAT_URL=vs.url, PYTHONPATH=HERE)
        child = subprocess.Popen([CHILD_PY, "-c", "import sys, vllmstat_client; print(vllmstat_client.expose(), "
                                  "flush=True); sys.stdin.readline()"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        try:
            url = child.stdout.readline().strip()
            self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
            self.assertEqual(wait_for(lambda: vs.targets(), "the page's registration"), [url])
        finally:
            child.stdin.close()
            child.wait(WAIT)
            child.stdout.close()
        wait_for(lambda: vs.targets() == [], "the page's removal at the child's exit")


def debian_python_builds():
    """Why Debian's Python cannot make and fill a venv without a network, or None when it can."""
    if not os.path.exists("/usr/bin/python3"):
        return "no /usr/bin/python3"
    for mod, pkg in (("venv", "python3-venv"), ("ensurepip", "python3-venv"), ("pip", "python3-pip")):
        if subprocess.run(["/usr/bin/python3", "-c", "import " + mod], capture_output=True).returncode != 0:
            return "Debian's Python cannot import %s (apt-get install %s)" % (mod, pkg)
    if not shutil.which("go"):
        return "no go command to build the binary with"
    return None


class Installed(unittest.TestCase):
    """`pip install ./clients/python` into a fresh venv of Debian's Python, with no package index,
    then the binary, the client and a sidecar run from there, outside the repository."""

    @classmethod
    def setUpClass(cls):
        need(debian_python_builds() is None, "cannot test the installed package: %s" % debian_python_builds())
        cls.tmp = tempfile.mkdtemp()
        cls.venv = os.path.join(cls.tmp, "v")
        cls.env = {k: v for k, v in os.environ.items() if k not in ("VLLMSTAT_BIN", "PYTHONPATH", "VLLMSTAT_URL")}
        cls.env["PATH"] = os.path.join(cls.venv, "bin") + os.pathsep + os.environ.get("PATH", "")
        cls.py = os.path.join(cls.venv, "bin", "python")
        try:
            cls.run_ok(["/usr/bin/python3", "-m", "venv", "--system-site-packages", cls.venv])
            cls.run_ok([cls.py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-cache-dir",
                        os.path.join(REPO, "clients", "python")], timeout=900)
        except BaseException:
            shutil.rmtree(cls.tmp, True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    @classmethod
    def run_ok(cls, args, timeout=WAIT * 4, env=None):
        p = subprocess.run(args, cwd=cls.tmp, env=env or cls.env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise AssertionError("%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (args, p.returncode, p.stdout, p.stderr))
        return p.stdout

    def python(self, code, *args):
        return self.run_ok([self.py, "-c", textwrap.dedent(code)] + list(args))

    def test_the_installed_package(self):
        info = json.loads(self.python("""
            import importlib.metadata, json, os, vllmstat, vllmstat_client
            d = importlib.metadata.distribution("vllmstat")
            print(json.dumps({
                "module": vllmstat.__file__, "same": vllmstat_client is vllmstat.client,
                "version": vllmstat.__version__, "metadata_version": d.version,
                "license": d.metadata["License"], "binary": vllmstat.binary_path(),
                "files": [str(f) for f in d.files],
                "license_text": [f.read_text() for f in d.files if str(f).endswith("LICENSE")],
            }))
        """))
        site = os.path.join(self.venv, "lib")
        self.assertTrue(info["module"].startswith(site), info["module"])  # not the repository's copy
        self.assertTrue(info["same"])
        self.assertEqual(info["version"], release_number())
        self.assertEqual(info["metadata_version"], release_number())
        self.assertEqual(info["license"], "Apache-2.0")
        with open(os.path.join(REPO, "LICENSE")) as f:
            self.assertEqual(info["license_text"], [f.read()])
        for f in ("vllmstat/py.typed", "vllmstat/VERSION", "vllmstat/bin/vllmstat", "vllmstat_client.py",
                  "vllmstat_client-stubs/__init__.pyi"):
            self.assertIn(f, info["files"])
        self.assertEqual(info["binary"], os.path.join(os.path.dirname(info["module"]), "bin", "vllmstat"))
        self.assertTrue(os.access(info["binary"], os.X_OK))

    def test_the_command_and_the_module_run_the_binary(self):
        line = self.run_ok([os.path.join(self.venv, "bin", "vllmstat"), "--version"]).strip()
        m = VERSION_LINE.match(line)
        self.assertTrue(m, line)
        self.assertEqual(m.group(1), release_number())
        if shutil.which("git") and os.path.isdir(os.path.join(REPO, ".git")):
            # the build stamped the commit it was built from
            rev = m.group(2).split(",")[0]
            self.assertEqual(subprocess.run(["git", "cat-file", "-e", rev + "^{commit}"], cwd=REPO).returncode, 0, line)
        self.assertEqual(self.run_ok([self.py, "-m", "vllmstat", "version"]).strip(), line)
        usage = self.run_ok([self.py, "-m", "vllmstat", "--help"])
        self.assertIn("Usage:\n  vllmstat <command> [flags]", usage)
        # VLLMSTAT_BIN names another binary for both
        fake = os.path.join(self.tmp, "fake-vllmstat")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho fake \"$@\"\nexit 3\n")
        os.chmod(fake, 0o755)
        for cmd in ([os.path.join(self.venv, "bin", "vllmstat")], [self.py, "-m", "vllmstat"]):
            p = subprocess.run(cmd + ["a", "b c"], cwd=self.tmp, env=dict(self.env, VLLMSTAT_BIN=fake),
                               capture_output=True, text=True, timeout=WAIT)
            self.assertEqual((p.returncode, p.stdout), (3, "fake a b c\n"), cmd)

    def test_typed(self):
        need(subprocess.run(["/usr/bin/python3", "-m", "mypy", "--version"], capture_output=True).returncode == 0,
             "no mypy for Debian's Python (apt-get install python3-mypy)")
        script = os.path.join(self.tmp, "trainer.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import vllmstat
                import vllmstat_client
                vs: vllmstat.Sidecar = vllmstat.start(targets=["127.0.0.1:8000"], step_every=0)
                record: dict = vs.end_step(1)
                metrics: dict = vllmstat.scalars(record)
                client: vllmstat_client.Client = vllmstat_client.Client()
                number: str = vllmstat_client.__version__
                wrong: int = client.end_step("one")
            """))
        p = subprocess.run(["/usr/bin/python3", "-m", "mypy", "--no-incremental", "--python-executable", self.py,
                            script], cwd=self.tmp, env=self.env, capture_output=True, text=True, timeout=300)
        # the two errors of the last line, and nothing else: the installed package's types were read
        self.assertEqual(sorted(re.findall(r"trainer\.py:(\d+): error: .*\[([a-z-]+)\]", p.stdout)),
                         [("8", "arg-type"), ("8", "assignment")], p.stdout + p.stderr)

    def test_a_sidecar_from_a_script(self):
        out = json.loads(self.python("""
            import json, subprocess, time, vllmstat
            sim = subprocess.Popen(["vllmstat", "sim", "--servers", "1", "--dp", "2", "--port", "0", "--speed", "4"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            fleet = sim.stdout.readline().strip()
            try:
                with vllmstat.start(targets=[fleet], out_dir="run", listen="127.0.0.1:0", step_every=0,
                                    interval=0.2, echo=False, strict=True) as vs:
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:  # until the open step has seen tokens
                        live = vs.live()
                        if live["step"].get("metrics", {}).get("vllm/generation_tokens", 0) > 0:
                            break
                        time.sleep(0.05)
                    record = vs.end_step(1)
                    seen = {"url": vs.url, "binary": vllmstat.binary_path(), "version": vs.version()}
                seen.update(record=record, code=vs.returncode)
            finally:
                sim.terminate()
                sim.wait()
            print(json.dumps(seen))
        """))
        self.assertTrue(out["binary"].startswith(self.venv), out["binary"])
        self.assertEqual(out["version"], release_number())
        self.assertEqual(out["code"], 0)
        self.assertEqual(out["record"]["step"], 1)
        self.assertEqual(out["record"]["workers"], 2)
        self.assertGreater(out["record"]["metrics"]["vllm/generation_tokens"], 0)
        with open(os.path.join(self.tmp, "run", "steps.jsonl")) as f:
            self.assertEqual([json.loads(line)["step"] for line in f], [1])


if __name__ == "__main__":
    unittest.main()
