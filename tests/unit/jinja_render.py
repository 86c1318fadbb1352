# A second peer of tests/unit/chat_template_test.cpp: renders chat templates with Python's Jinja2
# in the environment transformers' apply_chat_template uses (ImmutableSandboxedEnvironment with
# trim_blocks, lstrip_blocks and loopcontrols; tojson without HTML escaping; raise_exception and
# strftime_now), and prints {"ok": true, "text": ...} or {"ok": false, "error": ...} per case.
# Usage: python3 jinja_render.py INPUT.json   (the input of jinja_render.cjs)
import json
import sys
from datetime import datetime

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise ValueError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

out = []
for case in json.load(open(sys.argv[1], encoding="utf-8"))["cases"]:
    try:
        out.append({"ok": True, "text": env.from_string(case["template"]).render(**case["context"])})
    except Exception as e:  # noqa: BLE001 - every failure is reported to the test
        out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
sys.stdout.write(json.dumps(out))
