"""Builds the vllmstat package with the vllmstat binary inside.

pyproject.toml holds the package's metadata; this file adds the one step setuptools cannot
declare: building the Go binary (../../cmd/vllmstat) for the build machine into the package, as
vllmstat/bin/vllmstat, which ``python -m vllmstat``, the ``vllmstat`` command and
``vllmstat.start()`` run. The wheel is therefore tagged for the build machine's platform (any
Python 3). The build writes nothing into the source tree except for an editable install.

Environment: GO names the go command (default: go on PATH); CGO_ENABLED defaults to 0, which
makes a binary that needs no C library of a particular version.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODULE = "module github.com/vllmstat/vllmstat"


def go_command():
    for go in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if go and os.path.isfile(go) and os.access(go, os.X_OK):
            return go
    sys.exit("building the vllmstat package needs Go (https://go.dev/dl/) to build the vllmstat binary: "
             "no go on PATH (set GO to the go command)")


def go_build(target):
    """Builds cmd/vllmstat into target, stamped with the commit when the tree is a git checkout."""
    try:
        with open(os.path.join(REPO, "go.mod"), encoding="utf-8") as f:
            ours = MODULE in f.read()
    except OSError:
        ours = False
    if not ours:
        sys.exit("the vllmstat package is built from a clone of the vllmstat repository, with Go: "
                 "%s/go.mod is not vllmstat's" % REPO)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    go = go_command()
    # -buildvcs on the command line: GOFLAGS may turn it off, and the commit is what
    # `vllmstat --version` reports beside the release number.
    for vcs in ("-buildvcs=auto", "-buildvcs=false"):
        cmd = [go, "build", "-trimpath", vcs, "-o", target, "./cmd/vllmstat"]
        print("building the vllmstat binary: " + " ".join(cmd[1:]), flush=True)
        r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            return
        if vcs == "-buildvcs=auto" and "VCS" in r.stdout:
            print("the commit cannot be stamped (%s); building without it" % r.stdout.strip().splitlines()[0],
                  flush=True)
            continue
        break
    sys.exit("go build of the vllmstat binary failed:\n" + r.stdout)


class BuildPy(build_py):
    """Copies the Python files, then builds the binary next to them."""

    def run(self):
        super().run()
        if self.dry_run:
            return
        name = "vllmstat.exe" if os.name == "nt" else "vllmstat"
        if getattr(self, "editable_mode", False):
            # an editable install imports the package from the source tree, so the binary goes there
            go_build(os.path.join(HERE, "vllmstat", "bin", name))
        else:
            go_build(os.path.join(self.build_lib, "vllmstat", "bin", name))


cmdclass = {"build_py": BuildPy}

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel: setuptools installs without building one
    pass
else:
    class BdistWheel(bdist_wheel):
        """A wheel for the build machine's platform (it holds a binary), for any Python 3."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = BdistWheel

# Build and metadata directories outside the source tree: builds running at once from one
# clone (two test runs, say) must not write over each other's files.
_scratch = tempfile.mkdtemp(prefix="vllmstat-build-")
atexit.register(shutil.rmtree, _scratch, True)

setup(
    # vllmstat holds the code; vllmstat_client is its first import name, and the stubs give
    # that name the package's types (a single-file module cannot be marked as typed).
    packages=["vllmstat", "vllmstat_client-stubs"],
    py_modules=["vllmstat_client"],
    package_data={"vllmstat": ["py.typed", "VERSION"], "vllmstat_client-stubs": ["__init__.pyi"]},
    cmdclass=cmdclass,
    options={
        "build": {"build_base": os.path.join(_scratch, "build")},
        "egg_info": {"egg_base": _scratch},
    },
)
