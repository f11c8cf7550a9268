#!/usr/bin/env python3
"""Tokenizer goldens from Hugging Face `tokenizers` (the oracle kvlm's tokenizer must match).

For every tokenizer.json under tests/data/tokenizers (and models/default/tokenizer.json when it
exists) this encodes a fixed corpus with and without special tokens and decodes the result with
skip_special_tokens off and on, writing one JSON file per tokenizer into --out:

  {"tokenizer": "<path relative to the repo>", "tokenizers_version": "...",
   "cases": [{"text": ..., "ids": [...], "ids_with_special": [...],
              "decoded": ..., "decoded_skip_special": ...}, ...]}

`decoded*` decode `ids_with_special`. It also writes components.json: single normalizers,
pre-tokenizers and decoders (as tokenizer.json configures them) applied to short texts, so that
each component is checked on its own, including configurations no bundled tokenizer uses
(Llama-3 and Qwen2 Split regexes, every split behaviour, prepend schemes, ...):

  {"normalizers":    [{"config": {...}, "cases": [{"text": ..., "normalized": ...}]}],
   "pre_tokenizers": [{"config": {...}, "cases": [{"text": ..., "pieces": [...]}]}],
   "decoders":       [{"config": {...}, "cases": [{"tokens": [...], "decoded": ...}]}]}

Runs offline; needs only the `tokenizers` package.
Usage: python3 tools/tokenizer_goldens.py --out DIR
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer
import tokenizers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORPUS = [
    # English prose and punctuation
    "Hello world",
    " Hello world",
    "Hello, world! How are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "It's a dog's life; they'll say I'm fine, we've gone, you're late, he'd know.",
    "IT'S LOUD: WE'LL SEE, THEY'RE HERE.",
    "Dr. Smith paid $1,234.56 for 3 items on 2024-01-15 at 10:30am (approx. 15% off).",
    "e-mail: someone@example.com, url: https://example.org/path?q=1&r=2#frag",
    "\"Quoted\" and 'single' and `backtick` and «guillemets» and „German“ quotes.",
    "A sentence... with an ellipsis\u2026 and em\u2014dashes \u2013 and en-dashes.",
    # numbers
    "0 1 12 123 1234 12345 123456 1234567 3.14159 -42 +7 1e-9 0x1F",
    "Call 555-0100 or +1 (555) 010-0199.",
    # code
    "def f(x):\n    return x * 2  # double\n",
    "int main() {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < n; ++i) { arr[i] += i ** 2; }",
    "<div class=\"a\"><span>text</span></div>",
    "SELECT * FROM users WHERE name = 'O''Brien';",
    "{\"key\": [1, 2, {\"nested\": null}], \"b\": true}",
    "    indented four\n        indented eight\n",
    # emoji, symbols
    "I love 🦙 and 🐍! 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "Math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ ≈ π ≠ ∞ ½ ¾ ①②③",
    "Currency: € £ ¥ ₹ ₿ ¢",
    # CJK and other scripts
    "你好，世界！今天天气很好。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장입니다.",
    "Привет, мир! Как дела?",
    "Ελληνικά γράμματα: αβγδ ΣΊΣΥΦΟΣ",
    "हिन्दी में एक वाक्य है।",
    "ภาษาไทยไม่มีช่องว่าง",
    "Tiếng Việt có dấu: Đường phố Hà Nội",
    # combining marks, normalization-sensitive text
    "cafe\u0301 vs caf\u00e9; n\u0303 vs \u00f1; A\u030a vs \u00c5 vs \u212b",
    "ﬁ ﬂ ﬀ ﬃ ＡＢＣ１２３ ｶﾀｶﾅ ㍻ ㈱ ™ Ⅻ",
    "e\u0301\u0302\u0303\u0304 stacked marks",
    "\u0301 leading combining mark",
    "İstanbul ß ẞ ǅ Σίσυφος ΌΣΟΣ",
    # RTL
    "مرحبا بالعالم! هذه جملة عربية.",
    "שלום עולם, זה משפט בעברית.",
    "Mixed English and عربي and עברית in one line.",
    # whitespace
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\t\n",
    "a  b   c    d",
    "trailing spaces   ",
    "   leading spaces",
    "line one\nline two\r\nline three\rline four",
    " " * 40 + "x" + " " * 17,
    "\n" * 12 + "end",
    "tabs\t\tand\t\t\tmore\ttabs",
    "\u00a0non-breaking\u00a0spaces\u2009thin\u3000ideographic\u2028sep",
    # invalid-looking and unusual code points
    "\ufffd replacement char \ufffd\ufffd",
    "nul\x00byte and bell\x07 and esc\x1b[0m",
    "zero\u200bwidth\u200cjoiner\u200dchars\ufeffbom",
    "private use \ue000\uf8ff and nonchars \ufdd0\uffff",
    "supplementary 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚 𠀀𠀁",
    "<0x41> <unk> [UNK] <s> </s> <pad> looks special but is text",
    "▁already▁has▁metaspace ▁",
    "Ġ Ċ ĉ byte-level lookalikes",
    # added-token flags (lstrip, rstrip, single_word, normalized) of the synthetic tokenizers
    "a word b, awordb, word! (word) _word_ wordy éword",
    "I read a book Yesterday and YESTERDAY yesterday",
    "mask  [MASK]  here\t[MASK]end [MASK]",
    "<tool  x <tool> y <tool>z <toolbox",
    "hello Hello hellohello ▁hello <|user|>  hi <|user|>",
    # mixed long document
    ("The history of natural language processing generally started in the 1950s. "
     "In 1950, Alan Turing published an article titled \"Computing Machinery and "
     "Intelligence\" which proposed what is now called the Turing test. 数据 🚀 "
     "Ünïcödé!\n\n") * 6,
]


def added_token_cases(tok):
    """Every added token adjacent to text, between spaces, and doubled."""
    cases = []
    for t in sorted(tok.get_added_tokens_decoder().values(), key=lambda t: t.content):
        c = t.content
        cases += [f"x{c}y", f" {c} ", f"{c}{c}", f"Hello{c}\nworld {c}"]
    return cases


def tokenizer_paths():
    root = os.path.join(REPO, "tests", "data", "tokenizers")
    paths = []
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name, "tokenizer.json")
        if os.path.isfile(p):
            paths.append((name, p))
    default = os.path.join(REPO, "models", "default", "tokenizer.json")
    if os.path.isfile(default):
        paths.append(("default", default))
    return paths


def goldens_for(path):
    tok = Tokenizer.from_file(path)
    cases = []
    for text in CORPUS + added_token_cases(tok):
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_with_special": ids_special,
            "decoded": tok.decode(ids_special, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids_special, skip_special_tokens=True),
        })
    return {
        "tokenizer": os.path.relpath(path, REPO),
        "tokenizers_version": tokenizers.__version__,
        "cases": cases,
    }


LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

COMPONENT_TEXTS = [t for t in CORPUS if len(t) < 200] + [
    "the-final--countdown", "-leading and trailing-", "--", "a-b-c",
    "▁▁two▁markers", "ŁÓDŹ Ǆ ǲ ﬀ", "don't DON'T I'M We'Re", "   ", "x\r\n\r\ny",
    "12345678901", "٣٤٥ ۱۲۳ ४५६ ½", "hello\u00a0world\u3000!",
]

NORMALIZERS = [
    {"type": "NFC"}, {"type": "NFD"}, {"type": "NFKC"}, {"type": "NFKD"},
    {"type": "Lowercase"},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]},
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
    {"type": "Replace", "pattern": {"String": "a"}, "content": "AA"},
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Nmt"},
    {"type": "ByteLevel"},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
     "strip_accents": None, "lowercase": True},
    {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
     "strip_accents": True, "lowercase": False},
    {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                                         {"type": "Replace", "pattern": {"String": " "},
                                          "content": "▁"}]},
]

PRE_TOKENIZERS = [
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]},
    {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
         "use_regex": False}]},
    {"type": "Split", "pattern": {"Regex": r"\p{N}+"}, "behavior": "Removed", "invert": True},
    {"type": "Split", "pattern": {"Regex": r"\s*"}, "behavior": "Isolated", "invert": False},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
    {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True},
    {"type": "Digits", "individual_digits": True},
    {"type": "Digits", "individual_digits": False},
    {"type": "Punctuation", "behavior": "Isolated"},
    {"type": "Punctuation", "behavior": "MergedWithPrevious"},
    {"type": "Whitespace"},
    {"type": "WhitespaceSplit"},
    {"type": "BertPreTokenizer"},
    {"type": "CharDelimiterSplit", "delimiter": "-"},
] + [
    {"type": "Split", "pattern": {"String": "-"}, "behavior": b, "invert": inv}
    for b in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
    for inv in [False, True]
]

DECODER_TOKENS = [
    ["Hello", "Ġworld", "!"], ["Ġ", "Ġleading"], ["ðŁ", "¦", "Ļ"], ["ðŁ", "¦"],
    ["▁Hello", "▁", "▁world", "▁"], ["▁▁x", "▁y▁"], ["<0xE2>", "<0x82>", "<0xAC>", "a"],
    ["<0xE2>", "<0x82>", "b", "<0xFF>"], ["<0x41>", "<0x42>"], ["▁", "<0x0A>", "▁x"],
    ["un", "##believ", "##able", ".", "do", "not", "'", "s", "?"], ["##x", "y"],
    ["  a  ", " b "], ["<s>", "▁hi", "</s>"], [],
]

DECODERS = [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 1},
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "WordPiece", "prefix": "##", "cleanup": True},
    {"type": "WordPiece", "prefix": "##", "cleanup": False},
    {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
]


def with_component(key, config):
    """A minimal tokenizer holding one component, to run it through `tokenizers`."""
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    data[key] = config
    return Tokenizer.from_str(json.dumps(data))


def component_goldens():
    out = {"tokenizers_version": tokenizers.__version__,
           "normalizers": [], "pre_tokenizers": [], "decoders": []}

    def add(kind, key, cfg, make_cases):
        try:
            out[kind].append({"config": cfg, "cases": make_cases(getattr(with_component(key, cfg), key))})
        except Exception as e:  # recorded, so the test can tell a rejected config from a gap
            out[kind].append({"config": cfg, "error": str(e)})

    for cfg in NORMALIZERS:
        add("normalizers", "normalizer", cfg, lambda n: [
            {"text": t, "normalized": n.normalize_str(t)} for t in COMPONENT_TEXTS])
    for cfg in PRE_TOKENIZERS:
        add("pre_tokenizers", "pre_tokenizer", cfg, lambda p: [
            {"text": t, "pieces": [piece for piece, _ in p.pre_tokenize_str(t)]}
            for t in COMPONENT_TEXTS])
    for cfg in DECODERS:
        add("decoders", "decoder", cfg, lambda d: [
            {"tokens": toks, "decoded": d.decode(toks)} for toks in DECODER_TOKENS])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (one JSON file per tokenizer)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, path in tokenizer_paths():
        try:
            data = goldens_for(path)
        except Exception as e:  # report and go on: one bad file must not cost the others
            print(f"{path}: {e}", file=sys.stderr)
            continue
        out = os.path.join(args.out, f"{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=0)
        print(f"{out}: {len(data['cases'])} cases", file=sys.stderr)
    out = os.path.join(args.out, "components.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(component_goldens(), f, ensure_ascii=False, indent=0)
    print(f"{out}: components", file=sys.stderr)


if __name__ == "__main__":
    main()
