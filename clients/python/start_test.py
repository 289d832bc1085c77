"""Tests of start() with the real binary: what it passes the sidecar and how (no credentials on
its command line), the step numbers it takes, the address it gives other processes, and how it
names a setting the sidecar refuses.

Run: VLLMSTAT_BIN=path/to/vllmstat /usr/bin/python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import base64
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from inprocess_test import WAIT, wait_for  # noqa: E402
from numbers_test import Index  # noqa: E402
from package_test import SidecarTest  # noqa: E402

import vllmstat_client  # noqa: E402
from vllmstat_client import Client, VllmstatError  # noqa: E402

PASSWORD = "Pw-5ecret-77"


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().decode()


class Engine:
    """A /metrics page on loopback that keeps the credentials of every scrape."""

    def __init__(self):
        self.seen = []
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                auth = self.headers.get("Authorization") or ""
                engine.seen.append(base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else auth)
                body = b"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://trainer:%s@127.0.0.1:%d/metrics" % (PASSWORD, self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


class Credentials(SidecarTest):
    """A target's user:password reaches the sidecar, and neither its command line nor any message."""

    def target(self):
        return self.fleet.url.replace("http://", "http://trainer:%s@" % PASSWORD)

    def test_not_on_the_command_line(self):
        cfg = os.path.join(self.tmp, "run.yaml")
        with open(cfg, "w") as f:
            f.write("step_every: 0\n")
        for i, config in enumerate((None, {"step_every": 0}, cfg)):
            with self.subTest(config=config):
                engine = Engine()
                self.addCleanup(engine.close)
                out = "%s-%d" % (self.out, i)
                vs = self.start(config, targets=[engine.url], out_dir=out, interval=0.2, strict=True)
                self.assertNotIn(PASSWORD, cmdline(vs.pid))
                # nor in a file once the sidecar read its settings: a trainer killed with SIGKILL
                # never removes its private directory
                for name in os.listdir(vs._cleanup):
                    with open(os.path.join(vs._cleanup, name), errors="replace") as f:
                        self.assertNotIn(PASSWORD, f.read(), name)
                self.assertNotIn("trainer", cmdline(vs.pid))
                # the sidecar has the target, credentials and all
                wait_for(lambda: "trainer:" + PASSWORD in engine.seen, "a scrape with the target's credentials")
                vs.close()
                self.assertNotIn(PASSWORD, "\n".join(vs.output()))
                with open(os.path.join(out, "sidecar.log")) as f:
                    self.assertNotIn(PASSWORD, f.read())

    def test_not_in_the_message_of_a_failed_start(self):
        cfg = os.path.join(self.tmp, "run.yaml")
        with open(cfg, "w") as f:
            f.write("step_every: 0\n")
        for config in (None, cfg):
            with self.subTest(config=config):
                with self.assertRaises(VllmstatError) as cm:
                    vllmstat_client.start(config, binary=self.bin, echo=False, listen="127.0.0.1:0",
                                          targets=[self.target()], scrape_timeout="bad", out_dir=self.out)
                msg = str(cm.exception)
                self.assertIn("scrape", msg)  # the sidecar's own words
                self.assertNotIn(PASSWORD, msg)

    def test_a_client_url_with_credentials_is_not_shown(self):
        c = Client("http://trainer:%s@127.0.0.1:1" % PASSWORD, timeout=2)
        self.assertNotIn(PASSWORD, c.url)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(c.end_step(1), {})
        self.assertEqual(len(w), 1)
        self.assertIn("cannot reach", str(w[0].message))
        self.assertNotIn(PASSWORD, str(w[0].message))
        with self.assertRaises(VllmstatError) as cm:
            Client("http://trainer:%s@127.0.0.1:1" % PASSWORD, timeout=2, strict=True).live()
        self.assertNotIn(PASSWORD, str(cm.exception))
        # the user info is sent as basic auth, to a server that answers what is not vllmstat's
        engine = Engine()
        self.addCleanup(engine.close)
        with self.assertRaises(VllmstatError) as cm:
            Client(engine.url.replace("/metrics", ""), timeout=5, strict=True).live()
        self.assertEqual(engine.seen, ["trainer:" + PASSWORD])
        self.assertIn("not JSON", str(cm.exception))
        self.assertNotIn(PASSWORD, str(cm.exception))

    def test_a_target_with_a_new_line_is_refused(self):
        with self.assertRaisesRegex(ValueError, "targets"):
            vllmstat_client.start(os.path.join(self.tmp, "none.yaml"), binary=self.bin,
                                  targets=["http://a:%s@b:1/metrics\nhttp://c:2/metrics" % PASSWORD])


class ResumeFrom(SidecarTest):
    """resume_from is a decimal step number: "010" is step 10, never 8."""

    def steps_after_resume(self, config, value):
        with self.start(out_dir=self.out, step_every=0, strict=True) as vs:
            for step in range(1, 13):
                vs.end_step(step)
        with self.start(config, out_dir=self.out, step_every=0, resume_from=value, strict=True) as vs:
            kept = [r["step"] for r in vs.steps()]
        with open(os.path.join(self.out, "steps.jsonl")) as f:
            return kept, [json.loads(line)["step"] for line in f]

    def test_decimal(self):
        cfg = os.path.join(self.tmp, "run.yaml")
        with open(cfg, "w") as f:
            f.write("step_every: 0\n")
        for config in (None, cfg):
            for value in ("010", 10, 10.0, Index(10)):
                with self.subTest(config=config, value=value):
                    for name in os.listdir(self.tmp):
                        if name.startswith("out"):
                            subprocess.run(["rm", "-rf", os.path.join(self.tmp, name)], check=True)
                    _, on_disk = self.steps_after_resume(config, value)
                    self.assertEqual(on_disk, list(range(1, 11)))

    def test_other_bases_are_refused(self):
        for value in ("0x8", "0b1000", "0o10", "8.5", 8.5, True, -1, "1_0", " 10"):
            for config in (None, os.path.join(self.tmp, "none.yaml")):
                with self.subTest(value=value, config=config):
                    with self.assertRaisesRegex(ValueError, r"start\(\): resume_from must be a whole number"):
                        vllmstat_client.start(config, binary=self.bin, resume_from=value, out_dir=self.out)
        self.assertFalse(os.path.exists(self.out))  # refused before any process ran


class Address(SidecarTest):
    """A sidecar on port 0 is found by other processes through VLLMSTAT_URL."""

    CHILD = textwrap.dedent("""
        import json, os, sys
        sys.path.insert(0, %r)
        from vllmstat_client import Client
        c = Client(strict=True)
        print(json.dumps({"url": c.url, "env": os.environ.get("VLLMSTAT_URL"), "targets": c.targets()}))
    """) % HERE

    def child(self):
        p = subprocess.run([sys.executable, "-c", self.CHILD], capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_exported_to_child_processes(self):
        before = os.environ.get("VLLMSTAT_URL")
        vs = self.start(out_dir=self.out, step_every=0, targets=[self.fleet.url])
        self.assertEqual(os.environ.get("VLLMSTAT_URL"), vs.url)
        seen = self.child()
        self.assertEqual(seen, {"url": vs.url, "env": vs.url, "targets": [self.fleet.url]})
        self.assertEqual(Client().url, vs.url)

        # a second sidecar is the one found while it runs; closing it finds the first again
        other = self.start(out_dir=self.out + "-2", step_every=0)
        self.assertEqual(self.child()["url"], other.url)
        other.close()
        self.assertEqual(self.child()["url"], vs.url)
        vs.close()
        self.assertEqual(os.environ.get("VLLMSTAT_URL"), before)

    def test_the_token_too(self):
        saved = os.environ.pop("VLLMSTAT_API_TOKEN", None)
        if saved is not None:
            self.addCleanup(os.environ.__setitem__, "VLLMSTAT_API_TOKEN", saved)
        vs = self.start(out_dir=self.out, step_every=0, targets=[self.fleet.url], api_token="t0ken-xyz")
        self.assertEqual(self.child()["targets"], [self.fleet.url])
        vs.close()
        self.assertNotIn("VLLMSTAT_API_TOKEN", os.environ)


class UnknownSetting(SidecarTest):
    """A setting the sidecar does not know is named as start()'s, with vllmstat's suggestion."""

    def test_a_typo_names_the_setting(self):
        for config in (None, {"out_dir": self.out}):
            with self.subTest(config=config):
                with self.assertRaises(VllmstatError) as cm:
                    vllmstat_client.start(config, binary=self.bin, echo=False, listen="127.0.0.1:0",
                                          step_evry=2)
                msg = str(cm.exception)
                self.assertTrue(msg.startswith("start() got an unknown setting step_evry; did you mean step_every?"),
                                msg)
                self.assertNotIn("vllmstat-sidecar-", msg)  # no file the trainer never wrote
                self.assertNotIn("(line ", msg)

    def test_a_typo_in_the_config_dict_names_its_key(self):
        with self.assertRaises(VllmstatError) as cm:
            vllmstat_client.start({"metric_prefx": "x"}, binary=self.bin, echo=False, listen="127.0.0.1:0")
        self.assertTrue(str(cm.exception).startswith(
            "start() got an unknown config key metric_prefx; did you mean metric_prefix?"), str(cm.exception))

    def test_a_bad_value_names_the_setting(self):
        with self.assertRaises(VllmstatError) as cm:
            vllmstat_client.start(binary=self.bin, echo=False, listen="127.0.0.1:0", interval=-1, out_dir=self.out)
        msg = str(cm.exception)
        self.assertRegex(msg, r'^start\(\) setting interval \(vllm_metrics_logger_interval\): "-1" is not allowed')
        self.assertNotIn("vllmstat-sidecar-", msg)

    def test_several_problems_each_name_their_setting(self):
        cfg = os.path.join(self.tmp, "run.yaml")
        with open(cfg, "w") as f:
            f.write("step_every: 0\n")
        bad = ["http://127.0.0.1:9/metrics", "ftp://trainer:%s@x" % PASSWORD]
        for config, targets in ((None, "start() setting targets (at targets[1]): "),
                                (cfg, "start() setting targets[1]: ")):
            with self.subTest(config=config):
                with self.assertRaises(VllmstatError) as cm:
                    vllmstat_client.start(config, binary=self.bin, echo=False, listen="127.0.0.1:0", targets=bad,
                                          sinks=["csvv"])
                lines = str(cm.exception).splitlines()
                self.assertTrue(lines[0].startswith(targets), lines)
                self.assertIn('"ftp://<secret>@x"', lines[0])
                self.assertRegex(lines[1], r"^start\(\) setting sinks( \(at sinks\[0\]\))?: unknown sink type "
                                           r"\"csvv\".*did you mean csv\?")
                self.assertEqual(lines[2], "vllmstat run exited with code 2 before its API answered")
                self.assertNotIn("vllmstat-sidecar-", str(cm.exception))
                self.assertNotIn(PASSWORD, str(cm.exception))

    def test_a_typo_beside_a_config_file(self):
        cfg = os.path.join(self.tmp, "run.yaml")
        with open(cfg, "w") as f:
            f.write("step_every: 0\n")
        with self.assertRaisesRegex(TypeError, r"^start\(\) got an unknown setting step_evry; did you mean "
                                               r"step_every\?"):
            vllmstat_client.start(cfg, binary=self.bin, step_evry=2)


if __name__ == "__main__":
    unittest.main()
