"""The vllmstat package's build backend (PEP 517): builds the Go binary and writes the wheel.

pyproject.toml names it (``build-backend``, found through ``backend-path``) and requires nothing
else, so that ``pip install --no-index ./clients/python`` works on a machine without a package
index: pip's isolated build environment installs nothing. The wheel holds the package
(``vllmstat``, ``vllmstat_client.py`` and its stubs), the binary ``go build`` made from
``../../cmd/vllmstat`` (as ``vllmstat/bin/vllmstat``, which ``python -m vllmstat``, the
``vllmstat`` command and ``vllmstat.start()`` run), and the metadata of pyproject.toml's
``[project]`` table.

The binary is built with CGO_ENABLED=0, so it needs no C library. It is built for the build
machine, and the wheel tagged for that machine's platform (any Python 3), unless GOOS and
GOARCH are set (in the environment, or as config settings ``goos``, ``goarch``): the binary is
then built for that platform and the wheel gets the platform's release tag (``PLATFORMS``), as
``scripts/wheels`` does for each. GO names the go command (default: go on PATH). The config
setting ``binary`` (or VLLMSTAT_WHEEL_BINARY) names a binary built elsewhere for the wheel's platform,
a signed build for instance, which the wheel then holds as it is instead of one built here.

No source distribution: the binary's source is the Go module the package sits in, which a
source archive of the package would not hold; releases publish wheels.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
REPO = os.path.dirname(os.path.dirname(HERE))
MODULE = "module github.com/vllmstat/vllmstat"

# The wheel tag of each (GOOS, GOARCH) a release has a wheel for. The binary is static, so a
# Linux wheel runs on any glibc (manylinux) or musl (musllinux) system; macOS 12 is the oldest
# that Go's linker writes into a binary (LC_BUILD_VERSION), which the wheels' test reads.
PLATFORMS = {
    ("linux", "amd64"): "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
    ("linux", "arm64"): "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
    ("darwin", "amd64"): "macosx_12_0_x86_64",
    ("darwin", "arm64"): "macosx_12_0_arm64",
}

# Fixed time of every file in the wheel, so that two builds of one tree give the same archive
# (SOURCE_DATE_EPOCH, when set, overrides it).
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


# -- PEP 517 hooks ------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    project = _project()
    name = _dist_info(project)
    path = os.path.join(metadata_directory, name)
    os.makedirs(path, exist_ok=True)
    for rel, data in _metadata_files(project, _tag(config_settings)):
        with open(os.path.join(metadata_directory, rel), "wb") as f:
            f.write(data)
    return name


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: Optional[Mapping[str, Any]] = None) -> str:
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """Builds the binary and writes the wheel into wheel_directory; returns its file name."""
    project = _project()
    goos, goarch = _target(config_settings)
    with tempfile.TemporaryDirectory(prefix="vllmstat-build-") as tmp:
        binary = os.path.join(tmp, "vllmstat.exe" if (goos or _host_goos()) == "windows" else "vllmstat")
        given = (config_settings or {}).get("binary") or os.environ.get("VLLMSTAT_WHEEL_BINARY")
        if given:
            if not os.path.isfile(given):
                raise SystemExit("building the vllmstat wheel: the binary %r (VLLMSTAT_WHEEL_BINARY) is no file" % given)
            shutil.copyfile(given, binary)
            os.chmod(binary, 0o755)  # a program, whatever mode the copy it came from had
        else:
            go_build(binary, goos, goarch)
        files = _package_files()
        files.append(("vllmstat/bin/" + os.path.basename(binary), binary))
        return _write_wheel(wheel_directory, project, _tag(config_settings), files)


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """A wheel that imports the package from this directory (a .pth file), with the binary
    built into the source tree (vllmstat/bin/, which git ignores)."""
    project = _project()
    goos, goarch = _target(config_settings)
    go_build(os.path.join(HERE, "vllmstat", "bin", "vllmstat.exe" if os.name == "nt" else "vllmstat"), goos, goarch)
    pth = os.path.join(tempfile.mkdtemp(prefix="vllmstat-editable-"), "vllmstat_editable.pth")
    with open(pth, "w", encoding="utf-8") as f:
        f.write(HERE + "\n")
    try:
        return _write_wheel(wheel_directory, project, _tag(config_settings), [("vllmstat_editable.pth", pth)])
    finally:
        shutil.rmtree(os.path.dirname(pth), ignore_errors=True)


# -- the binary ---------------------------------------------------------------------------------

def go_command() -> str:
    for go in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if go and os.path.isfile(go) and os.access(go, os.X_OK):
            return go
    raise SystemExit("building the vllmstat package needs Go (https://go.dev/dl/) to build the vllmstat binary: "
                     "no go on PATH (set GO to the go command)")


def go_build(target: str, goos: Optional[str] = None, goarch: Optional[str] = None) -> None:
    """Builds cmd/vllmstat into target (for goos/goarch when given), stamped with the commit
    when the tree is a git checkout."""
    try:
        with open(os.path.join(REPO, "go.mod"), encoding="utf-8") as f:
            ours = MODULE in f.read()
    except OSError:
        ours = False
    if not ours:
        raise SystemExit("the vllmstat package is built from a clone of the vllmstat repository, with Go: "
                         "%s/go.mod is not vllmstat's" % REPO)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="0")  # a static binary: no C library of a given version
    if goos:
        env["GOOS"], env["GOARCH"] = goos, goarch or ""
    go = go_command()
    # -buildvcs on the command line: GOFLAGS may turn it off, and the commit is what
    # `vllmstat --version` reports beside the release number.
    for vcs in ("-buildvcs=auto", "-buildvcs=false"):
        cmd = [go, "build", "-trimpath", vcs, "-o", target, "./cmd/vllmstat"]
        where = " for %s/%s" % (goos, goarch) if goos else ""
        print("building the vllmstat binary%s: %s" % (where, " ".join(cmd[1:])), file=sys.stderr, flush=True)
        r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            return
        if vcs == "-buildvcs=auto" and "VCS" in r.stdout:
            print("the commit cannot be stamped (%s); building without it" % r.stdout.strip().splitlines()[0],
                  file=sys.stderr, flush=True)
            continue
        break
    raise SystemExit("go build of the vllmstat binary failed:\n" + r.stdout)


def _setting(config_settings: Optional[Mapping[str, Any]], key: str) -> Optional[str]:
    value = (config_settings or {}).get(key) or os.environ.get(key.upper())
    return str(value) if value else None


def _target(config_settings: Optional[Mapping[str, Any]]) -> Tuple[Optional[str], Optional[str]]:
    """The (GOOS, GOARCH) asked for, or (None, None) for the build machine's."""
    goos, goarch = _setting(config_settings, "goos"), _setting(config_settings, "goarch")
    if bool(goos) != bool(goarch):
        raise SystemExit("building the vllmstat wheel: set both GOOS and GOARCH, or neither (got %r and %r)"
                         % (goos, goarch))
    if goos and (goos, goarch) not in PLATFORMS:
        raise SystemExit("building the vllmstat wheel: no wheel tag for %s/%s; the wheels are for %s"
                         % (goos, goarch, ", ".join("%s/%s" % p for p in sorted(PLATFORMS))))
    return goos, goarch


def _tag(config_settings: Optional[Mapping[str, Any]]) -> str:
    """The wheel's tag: any Python 3, no ABI, the platform of the binary inside."""
    goos, goarch = _target(config_settings)
    if goos:
        return "py3-none-" + PLATFORMS[(goos, goarch or "")]
    return "py3-none-" + re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _host_goos() -> str:
    return {"win32": "windows", "darwin": "darwin"}.get(sys.platform, sys.platform)


# -- the wheel ----------------------------------------------------------------------------------

def _package_files() -> List[Tuple[str, str]]:
    """(path in the wheel, path here) of the package's files: the Python code, its types and
    its VERSION (a link to the one the binary embeds, copied as a file)."""
    out = [("vllmstat_client.py", os.path.join(HERE, "vllmstat_client.py")),
           ("vllmstat_client-stubs/__init__.pyi", os.path.join(HERE, "vllmstat_client-stubs", "__init__.pyi"))]
    pkg = os.path.join(HERE, "vllmstat")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name in ("py.typed", "VERSION"):
            out.append(("vllmstat/" + name, os.path.join(pkg, name)))
    return out


def _write_wheel(wheel_directory: str, project: Dict[str, Any], tag: str, files: List[Tuple[str, str]]) -> str:
    name = "%s-%s-%s.whl" % (_dist_name(project), project["version"], tag)
    records = []
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path + ".part", "w", compression=zipfile.ZIP_DEFLATED) as z:
        def add(rel: str, data: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(rel, _zip_time())
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append("%s,sha256=%s,%d" % (_csv(rel), digest, len(data)))

        for rel, src in files:
            with open(src, "rb") as f:
                data = f.read()
            add(rel, data, 0o755 if os.access(src, os.X_OK) and rel.startswith("vllmstat/bin/") else 0o644)
        for rel, data in _metadata_files(project, tag):
            add(rel, data)
        record = _dist_info(project) + "/RECORD"
        records.append(_csv(record) + ",,")
        info = zipfile.ZipInfo(record, _zip_time())
        info.external_attr = (0o100000 | 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, "".join(r + "\n" for r in records))
    os.replace(path + ".part", path)
    return name


def _csv(field: str) -> str:
    return '"%s"' % field.replace('"', '""') if any(c in field for c in ',"\n') else field


def _zip_time() -> Tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit() and int(epoch) >= 315532800:  # zip's times start in 1980
        import time
        return time.gmtime(int(epoch))[:6]
    return _ZIP_TIME


def _dist_name(project: Dict[str, Any]) -> str:
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _dist_info(project: Dict[str, Any]) -> str:
    return "%s-%s.dist-info" % (_dist_name(project), project["version"])


def _metadata_files(project: Dict[str, Any], tag: str) -> List[Tuple[str, bytes]]:
    """(path in the wheel, contents) of the .dist-info files but RECORD."""
    d = _dist_info(project)
    wheel = ["Wheel-Version: 1.0", "Generator: vllmstat_backend", "Root-Is-Purelib: false"]
    py, abi, plats = tag.split("-")
    wheel += ["Tag: %s-%s-%s" % (py, abi, p) for p in plats.split(".")]
    out = [(d + "/METADATA", _metadata(project).encode("utf-8")),
           (d + "/WHEEL", ("\n".join(wheel) + "\n").encode()),
           (d + "/top_level.txt", b"vllmstat\nvllmstat_client\n")]
    scripts = project.get("scripts") or {}
    if scripts:
        lines = ["[console_scripts]"] + ["%s = %s" % kv for kv in sorted(scripts.items())]
        out.append((d + "/entry_points.txt", ("\n".join(lines) + "\n").encode()))
    with open(os.path.join(HERE, "LICENSE"), "rb") as f:
        out.append((d + "/LICENSE", f.read()))
    return out


def _metadata(project: Dict[str, Any]) -> str:
    """The core metadata (version 2.1) of pyproject.toml's [project] table."""
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + project["version"]]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("keywords"):
        lines.append("Keywords: " + ",".join(project["keywords"]))
    lic = project.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: " + lic["text"])
    lines += ["Classifier: " + c for c in project.get("classifiers", [])]
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    lines += ["Requires-Dist: " + r for r in project.get("dependencies", [])]
    for extra, reqs in sorted((project.get("optional-dependencies") or {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    lines.append("License-File: LICENSE")
    return "\n".join(lines) + "\n"


def _project() -> Dict[str, Any]:
    """pyproject.toml's [project] table, with the version (dynamic) from vllmstat/VERSION."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        text = f.read()
    project = dict(_toml(text.decode("utf-8")).get("project", {}))
    with open(os.path.join(HERE, "vllmstat", "VERSION"), encoding="utf-8") as f:
        project["version"] = f.read().strip()
    return project


def _toml(text: str) -> Dict[str, Any]:
    try:
        import tomllib  # Python 3.11 and later
    except ImportError:
        return _small_toml(text)
    return tomllib.loads(text)


_KEY = r'[A-Za-z0-9_-]+|"[^"]*"'
_STRING = r'"(?:[^"\\]|\\.)*"'


def _small_toml(text: str) -> Dict[str, Any]:
    """Reads the TOML that pyproject.toml is written in, for Pythons without tomllib: tables,
    and keys whose values are strings, arrays of strings (over several lines too) and inline
    tables of strings. Anything else is an error."""
    out: Dict[str, Any] = {}
    table = out
    pending = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = pending + _uncomment(raw).strip()
        if not line:
            continue
        if line.startswith("[") and not pending:
            m = re.fullmatch(r"\[\s*((?:%s)(?:\s*\.\s*(?:%s))*)\s*\]" % (_KEY, _KEY), line)
            if not m:
                raise ValueError("pyproject.toml:%d: cannot read %r" % (n, raw))
            table = out
            for part in re.findall(_KEY, m.group(1)):
                table = table.setdefault(part.strip('"'), {})
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise ValueError("pyproject.toml:%d: cannot read %r" % (n, raw))
        if value.strip().startswith("[") and value.count("[") > value.count("]"):
            pending = line + " "  # an array over several lines
            continue
        pending = ""
        table[key.strip().strip('"')] = _small_value(value.strip(), n)
    return out


def _uncomment(line: str) -> str:
    """line without its comment (a # outside a string)."""
    for m in re.finditer(r'%s|#' % _STRING, line):
        if m.group() == "#":
            return line[:m.start()]
    return line


def _small_value(value: str, n: int) -> Any:
    import json
    if re.fullmatch(_STRING, value):
        return json.loads(value)
    if value.startswith("[") and value.endswith("]"):
        items = [i.strip() for i in re.findall(r'%s|[^,\s][^,]*' % _STRING, value[1:-1])]
        return [_small_value(i, n) for i in items if i]
    if value.startswith("{") and value.endswith("}"):
        pairs = re.findall(r'(%s)\s*=\s*(%s)' % (_KEY, _STRING), value)
        return {k.strip('"'): json.loads(v) for k, v in pairs}
    raise ValueError("pyproject.toml:%d: cannot read the value %r" % (n, value))


if __name__ == "__main__":  # python3 vllmstat_backend.py OUTDIR: builds the wheel (GOOS, GOARCH as above)
    print(build_wheel(sys.argv[1] if len(sys.argv) > 1 else "."))
