"""Training corpus: Python source files found in this machine's site-packages.

Deterministic selection, split by file:
  - every *.py file under the roots, 256 B .. 256 KiB, valid UTF-8, lines <= 300 chars,
    at most 1% non-ASCII characters, no special-token text in it;
  - files are visited in the order of sha1(relative path); a file whose content was
    already taken (vendored copies) is skipped;
  - a file is held out iff int(sha1(relative path)[:8], 16) % 100 < heldout_percent;
  - training files are taken until max_bytes, held-out files until max_heldout_bytes.
The same machine image gives the same corpus; nothing depends on file-system order.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import site
import sysconfig

SPECIAL_TEXTS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")

# Packages whose licence (BSD, MIT, Apache-2.0, PSF) lets a small sample of their source ship
# in the repository as models/heldout.txt, with models/heldout.SOURCES naming each file.
PERMISSIVE = {
    "numpy": "BSD-3-Clause", "scipy": "BSD-3-Clause", "torch": "BSD-3-Clause",
    "networkx": "BSD-3-Clause", "sympy": "BSD-3-Clause", "pandas": "BSD-3-Clause",
    "sklearn": "BSD-3-Clause", "jinja2": "BSD-3-Clause", "click": "BSD-3-Clause",
    "werkzeug": "BSD-3-Clause", "flask": "BSD-3-Clause", "markupsafe": "BSD-3-Clause",
    "pygments": "BSD-2-Clause", "attr": "MIT", "attrs": "MIT", "rich": "MIT", "six": "MIT",
    "yaml": "MIT", "requests": "Apache-2.0", "transformers": "Apache-2.0",
    "packaging": "Apache-2.0 OR BSD-2-Clause", "setuptools": "MIT", "pip": "MIT",
    "idna": "BSD-3-Clause", "urllib3": "MIT", "mpmath": "BSD-3-Clause",
    "jsonschema": "MIT", "boto3": "Apache-2.0", "botocore": "Apache-2.0", "docutils": "BSD-2-Clause",
    "IPython": "BSD-3-Clause", "jedi": "MIT",
}


@dataclasses.dataclass
class SourceFile:
    rel: str        # path relative to its site-packages root
    text: str
    sha: str        # sha1 of the (normalised) text

    @property
    def package(self) -> str:
        top = self.rel.split("/", 1)[0]
        return top[:-3] if top.endswith(".py") else top


@dataclasses.dataclass
class Selection:
    train: list[SourceFile]
    heldout: list[SourceFile]
    roots: list[str]
    n_candidates: int
    candidate_bytes: int


def default_roots() -> list[str]:
    roots = []
    cands = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    cands += [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
    for r in cands:
        if r and os.path.isdir(r):
            r = os.path.realpath(r)
            if r not in roots:
                roots.append(r)
    return roots


def _path_key(rel: str) -> str:
    return hashlib.sha1(rel.encode("utf-8")).hexdigest()


def _accept(text: str) -> bool:
    lines = text.split("\n")
    if max(len(line) for line in lines) > 300:
        return False
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    if non_ascii > 0.01 * len(text):
        return False
    return not any(s in text for s in SPECIAL_TEXTS)


def candidates(roots: list[str]) -> list[tuple[str, str]]:
    """(sha1 of rel path, rel path, full path, size) of every *.py file in the size range, by key."""
    seen = set()
    out = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(".py"):
                    continue
                full = os.path.join(dirpath, fn)
                try:
                    size = os.path.getsize(full)
                except OSError:
                    continue
                if size < 256 or size > 256 * 1024:
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                if rel in seen:
                    continue
                seen.add(rel)
                out.append((_path_key(rel), rel, full, size))
    out.sort()
    return out


def select(roots: list[str], max_bytes: int, heldout_percent: int = 2,
           max_heldout_bytes: int = 4_000_000) -> Selection:
    cands = candidates(roots)
    train, held = [], []
    n_train = n_held = 0
    seen_content = set()
    for key, rel, full, _size in cands:
        is_held = int(key[:8], 16) % 100 < heldout_percent
        if is_held and n_held >= max_heldout_bytes:
            continue
        if not is_held and n_train >= max_bytes:
            if n_held >= max_heldout_bytes:
                break
            continue
        try:
            with open(full, "rb") as f:
                raw = f.read()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if not text.endswith("\n"):
            text += "\n"
        if not text.strip() or not _accept(text):
            continue
        sha = hashlib.sha1(text.encode("utf-8")).hexdigest()
        if sha in seen_content:
            continue
        seen_content.add(sha)
        sf = SourceFile(rel=rel, text=text, sha=sha)
        if is_held:
            held.append(sf)
            n_held += len(text)
        else:
            if n_train + len(text) > max_bytes:
                continue
            train.append(sf)
            n_train += len(text)
    return Selection(train=train, heldout=held, roots=roots, n_candidates=len(cands),
                     candidate_bytes=sum(c[3] for c in cands))


def heldout_sample(sel: Selection, target_bytes: int) -> tuple[str, list[str]]:
    """Text of held-out files from permissively licensed packages (in selection order),
    joined by blank lines, until target_bytes; and one 'package licence path sha1' line each."""
    parts, sources, n = [], [], 0
    for f in sel.heldout:
        lic = PERMISSIVE.get(f.package)
        if lic is None:
            continue
        parts.append(f.text)
        sources.append(f"{f.package}\t{lic}\t{f.rel}\t{f.sha}")
        n += len(f.text) + 1
        if n >= target_bytes:
            break
    return "\n".join(parts), sources
