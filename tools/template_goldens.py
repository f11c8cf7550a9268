#!/usr/bin/env python3
"""Chat-template goldens from the oracle: transformers' own Jinja renderer.

For every template folder under tests/data/templates (and models/default if it has a template),
renders a fixed set of conversations exactly as apply_chat_template(tokenize=False) would, and
writes one JSON file per template to --out. A render that raises records the exception instead.
The C++ chat-template tests compare their output with these files byte for byte.

Run on a machine with transformers installed:
    python3 tools/template_goldens.py --out OUT_DIR
--local-jinja renders with plain jinja2 configured like transformers (for development only;
committed goldens come from transformers).

Time: strftime_now() is frozen at FIXED_TIME (UTC) so that templates that print today's date
(SmolLM3, Llama 3.2) are reproducible; the C++ side reads the same instant from
SOURCE_DATE_EPOCH.
"""
import argparse
import datetime as _dt
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(REPO, "tests", "data", "templates")
FIXED_TIME = _dt.datetime(2026, 1, 15, 12, 0, 0)
SOURCE_DATE_EPOCH = 1768478400  # FIXED_TIME as seconds since the epoch, UTC

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "max_results": {"type": "integer", "description": "How many results", "default": 5},
                "filters": {"type": "array", "items": {"type": "string"}, "description": "Site filters"},
                "threshold": {"type": "number", "description": "Score cut-off", "default": 0.5},
                "safe": {"type": "boolean", "description": "Safe search"},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "The capital of France is Paris."}
USER2 = {"role": "user", "content": "And of Germany?"}
TOOL_CALL_TURN = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
        }
    ],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}
WEATHER_Q = {"role": "user", "content": "What's the weather in Paris?"}

KW = {}  # extra kwargs shared by every case


def case(name, messages, gen=True, tools=None, **kwargs):
    return {"name": name, "messages": messages, "add_generation_prompt": gen, "tools": tools,
            "kwargs": {**KW, **kwargs}}


CASES = [
    case("system_user", [SYSTEM, USER]),
    case("user_only", [USER]),
    case("multi_turn", [SYSTEM, USER, ASSISTANT, USER2]),
    case("no_generation_prompt", [SYSTEM, USER, ASSISTANT], gen=False),
    case("multi_turn_no_system", [USER, ASSISTANT, USER2]),
    case("tools_defined", [SYSTEM, WEATHER_Q], tools=TOOLS),
    case("tools_no_system", [WEATHER_Q], tools=TOOLS),
    case("tool_call_round_trip", [SYSTEM, WEATHER_Q, TOOL_CALL_TURN, TOOL_RESULT], tools=TOOLS),
    case("tool_call_two_calls", [WEATHER_Q, {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "call_b", "type": "function", "function": {"name": "search", "arguments": {"query": "Paris events", "max_results": 3}}},
        ]}, {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "name": "search", "content": "[\"concert\"]"}], tools=TOOLS),
    case("thinking_on", [USER], enable_thinking=True),
    case("thinking_off", [USER], enable_thinking=False),
    case("thinking_off_multi_turn", [SYSTEM, USER, ASSISTANT, USER2], enable_thinking=False),
    case("reasoning_in_history", [USER, {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis.",
                                          }, USER2]),
    case("reasoning_content_field", [USER, {"role": "assistant", "content": "Paris.", "reasoning_content": "France's capital is Paris."}, USER2]),
    case("developer_role", [{"role": "developer", "content": "Answer tersely."}, USER]),
    case("unicode_and_quotes", [SYSTEM, {"role": "user", "content": "Ünïcödé “quotes” 'single' \"double\" \\ back\\slash\ttab\nnewline 日本語 🙂"}]),
    case("whitespace_content", [{"role": "user", "content": "  padded  \n\n"}, {"role": "assistant", "content": "\n  answer  "}, USER2]),
    case("empty_messages", []),
    case("assistant_last_no_prompt", [USER, ASSISTANT], gen=False),
    case("system_only", [SYSTEM]),
    case("tool_call_string_arguments", [WEATHER_Q, {
        "role": "assistant", "content": "", "tool_calls": [
            {"id": "call_s", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_s", "name": "get_weather", "content": "sunny"}], tools=TOOLS),
    case("tools_thinking_off", [SYSTEM, WEATHER_Q], tools=TOOLS, enable_thinking=False),
    case("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe this."},
                                                         {"type": "text", "text": "Briefly."}]}]),
]


def load_templates():
    """(id, dir) for each template folder, plus the bundled default model."""
    out = []
    for name in sorted(os.listdir(TEMPLATES)):
        d = os.path.join(TEMPLATES, name)
        if os.path.isdir(d) and name != "goldens":
            out.append((name, d))
    default = os.path.join(REPO, "models", "default")
    if os.path.exists(os.path.join(default, "tokenizer_config.json")) or os.path.exists(os.path.join(default, "chat_template.jinja")):
        out.append(("default-model", default))
    return out


def token_text(cfg, key):
    t = cfg.get(key)
    if isinstance(t, dict):
        t = t.get("content")
    return t if isinstance(t, str) and t else None


def read_template(d):
    """The template and special tokens the way kvlm's ChatTemplate::from_model_dir reads them."""
    cfg_path = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    bos, eos = token_text(cfg, "bos_token"), token_text(cfg, "eos_token")
    stm = os.path.join(d, "special_tokens_map.json")
    if (bos is None or eos is None) and os.path.exists(stm):
        m = json.load(open(stm, encoding="utf-8"))
        bos = bos or token_text(m, "bos_token")
        eos = eos or token_text(m, "eos_token")
    tmpl = cfg.get("chat_template")
    if isinstance(tmpl, list):
        tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), None)
    if tmpl is None and os.path.exists(os.path.join(d, "chat_template.jinja")):
        tmpl = open(os.path.join(d, "chat_template.jinja"), encoding="utf-8", newline="").read()
    return tmpl, bos, eos


class FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_TIME


def transformers_renderer():
    import transformers
    from transformers.utils import chat_template_utils as ctu
    ctu.datetime = FrozenDatetime  # strftime_now reads the module-level datetime

    def render(template, case, special):
        rendered, _ = ctu.render_jinja_template(
            conversations=[case["messages"]], tools=case["tools"], chat_template=template,
            add_generation_prompt=case["add_generation_prompt"], **special, **case["kwargs"])
        return rendered[0]
    return render, "transformers " + transformers.__version__


def local_renderer():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_r"), [], [], body).set_lineno(lineno)

        def _r(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: FIXED_TIME.strftime(f)

    def render(template, case, special):
        return env.from_string(template).render(messages=case["messages"], tools=case["tools"], documents=None,
                                                add_generation_prompt=case["add_generation_prompt"],
                                                **special, **case["kwargs"])
    return render, "jinja2 " + jinja2.__version__ + " (local, transformers settings)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--local-jinja", action="store_true")
    args = ap.parse_args()
    render, oracle = local_renderer() if args.local_jinja else transformers_renderer()
    os.makedirs(args.out, exist_ok=True)
    for tid, d in load_templates():
        template, bos, eos = read_template(d)
        if template is None:
            continue
        special = {k: v for k, v in (("bos_token", bos), ("eos_token", eos)) if v is not None}
        results = []
        for c in CASES:
            r = dict(c)
            try:
                r["output"] = render(template, c, special)
            except Exception as e:  # the oracle's verdict is the golden, whatever it is
                r["error_type"] = type(e).__name__
                r["error"] = str(e)
            results.append(r)
        doc = {"template": tid, "oracle": oracle, "source_date_epoch": SOURCE_DATE_EPOCH,
               "bos_token": bos, "eos_token": eos, "cases": results}
        with open(os.path.join(args.out, tid + ".json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        ok = sum("output" in r for r in results)
        print(f"{tid}: {ok}/{len(results)} rendered, {len(results) - ok} raised")


if __name__ == "__main__":
    sys.exit(main())
