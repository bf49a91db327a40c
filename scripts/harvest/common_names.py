#!/usr/bin/env python3
"""Write crates/portcullis-controls/data/common_names.txt: the names that real
software shares (`console.log`, `os.path.join`, `package.json`, `encoding=`,
`std::vector`, `urgency=medium`).

The taint control labels the values of a tool result (docs/structural.md, "What is a
value"); a token of `min_len` letters with a `.`, `:`, `=` or `+` has the shape of one
(`survey.csv`, `notes.txt`). But a name that many unrelated packages write — an API
of a language's standard library, a keyword argument, a conventional file name, a
field of a standard file — says nothing about the data that carried it: a README
that shows `console.log` and code that calls it are not a flow. Read through
server-filesystem, glob@13.0.7's README made every later run-code call that logged
anything a cross-server flow (blocked).

A name is listed when it is written, as a whole token, in the harvested texts and
tool results of packages of at least MIN_GROUPS different upstream projects (Debian's
and PyPI's django are one, and so are a document's translations) of the train and dev
splits (the corpus loader's splits, from MANIFEST.json). The test split is
left out so that what the list does can be measured on packages it was not made
from (crates/portcullis-controls/examples/unrelated_flows.rs).

Only tokens of printable ASCII without a digit, `/`, `\\`, or `@` but at the start
(`@pytest.fixture`), and never a host or a handle: not a name the harvest writes as
the host of a link or an address, nor a dotted name ending in a top-level domain of
the Public Suffix List (`user.email`, `README.md`), nor an `@name` or `#name` without
a `.` (a handle, a channel). Numbers, ids, keys, paths, links, addresses, hosts and
handles stay values whatever their frequency.

    python3 scripts/harvest/common_names.py
    python3 scripts/harvest/common_names.py --tlds-from /usr/share/publicsuffix/public_suffix_list.dat
        (first rewrites scripts/harvest/psl-tlds.txt from a Public Suffix List; Debian's
        publicsuffix 20230209.2326-1 made the committed one)

It reads only the committed harvest (corpus/harvest/{texts,texts-assistants,results}
.jsonl.gz) and records their SHA-256 in the list's header; the test
`cargo test -p portcullis-eval --test harvest common_names` checks the header against
MANIFEST.json and runs the rule again on the harvest (the list must be what it gives).
"""
import collections
import gzip
import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARVEST = ROOT / "corpus" / "harvest"
OUT = ROOT / "crates" / "portcullis-controls" / "data" / "common_names.txt"
FILES = ["texts.jsonl.gz", "texts-assistants.jsonl.gz", "results.jsonl.gz"]
MIN_GROUPS = 3
MIN_LEN = 8  # the taint control's default min_len: shorter names are never values

# taint::split_tokens: whitespace (Unicode White_Space, as Rust's
# char::is_whitespace has it; not Python's \s, which adds \x1c-\x1f) and quoting or
# bracketing punctuation separate; sentence punctuation is trimmed from both ends.
WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
SEPARATORS = re.compile(f"[{WS}\"'`,;()\\[\\]{{}}<>|]+")
# A token of printable ASCII without a digit, `/`, `\\`, or `@` but at its start (a
# decorator, `@property`): numbers, ids, keys, paths, links and addresses are never
# listed, whatever their frequency.
WORD = re.compile(r"[!-~]+")
# A name is a place, not vocabulary, when the harvest writes it as the host of a
# link or an address (`https://github.com/…`, `…@gmail.com`) or it ends in a
# top-level domain (below): hosts stay values whatever their frequency, since
# passing one on is how a result points a call somewhere.
HOSTS = re.compile(f"(?:://(?:[^/{WS}@]*@)?|[A-Za-z0-9._%+-]@)([A-Za-z0-9.-]+\\.[A-Za-z]{{2,}})")
# The top-level domains of the Public Suffix List's ICANN section, committed in
# scripts/harvest/psl-tlds.txt (written from Debian's `publicsuffix` with
# --tlds-from; its SHA-256 goes in the list's header): a dotted name ending in one
# (`user.email`, `asyncio.run`, `README.md`) could be a host someone registers,
# and is not listed.
TLDS = ROOT / "scripts" / "harvest" / "psl-tlds.txt"


def write_tlds(psl: Path) -> None:
    """Write TLDS from a Public Suffix List file: the last label of every rule of
    its ICANN section, ASCII ones only (the list's names are ASCII)."""
    data = psl.read_bytes()
    tlds, icann = set(), False
    for line in data.decode("utf-8").splitlines():
        line = line.strip()
        if line.startswith("// ===BEGIN ICANN DOMAINS==="):
            icann = True
        elif line.startswith("// ===END ICANN DOMAINS==="):
            icann = False
        elif icann and line and not line.startswith("//"):
            label = line.lstrip("!*.").rsplit(".", 1)[-1].lower()
            if label.isascii():
                tlds.add(label)
    with open(TLDS, "w", encoding="utf-8") as f:
        f.write(f"# top-level domains of the ICANN section of {psl}, sha256 {hashlib.sha256(data).hexdigest()}\n")
        f.write("# written by scripts/harvest/common_names.py --tlds-from\n")
        for t in sorted(tlds):
            f.write(t + "\n")


def read_tlds() -> tuple[set[str], str]:
    data = TLDS.read_bytes()
    tlds = {l for l in data.decode("utf-8").splitlines() if l and not l.startswith("# ")}
    return tlds, hashlib.sha256(data).hexdigest()


def upstream(group: str) -> str:
    """portcullis-eval's harvest::upstream (Debian's affixes folded), and a
    language suffix folded too (`developers-reference-de`, `manpages-pt-br`): a
    translation of one document is not another package."""
    eco, _, name = group.partition(":")
    n = name.lower().replace("_", "-").replace(".", "-")
    if eco == "deb":
        for prefix in ("python3-", "python-", "node-", "lib", "golang-", "ruby-", "r-cran-"):
            if n.startswith(prefix) and n[len(prefix):]:
                n = n[len(prefix):]
                break
        for suffix in ("-doc", "-dev", "-common", "-data", "-utils", "-tools", "-bin"):
            if n.endswith(suffix) and n[: -len(suffix)]:
                n = n[: -len(suffix)]
                break
        n = re.sub(r"-[a-z]{2}(?:-[a-z]{2,4})?$", "", n) or n
    return n


def splits() -> dict[str, str]:
    """Each package's split as the corpus loader assigns it (one upstream, one split:
    Debian's python3-django and PyPI's django share one), from MANIFEST.json."""
    m = json.loads((HARVEST / "MANIFEST.json").read_text(encoding="utf-8"))
    out = {}
    for f in ("texts.jsonl.gz", "texts-assistants.jsonl.gz"):
        for g, p in m["files"][f]["packages"].items():
            if "split" in p:
                out[g] = p["split"]
    for p in m["results"]["data_packages"]:
        if "split" in p:
            out[p["package"]] = p["split"]
    return out


def names(text: str):
    """The tokens of `text` that taint::value_like takes for values by their shape
    and that may be listed: MIN_LEN characters and MIN_LEN letters, and 24
    characters or one of `.` `@` `:` `=` `+`."""
    for tok in SEPARATORS.split(text):
        tok = tok.strip(".:!?")
        if (
            len(tok) >= MIN_LEN
            and WORD.fullmatch(tok)
            and not any(c.isdigit() or c in "/\\" for c in tok)
            and "@" not in tok[1:]
            and sum(c.isalnum() for c in tok) >= MIN_LEN
            and (len(tok) >= 24 or any(c in ".@:=+" for c in tok))
        ):
            yield tok


def main() -> None:
    groups: dict[str, set[str]] = collections.defaultdict(set)
    hosts: set[str] = set()
    split = splits()
    tlds, tlds_digest = read_tlds()
    digests = {}
    for name in FILES:
        path = HARVEST / name
        data = path.read_bytes()
        digests[name] = hashlib.sha256(data).hexdigest()
        # Lines end at "\n" only (a text may hold U+2028, which `splitlines` cuts at).
        for line in gzip.decompress(data).decode("utf-8").split("\n"):
            if not line:
                continue
            r = json.loads(line)
            g = r["lineage_group"]
            if split[g] == "test":
                continue
            text = r.get("text", "")
            up = upstream(g)
            for tok in names(text):
                groups[tok].add(up)
            for m in HOSTS.finditer(text):
                hosts.add(m.group(1).lower())
    listed = sorted(
        t
        for t, gs in groups.items()
        if len(gs) >= MIN_GROUPS
        and t.lower() not in hosts
        and not ("." in t and t.rsplit(".", 1)[1].lower() in tlds)
        # `@name` and `#name` are handles and channels (destination.rs); a
        # decorator or anchor with a `.` (`@pytest.fixture`) is not one.
        and not (t[0] in "@#" and "." not in t)
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("# Names real software shares; written by scripts/harvest/common_names.py\n")
        f.write(f"# rule: whole tokens in >= {MIN_GROUPS} upstream projects of the train and dev splits; no host, handle or TLD ending\n")
        for name in FILES:
            f.write(f"# sha256 {name} {digests[name]}\n")
        f.write(f"# sha256 psl-tlds.txt {tlds_digest}\n")
        for t in listed:
            f.write(t + "\n")
    print(f"{len(listed)} names of {len(groups)} names of the shape seen -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--tlds-from"] and len(sys.argv) == 3:
        write_tlds(Path(sys.argv[2]))
    elif sys.argv[1:]:
        sys.exit("usage: common_names.py [--tlds-from /usr/share/publicsuffix/public_suffix_list.dat]")
    main()
