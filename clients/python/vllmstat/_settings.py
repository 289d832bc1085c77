"""start()'s settings as `vllmstat run` takes them, and the run's refusal of one told as start()'s.

start() writes its settings into a config file of its own (JSON, which vllmstat reads as YAML),
or, beside a config file the trainer names, passes them as the flags that set them; the targets
then go into a targets file, never the command line, which every user of the machine can read
(a target's URL may hold a password). vllmstat checks every setting itself: a problem it finds
in the file written here names that file and a line the trainer never saw, so it is told as the
setting the trainer gave (``start() got an unknown setting step_evry; did you mean step_every?``),
with vllmstat's own words and suggestion. No list of vllmstat's keys is kept here.
"""

from __future__ import annotations

import difflib
import json
import numbers
import operator
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._common import MAX_NUMBER, _redact, _whole

# Settings that a flag of `vllmstat run` sets: with a config file, these are all start() can add.
RUN_FLAGS = {
    "targets": "--targets-file",
    "out_dir": "--out",
    "listen": "--listen",
    "step_every": "--step-every",
    "scrape_timeout": "--scrape-timeout",
    "vllm_metrics_logger_interval": "--interval",
    "metric_prefix": "--metric-prefix",
    "per_worker": "--per-worker",
    "vllm_metrics_log_scalars": "--log-scalars",
    "record": "--record",
    "worker_labels": "--worker-labels",
    "sinks": "--sinks",
    "resume_from": "--resume-from",
    "gpu": "--gpu",
}
# Short names start() takes for config keys.
ALIASES = {"interval": "vllm_metrics_logger_interval"}

# How vllmstat reports a configuration it refuses: one problem after "vllmstat run: invalid
# configuration: ", or several, indented, after that line alone.
_PROBLEMS = "vllmstat run: invalid configuration:"
# A problem of a key: "KEY[...] (line N): WHAT" or "KEY[...]: WHAT (line N)", after the path of
# the file when vllmstat names it.
_KEY_PROBLEM = re.compile(r"^([A-Za-z0-9_]+)(\S*?)(?: \(line [0-9]+\))?: (.*?)(?: \(line [0-9]+\))?$")
# A problem of a flag passed here: "--FLAG: WHAT", or "--targets-file PATH:LINE: WHAT".
_FLAG_PROBLEM = re.compile(r"^(--[a-z-]+)(?: \S+?(?::([0-9]+))?)?: (.*)$")
_SUGGESTION = re.compile(r"did you mean (\S+?)\?")


class Plan:
    """The flags of `vllmstat run` for start()'s settings, and what it needs to tell their problems."""

    def __init__(self) -> None:
        self.args: List[str] = []
        self.out_dir: Optional[str] = None
        self.token: Optional[str] = None  # api_token, as start() was given it (not from the environment)
        self.file: Optional[str] = None  # the config file written here
        self.written: List[str] = []  # every file written here (the config, the targets)
        self.origins: Dict[str, str] = {}  # config key -> how the trainer named it


def plan(config: Any, settings: Mapping[str, Any], private: str) -> Plan:
    """Reads start()'s config and settings into a Plan whose files are in the directory private.

    Raises TypeError or ValueError, naming the setting, for what cannot be passed.
    """
    p = Plan()
    named = {}  # config key -> start()'s name of it
    for name in settings:
        named[ALIASES.get(name, name)] = name
    given = {ALIASES.get(k, k): v for k, v in settings.items()}
    p.token = given.pop("api_token", None)
    for key, name in named.items():
        p.origins[key] = "setting %s" % name if name == key else "setting %s (%s)" % (name, key)
    if config is None or isinstance(config, Mapping):
        merged = {ALIASES.get(k, k): v for k, v in (config or {}).items()}
        for key in merged:
            p.origins.setdefault(key, "config key %s" % key)
        file_token = merged.pop("api_token", None)
        p.token = p.token if p.token is not None else file_token
        merged.update(given)
        _check(merged, p.origins)
        p.out_dir = merged.get("out_dir")
        if merged:
            p.file = os.path.join(private, "vllmstat.json")
            body = _absolute_paths("", {k: _config_file_value(k, v) for k, v in merged.items()})
            with _private_file(p.file) as f:
                json.dump(body, f, indent=1, default=_json_value)
            p.written.append(p.file)
            p.args += ["--config", p.file]
        return p
    unknown = [k for k in given if k not in RUN_FLAGS]
    for key in unknown:
        near = difflib.get_close_matches(named[key], list(RUN_FLAGS) + list(ALIASES), n=1, cutoff=0.8)
        if near:
            raise TypeError("start() got an unknown setting %s; did you mean %s?" % (named[key], near[0]))
    if unknown:
        raise TypeError("start(): beside a config file only the settings that flags of vllmstat run set can be "
                        "given (%s); put %s in the file, or pass config as a dict"
                        % (", ".join(sorted(RUN_FLAGS)), ", ".join(sorted(named[k] for k in unknown))))
    _check(given, p.origins)
    p.args += ["--config", os.fspath(config)]
    for key, value in given.items():
        if key == "targets":
            path = os.path.join(private, "targets")
            with _private_file(path) as f:
                f.write("".join(t + "\n" for t in _targets(value)))
            p.written.append(path)
            p.args += ["--targets-file", path]
        else:
            p.args += _flag_args(key, value)
    p.out_dir = given.get("out_dir")
    return p


def _check(settings: Dict[str, Any], origins: Mapping[str, str]) -> None:
    """The checks vllmstat cannot make as start()'s: step numbers are read here, decimal only."""
    if "listen" in settings and not settings["listen"]:
        raise ValueError("start(): the sidecar needs its API: listen must be an address, such as 127.0.0.1:0")
    if settings.get("resume_from") is not None:
        # "010" is step 10: a string must not reach a reader that takes it as octal
        settings["resume_from"] = _whole(settings["resume_from"], "start(): resume_from", top=MAX_NUMBER - 1,
                                         top_text="2**53-1", strings=True)


def _targets(value: Any) -> List[str]:
    """The targets as the lines of a targets file: one URL each, so none may hold a line break."""
    out = []
    for i, t in enumerate([value] if isinstance(value, str) else list(value)):
        t = os.fspath(t) if isinstance(t, os.PathLike) else t
        if not isinstance(t, str):
            raise TypeError("start(): targets[%d] must be a URL string, got a %s" % (i, type(t).__name__))
        if "\n" in t or "\r" in t:
            raise ValueError(_redact("start(): targets[%d] holds a line break: %r" % (i, t)))
        out.append(t)
    return out


def _private_file(path: str) -> Any:
    """A new file only its owner may read (0600): it may hold credentials."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8")


def _json_value(value: Any) -> Any:
    """A value json cannot write by itself: another library's number (numpy's), or a path."""
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError("start(): a setting's value %r (a %s) is not one vllmstat's config takes"
                    % (value, type(value).__name__))


def _config_file_value(key: str, value: Any) -> Any:
    """A start() setting as vllmstat's config file wants it."""
    if key in ("targets", "sinks", "worker_labels", "file_sd") and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()] if key != "targets" else [value]
    if isinstance(value, (list, tuple)):
        return [_config_file_value("", v) for v in value]
    if isinstance(value, Mapping):
        return {k: _config_file_value(k, v) for k, v in value.items()}
    return value


def _absolute_paths(key: str, value: Any) -> Any:
    """Makes the file paths in a config relative to the working directory, as the trainer meant
    them, instead of to the config file, which start() writes elsewhere."""
    if isinstance(value, Mapping):
        return {k: _absolute_paths(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_absolute_paths(key, v) for v in value]
    if isinstance(value, str) and value and (key == "file_sd" or key.endswith("_file")):
        return os.path.abspath(value)
    return value


def _flag_args(key: str, value: Any) -> List[str]:
    """The `vllmstat run` flags that set a start() setting, beside a config file."""
    flag = RUN_FLAGS[key]
    if isinstance(value, bool):
        return [flag + "=" + ("true" if value else "false")]
    if key in ("worker_labels", "sinks") and not isinstance(value, str):
        if key == "sinks" and not all(isinstance(v, str) for v in value):
            raise TypeError("start(): with a config file, sinks= takes sink names (tensorboard, wandb, csv); "
                            "put sinks with settings in the file")
        value = ",".join(value)
    return [flag, value if isinstance(value, str) else str(_json_value(value))]


def explain(p: Plan, lines: List[str]) -> Tuple[List[str], List[str]]:
    """vllmstat's problems with what start() passed it, told as start()'s settings; and the
    other lines. Neither names the file written here, nor its lines."""
    flags = {flag: key for key, flag in RUN_FLAGS.items()}
    told: List[str] = []
    others: List[str] = []
    listing = False
    for line in lines:
        problem = None
        if line.startswith(_PROBLEMS + " "):
            problem = line[len(_PROBLEMS) + 1:]
        elif line == _PROBLEMS:
            listing = True
            continue
        elif listing and line.startswith("  "):
            problem = line.strip()
        else:
            listing = False
        said = _said(p, flags, problem) if problem is not None else None
        if said is not None:
            told.append(said)
        else:
            others.append(line)
    return told, others


def _said(p: Plan, flags: Mapping[str, str], problem: str) -> Optional[str]:
    """One problem as start()'s, or None when it is not about a setting start() passed."""
    f = _FLAG_PROBLEM.match(problem)
    if f:
        key = flags.get(f.group(1))
        if key is None or key not in p.origins:
            return None
        at = "[%d]" % (int(f.group(2)) - 1) if f.group(2) else ""  # a line of the targets file: one target each
        return "start() %s%s: %s" % (p.origins[key], at, f.group(3))
    if p.file is None:
        return None  # the trainer's own config file: its paths and lines are the trainer's
    if problem.startswith(p.file + ": "):
        problem = problem[len(p.file) + 2:]
    m = _KEY_PROBLEM.match(problem)
    if not m or m.group(1) not in p.origins:
        return None
    return _told(p.origins, m.group(1), m.group(2), m.group(3))


def _told(origins: Mapping[str, str], key: str, inner: str, what: str) -> str:
    """One problem of key (inner: the path below it, as "[0].type"), as start()'s."""
    who = origins.get(key, "config key %s" % key)
    if not inner and what.startswith("unknown key"):
        hint = what[len("unknown key"):]
        m = _SUGGESTION.search(hint)
        return "start() got an unknown %s%s" % (who, "; did you mean %s?" % m.group(1) if m else hint)
    return "start() %s%s: %s" % (who, " (at %s%s)" % (key, inner) if inner else "", what)
