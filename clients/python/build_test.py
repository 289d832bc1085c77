"""Tests of how the vllmstat package is built: its own build backend (backend/vllmstat_backend.py),
`pip install --no-index ./clients/python` into a fresh virtual environment without the system's
packages, and scripts/wheels' release wheels, each read to check that its tag is the platform of
the binary inside, the Linux x86_64 one installed and run.

Run: /usr/bin/python3 -m unittest discover -s clients/python -p 'build_test.py'
"""

import base64
import csv
import hashlib
import io
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "backend"))
from inprocess_test import need  # noqa: E402
from package_test import REPO, VERSION_LINE, release_number  # noqa: E402

import vllmstat_backend as backend  # noqa: E402

# A build of the binary takes seconds with Go's build cache, and minutes without it.
BUILD_WAIT = 900

ELF_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine: EM_X86_64, EM_AARCH64
GOARCHES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}  # Go's name of each machine
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}  # cputype: CPU_TYPE_X86_64, CPU_TYPE_ARM64
PT_INTERP = 3
LC_BUILD_VERSION = 0x32


def fresh_venv_why_not():
    """Why Debian's Python cannot make a venv with pip in it, without a network, or None."""
    if not os.path.exists("/usr/bin/python3"):
        return "no /usr/bin/python3"
    for mod in ("venv", "ensurepip"):
        if subprocess.run(["/usr/bin/python3", "-c", "import " + mod], capture_output=True).returncode != 0:
            return "Debian's Python cannot import %s (apt-get install python3-venv)" % mod
    if not shutil.which("go"):
        return "no go command to build the binary with"
    return None


def run_ok(args, cwd, env=None, timeout=BUILD_WAIT):
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (args, p.returncode, p.stdout, p.stderr))
    return p.stdout


class Venv:
    """A fresh venv of Debian's Python without the system's packages: pip (from ensurepip) only."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "venv")
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("VLLMSTAT_BIN", "PYTHONPATH", "VLLMSTAT_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
        self.env["PATH"] = os.path.join(self.dir, "bin") + os.pathsep + os.environ.get("PATH", "")
        self.py = os.path.join(self.dir, "bin", "python")
        self.tmp = tmp
        run_ok(["/usr/bin/python3", "-m", "venv", self.dir], tmp, self.env)

    def pip_install(self, what):
        return run_ok([self.py, "-m", "pip", "install", "--no-index", "--no-cache-dir", what], self.tmp, self.env)

    def python(self, code):
        return run_ok([self.py, "-c", textwrap.dedent(code)], self.tmp, self.env, timeout=120)


class Backend(unittest.TestCase):
    """The backend's parts that need no Go."""

    def test_it_requires_nothing_to_build(self):
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        self.assertEqual(backend.get_requires_for_build_editable(), [])
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            text = f.read().decode()
        self.assertIn('requires = []', text)
        self.assertIn('build-backend = "vllmstat_backend"', text)

    def test_its_toml_reader_reads_pyproject_as_tomllib_does(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib (Python 3.11+) to compare with")
        with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(backend._small_toml(text), tomllib.loads(text))
        more = 'a = ["x, y", "z"] # c\n[t."q.r"]\nb = {text = "#"}\nc = [\n  "1",\n  "2",\n]\n'
        self.assertEqual(backend._small_toml(more), tomllib.loads(more))
        with self.assertRaises(ValueError):
            backend._small_toml("a = 1\n")  # not a value pyproject.toml has

    def test_metadata(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = backend.prepare_metadata_for_build_wheel(tmp)
            self.assertEqual(name, "vllmstat-%s.dist-info" % release_number())
            with open(os.path.join(tmp, name, "METADATA"), encoding="utf-8") as f:
                meta = f.read().splitlines()
            with open(os.path.join(tmp, name, "entry_points.txt"), encoding="utf-8") as f:
                entry_points = f.read()
        for line in ("Name: vllmstat", "Version: " + release_number(), "License: Apache-2.0",
                     "Requires-Python: >=3.9", "Provides-Extra: inprocess",
                     'Requires-Dist: prometheus_client; extra == "inprocess"'):
            self.assertIn(line, meta)
        self.assertEqual(entry_points, "[console_scripts]\nvllmstat = vllmstat.__main__:main\n")

    def test_a_platform_without_a_tag_is_refused(self):
        with self.assertRaisesRegex(SystemExit, "no wheel tag for windows/amd64"):
            backend._tag({"goos": "windows", "goarch": "amd64"})
        with self.assertRaisesRegex(SystemExit, "set both GOOS and GOARCH"):
            backend._tag({"goos": "linux"})


class OfflineInstall(unittest.TestCase):
    """pip install --no-index ./clients/python into a venv without the system's packages: the
    isolated build environment gets nothing from an index, and needs nothing."""

    def test_install_and_run(self):
        need(fresh_venv_why_not() is None, "cannot test the offline install: %s" % fresh_venv_why_not())
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        venv = Venv(tmp)
        venv.pip_install(os.path.join(REPO, "clients", "python"))
        line = run_ok([os.path.join(venv.dir, "bin", "vllmstat"), "--version"], tmp, venv.env).strip()
        m = VERSION_LINE.match(line)
        self.assertTrue(m, line)
        self.assertEqual(m.group(1), release_number())
        seen = json.loads(venv.python("""
            import importlib.util, json, subprocess, sys, vllmstat, vllmstat_client
            print(json.dumps({"module": vllmstat.__file__, "binary": vllmstat.binary_path(),
                              "same": vllmstat_client is vllmstat.client, "version": vllmstat.__version__,
                              "system": importlib.util.find_spec("prometheus_client") is not None}))
        """))
        self.assertFalse(seen["system"], "the venv sees the system's packages")
        self.assertTrue(seen["module"].startswith(venv.dir), seen)
        self.assertTrue(seen["binary"].startswith(venv.dir), seen)
        self.assertTrue(seen["same"])
        self.assertEqual(seen["version"], release_number())


def wheel_platforms(name):
    """The platform tags of a wheel's file name."""
    return name[:-len(".whl")].split("-")[4].split(".")


def tag_platform(tag):
    """(os, machine, oldest macOS as a tuple or None) that a platform tag names."""
    for prefix in ("manylinux_", "musllinux_"):
        if tag.startswith(prefix):
            return "linux", tag.split("_", 3)[3], None
    if tag.startswith("manylinux2014_"):
        return "linux", tag[len("manylinux2014_"):], None
    if tag.startswith("macosx_"):
        _, major, minor, machine = tag.split("_", 3)
        return "darwin", machine, (int(major), int(minor))
    raise AssertionError("unknown platform tag %s" % tag)


def binary_platform(data):
    """(os, machine, oldest macOS or None, dynamic) read from an executable's header: ELF's
    e_machine and program headers, or Mach-O's cputype and LC_BUILD_VERSION."""
    if data[:4] == b"\x7fELF":
        if data[4] != 2 or data[5] != 1:
            raise AssertionError("not a 64-bit little-endian ELF file")
        machine, = struct.unpack_from("<H", data, 18)
        phoff, = struct.unpack_from("<Q", data, 32)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
        types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
        return "linux", ELF_MACHINES.get(machine, "e_machine %d" % machine), None, PT_INTERP in types
    if data[:4] == struct.pack("<I", 0xFEEDFACF):
        cpu, _, _, ncmds, _, _, _ = struct.unpack_from("<iiIIIII", data, 4)
        off, minos = 32, None
        for _ in range(ncmds):
            cmd, size = struct.unpack_from("<II", data, off)
            if cmd == LC_BUILD_VERSION:
                v, = struct.unpack_from("<I", data, off + 12)
                minos = (v >> 16, (v >> 8) & 0xFF)
            off += size
        return "darwin", MACHO_CPUS.get(cpu, "cputype %#x" % cpu), minos, False
    raise AssertionError("neither ELF nor 64-bit Mach-O: %r" % data[:4])


# The platforms scripts/wheels compiles vllmstat for in this test: the build machine's, whose
# build shares the build cache with the binary the other tests run. Compiling for another
# platform builds the standard library and every dependency anew (minutes of 2 cores on a fresh
# machine), so the other platforms' wheels are written by the same backend around a small
# program built for them (VLLMSTAT_WHEEL_BINARY), whose header says the platform as vllmstat's
# would; that vllmstat's code builds for each of them is checked by type-checking it as each
# builds (cmd/vllmstat's TestTypeChecksForEveryReleasePlatform). WHEELS_ALL=1 compiles vllmstat
# for all four, as a release does. Go's linker decides what a macOS binary needs (its
# LC_BUILD_VERSION), which the wheel's tag must allow, so the macOS stand-ins are built by Go; a
# Linux stand-in says only its machine in its ELF header, which the test writes (a cross-compile
# of the runtime costs about 17 s of CPU on a fresh machine).
COMPILED = ("linux/amd64",)

STAND_IN = """package main

func main() {}
"""


def elf_stand_in(path, machine):
    """An ELF64 little-endian executable's header for e_machine, with one PT_LOAD program header."""
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)  # 64-bit, little-endian, version 1
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, machine, 1, 0x400000, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0x400000, 120, 120, 0x1000)  # PT_LOAD, R+X
    with open(path, "wb") as f:
        f.write(header + load)
    os.chmod(path, 0o755)
    return path


def stand_in_binary(tmp, platform):
    """A small Go program built for platform (GOOS/GOARCH) as the backend builds vllmstat, or for
    Linux an ELF header naming its machine."""
    goos, goarch = platform.split("/")
    out = os.path.join(tmp, "stand-in-%s-%s" % (goos, goarch))
    if goos == "linux":
        return elf_stand_in(out, next(m for m, name in ELF_MACHINES.items() if GOARCHES[name] == goarch))
    src = os.path.join(tmp, "stand-in")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "go.mod"), "w") as f:
        f.write("module standin\n\ngo 1.21\n")
    with open(os.path.join(src, "main.go"), "w") as f:
        f.write(STAND_IN)
    run_ok(["go", "build", "-trimpath", "-o", out, "."], src, dict(os.environ, CGO_ENABLED="0", GOOS=goos, GOARCH=goarch))
    return out


class Wheels(unittest.TestCase):
    """scripts/wheels: a wheel per platform, tagged for the binary inside."""

    @classmethod
    def setUpClass(cls):
        need(shutil.which("go"), "no go command to build the wheels with")
        cls.tmp = tempfile.mkdtemp()
        cls.dist = os.path.join(cls.tmp, "dist")
        env = dict(os.environ, PYTHON=sys.executable)
        every = sorted("%s/%s" % p for p in backend.PLATFORMS)
        compiled = every if os.environ.get("WHEELS_ALL") == "1" else list(COMPILED)
        cls.stand_ins = [p for p in every if p not in compiled]
        try:
            run_ok([os.path.join(REPO, "scripts", "wheels"), cls.dist] + compiled, REPO, env)
            for p in cls.stand_ins:
                goos, goarch = p.split("/")
                run_ok([sys.executable, os.path.join(HERE, "backend", "vllmstat_backend.py"), cls.dist], REPO,
                       dict(env, GOOS=goos, GOARCH=goarch, VLLMSTAT_WHEEL_BINARY=stand_in_binary(cls.tmp, p)))
        except BaseException:
            shutil.rmtree(cls.tmp, True)
            raise
        cls.wheels = sorted(n for n in os.listdir(cls.dist) if n.endswith(".whl"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def test_one_wheel_per_platform_tagged_for_its_binary(self):
        covered = set()
        for name in self.wheels:
            with self.subTest(wheel=name), zipfile.ZipFile(os.path.join(self.dist, name)) as z:
                dist, version, py, abi = name.split("-")[:4]
                self.assertEqual((dist, version, py, abi), ("vllmstat", release_number(), "py3", "none"))
                tags = wheel_platforms(name)
                wheel = z.read("vllmstat-%s.dist-info/WHEEL" % version).decode().splitlines()
                self.assertEqual([w for w in wheel if w.startswith("Tag: ")], ["Tag: py3-none-" + t for t in tags])
                self.assertIn("Root-Is-Purelib: false", wheel)
                binary = z.getinfo("vllmstat/bin/vllmstat")
                self.assertEqual((binary.external_attr >> 16) & 0o777, 0o755)
                data = z.read(binary)
                got_os, machine, minos, dynamic = binary_platform(data)
                self.assertFalse(dynamic, "the Linux binary asks for a dynamic loader (PT_INTERP)")
                goarch = GOARCHES.get(machine, machine)
                if "%s/%s" % (got_os, goarch) not in self.stand_ins:  # vllmstat, whose build info names its module
                    self.assertIn(b"github.com/vllmstat/vllmstat", data)
                for tag in tags:
                    want_os, want_machine, oldest = tag_platform(tag)
                    self.assertEqual((got_os, machine), (want_os, want_machine), tag)
                    if want_os == "darwin":
                        self.assertIsNotNone(minos, "no LC_BUILD_VERSION in the Mach-O binary")
                        self.assertGreaterEqual(oldest, minos, "%s, but the binary needs macOS %d.%d" % ((tag,) + minos))
                covered.add((got_os, machine))
        self.assertEqual(covered, {("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "x86_64"),
                                   ("darwin", "arm64")}, self.wheels)
        self.assertEqual(len(self.wheels), 4, self.wheels)

    def test_record_lists_every_file_with_its_hash(self):
        for name in self.wheels:
            with self.subTest(wheel=name), zipfile.ZipFile(os.path.join(self.dist, name)) as z:
                record_name = "vllmstat-%s.dist-info/RECORD" % release_number()
                rows = list(csv.reader(io.StringIO(z.read(record_name).decode())))
                self.assertEqual(sorted(r[0] for r in rows), sorted(z.namelist()))
                for path, digest, size in rows:
                    if path == record_name:
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), ("sha256=" + want, len(data)), path)
                for f in ("vllmstat/__init__.py", "vllmstat/client.py", "vllmstat/py.typed", "vllmstat/VERSION",
                          "vllmstat_client.py", "vllmstat_client-stubs/__init__.pyi"):
                    self.assertIn(f, z.namelist())

    def test_the_linux_x86_64_wheel_installs_and_runs(self):
        need(sys.platform.startswith("linux") and platform.machine() == "x86_64", "not a Linux x86_64 machine")
        need(fresh_venv_why_not() is None, "cannot make a venv: %s" % fresh_venv_why_not())
        wheel = [n for n in self.wheels if "manylinux_2_17_x86_64" in wheel_platforms(n)]
        self.assertEqual(len(wheel), 1, self.wheels)
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        venv = Venv(tmp)
        venv.pip_install(os.path.join(self.dist, wheel[0]))
        line = run_ok([os.path.join(venv.dir, "bin", "vllmstat"), "--version"], tmp, venv.env).strip()
        m = VERSION_LINE.match(line)
        self.assertTrue(m, line)
        self.assertEqual(m.group(1), release_number())
        self.assertTrue(line.endswith(" linux/amd64)"), line)
        binary = venv.python("import vllmstat; print(vllmstat.binary_path())").strip()
        self.assertTrue(binary.startswith(venv.dir + os.sep) and binary.endswith("/vllmstat/bin/vllmstat"), binary)


if __name__ == "__main__":
    unittest.main()
