"""Runs the vllmstat binary with this command line: ``python -m vllmstat ARGS`` and the
``vllmstat`` command that installing the package makes are ``vllmstat ARGS``.

The binary is ``VLLMSTAT_BIN`` when set, else the one bundled in the package. On POSIX the
Python process becomes the binary (exec), so signals, the terminal and the exit code are the
binary's own.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .sidecar import _bundled_binary


def main(argv: list[str] | None = None) -> int:
    """Runs the binary with ``argv`` (default: this process's arguments); returns its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    binary = os.environ.get("VLLMSTAT_BIN") or _bundled_binary()
    if not binary:
        sys.stderr.write(
            "vllmstat: this installation of the vllmstat package has no bundled binary, and "
            "VLLMSTAT_BIN is not set. Install the package from a clone of vllmstat "
            "(pip install ./clients/python builds the binary with Go), or set VLLMSTAT_BIN to "
            "a vllmstat binary.\n")
        return 2
    if os.name == "posix" and argv is None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execv(binary, [binary] + args)
        except OSError as e:
            sys.stderr.write("vllmstat: cannot run %s: %s\n" % (binary, e))
            return 2
    try:
        return subprocess.call([binary] + args)
    except OSError as e:
        sys.stderr.write("vllmstat: cannot run %s: %s\n" % (binary, e))
        return 2


if __name__ == "__main__":
    sys.exit(main())
