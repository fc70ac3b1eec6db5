#!/usr/bin/env python3
"""Plain-text training corpus from documentation that Debian installs here.

Sources: the Python 3.11 documentation (package python3.11-doc, HTML) and the
plain-text READMEs under /usr/share/doc. HTML is reduced to its paragraph
text; code blocks are kept (they are part of documentation prose). Output:
one document per paragraph block, blank-line separated, in a stable order.

Usage: python3 tools/extract_corpus.py OUT.txt
"""
import gzip
import html.parser
import os
import sys

SKIP_TAGS = {"script", "style", "nav", "head", "footer"}
BLOCK_TAGS = {"p", "pre", "li", "h1", "h2", "h3", "h4", "dt", "dd", "blockquote", "tr", "div"}


class Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.skip = 0
        self.blocks, self.cur = [], []

    def handle_starttag(self, tag, attrs):
        if tag in SKIP_TAGS:
            self.skip += 1
        if tag in BLOCK_TAGS:
            self.flush()

    def handle_endtag(self, tag):
        if tag in SKIP_TAGS and self.skip:
            self.skip -= 1
        if tag in BLOCK_TAGS:
            self.flush()

    def handle_data(self, data):
        if not self.skip:
            self.cur.append(data)

    def flush(self):
        t = " ".join("".join(self.cur).split())
        if len(t) > 40:
            self.blocks.append(t)
        self.cur = []


def html_docs(root):
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if f.endswith(".html") and "genindex" not in f and "search" not in f:
                p = Text()
                with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                    p.feed(fh.read())
                p.flush()
                yield "\n".join(p.blocks)


def readmes(root):
    for d in sorted(os.listdir(root)):
        for name in ("README", "README.md", "README.txt", "README.gz", "README.md.gz", "NEWS.gz"):
            path = os.path.join(root, d, name)
            if not os.path.isfile(path):
                continue
            opener = gzip.open if path.endswith(".gz") else open
            try:
                with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                    yield fh.read()[:200000]
            except OSError:
                pass


def main():
    out = sys.argv[1]
    n = 0
    with open(out, "w", encoding="utf-8") as fh:
        for doc in list(html_docs("/usr/share/doc/python3.11/html")) + list(readmes("/usr/share/doc")):
            if doc.strip():
                fh.write(doc.strip() + "\n\n")
                n += 1
    print(f"{n} documents, {os.path.getsize(out) / 1e6:.1f} MB -> {out}")


if __name__ == "__main__":
    main()
