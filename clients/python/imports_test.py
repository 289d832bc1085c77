"""Tests of how the vllmstat package's modules import each other and what importing it loads.

The modules depend one way (none imports, at any depth or inside a function, a module that
imports it back), so that each imports first, on its own, in a fresh interpreter; and ``import
vllmstat`` loads only the standard library and the package's own modules, leaving what the
package imports inside functions (prometheus_client, Ray, ctypes, ...) to the calls that need it.

Run: python3 -m unittest discover -s clients/python -p '*_test.py'
"""

import ast
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "vllmstat")

# Imported inside functions for their cost or because they are optional: importing the package
# must not load them (ctypes: the sidecar's parent-death signal; gzip: compressed pages;
# multiprocessing: forked children's exit; prometheus_client and Ray: expose() and ray_targets()).
OPTIONAL = ("ctypes", "gzip", "multiprocessing", "prometheus_client", "ray")
# Imported inside a function that the module calls when it is imported (_http.py makes its
# server classes then), so importing the package loads it.
CALLED_AT_IMPORT = ("socketserver",)


def modules():
    """Returns {dotted name: path} of the package's modules and of vllmstat_client.py."""
    out = {"vllmstat_client": os.path.join(HERE, "vllmstat_client.py")}
    for name in sorted(os.listdir(PKG)):
        if name.endswith(".py"):
            stem = name[:-3]
            out["vllmstat" if stem == "__init__" else "vllmstat." + stem] = os.path.join(PKG, name)
    return out


def imports(name, path):
    """Returns the imports of a module, at module level and inside functions and classes:
    [(imported module, at module level)], each import of the package resolved to the module it
    names (``from . import page`` is vllmstat.page, ``from .client import Client`` vllmstat.client)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    known = modules()
    is_pkg = os.path.basename(path) == "__init__.py"
    out = []

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = name.split(".") if is_pkg else name.split(".")[:-1]
                    parts = parts[:len(parts) - (child.level - 1)]
                    base = ".".join(parts + ([child.module] if child.module else []))
                else:
                    base = child.module
                for a in child.names:
                    sub = base + "." + a.name
                    out.append((sub if sub in known else base, top))
            visit(child, inner)

    visit(tree, True)
    return out


def graph():
    """Returns {module: sorted modules of the package it imports} over modules()."""
    known = modules()
    return {name: sorted({m for m, _ in imports(name, path) if m in known and m != name})
            for name, path in known.items()}


def cycle(edges):
    """Returns one import circle of edges as a list of modules (first and last the same), or []."""
    state, stack = {}, []

    def walk(node):
        state[node] = "open"
        stack.append(node)
        for nxt in edges.get(node, ()):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return []

    for node in sorted(edges):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return []


def run(code):
    return subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, timeout=60)


class OneWay(unittest.TestCase):

    def test_the_graph_reader_finds_a_circle_and_imports_inside_functions(self):
        # The reader itself: a circle through an import inside a function is found, and
        # relative imports resolve to the modules they name.
        self.assertEqual(cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}), ["a", "b", "c", "a"])
        self.assertEqual(cycle({"a": ["b", "c"], "b": ["c"], "c": []}), [])
        got = imports("vllmstat.sidecar", os.path.join(PKG, "sidecar.py"))
        self.assertIn(("vllmstat._settings", True), got)  # from . import _settings
        self.assertIn(("ctypes", False), got)  # inside a function

    def test_no_module_imports_a_module_that_imports_it(self):
        edges = graph()
        self.assertIn("vllmstat.client", edges["vllmstat"])
        self.assertEqual(cycle(edges), [], "an import circle: " + " -> ".join(cycle(edges)))

    def test_each_module_imports_first_in_a_fresh_interpreter(self):
        for name in modules():
            if name == "vllmstat":
                continue
            with self.subTest(name):
                p = run("import %s" % name)
                self.assertEqual(p.returncode, 0, p.stderr)
            if not name.startswith("vllmstat."):
                continue
            with self.subTest(name, without="vllmstat/__init__.py"):
                # vllmstat/__init__.py imports vllmstat.client, and so every other module, before
                # the one named: a package object that does not shows each module importing first.
                p = run("import importlib, sys, types\n"
                        "pkg = types.ModuleType('vllmstat')\n"
                        "pkg.__path__ = [%r]\n"
                        "sys.modules['vllmstat'] = pkg\n"
                        "importlib.import_module(%r)\n" % (PKG, name))
                self.assertEqual(p.returncode, 0, p.stderr)

    def test_importing_the_package_loads_only_the_standard_library(self):
        p = run("import sys\n"
                "before = set(sys.modules)\n"
                "import vllmstat, vllmstat_client\n"
                "print('\\n'.join(sorted(set(sys.modules) - before)))\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        loaded = set(p.stdout.split())
        self.assertIn("vllmstat.client", loaded)
        outside = sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names
                         and m.split(".")[0] not in ("vllmstat", "vllmstat_client"))
        self.assertEqual(outside, [])

        # What the package imports inside functions stays unloaded, unless the standard
        # library's modules it imports at module level load it themselves.
        top, deferred = set(), set(OPTIONAL)
        for name, path in modules().items():
            for mod, at_top in imports(name, path):
                if mod.split(".")[0] not in ("vllmstat", "vllmstat_client"):
                    (top if at_top else deferred).add(mod)
        p = run("import sys\n"
                "before = set(sys.modules)\n"
                "import %s\n"
                "print('\\n'.join(sorted(set(sys.modules) - before)))\n" % ", ".join(sorted(top)))
        self.assertEqual(p.returncode, 0, p.stderr)
        baseline = set(p.stdout.split())
        self.assertEqual(sorted(m for m in deferred if m in loaded and m not in baseline
                                and m not in CALLED_AT_IMPORT), [])
        self.assertTrue(set(CALLED_AT_IMPORT) <= loaded)
        # and it loads nothing the same standard-library imports would not, but its own modules
        self.assertEqual(sorted(m for m in loaded - baseline
                                if m.split(".")[0] not in ("vllmstat", "vllmstat_client")
                                and m not in CALLED_AT_IMPORT), [])


if __name__ == "__main__":
    unittest.main()
