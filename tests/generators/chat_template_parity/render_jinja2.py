#!/usr/bin/env python3
"""Render chat templates with Python jinja2 set up the way transformers' apply_chat_template sets it up.

transformers compiles chat templates with an ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the loopcontrols extension and a {% generation %} tag, replaces the
`tojson` filter by json.dumps(ensure_ascii=False, indent, separators, sort_keys) and adds the
`raise_exception` and `strftime_now` globals. This script reproduces that configuration (written
here from that description, not copied) so generate.mjs can record what transformers would output.

stdin:  JSON list of {"template": str, "context": object, "now": ISO local time for strftime_now (optional)}
stdout: JSON {"jinja2_version": str, "python_version": str, "results": [{"output": str} | {"error": str}]}
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: renders its body unchanged (transformers uses it to
    track assistant tokens; the rendered text is not affected)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now_at(now):
    """transformers' strftime_now (datetime.now().strftime), on a fixed clock when `now` is given."""
    return lambda fmt: (datetime.fromisoformat(now) if now else datetime.now()).strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now_at(None)
    return env


def main():
    jobs = json.load(sys.stdin)
    env = make_env()
    results = []
    for job in jobs:
        env.globals["strftime_now"] = strftime_now_at(job.get("now"))
        try:
            results.append({"output": env.from_string(job["template"]).render(**job["context"])})
        except RecursionError:
            results.append({"error": "RecursionError: maximum recursion depth exceeded"})
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"jinja2_version": jinja2.__version__, "python_version": sys.version.split()[0], "results": results},
              sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
