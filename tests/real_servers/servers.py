"""The real MCP servers of the regression suite: how each starts, the local data it
works on, and the scripted session of ordinary calls it is driven through.

Every server runs from the pinned install of scripts/setup-interop.sh (npm packages in
.interop/real-servers/node_modules, PyPI packages in the venvs .interop/real-servers/py-mcp2
and py-mcp1; the reference servers everything and filesystem from .interop/node_modules).

A session is a list of steps: ("call", TOOL, ARGS), ("read", URI), ("prompt", NAME, ARGS).
Strings in ARGS may hold {data} (the server's data directory, rebuilt from scratch before
every session so direct and gateway runs start from the same state, at the same path)
and {web} (the base URL of the local HTML site on 127.0.0.1).

`normalize` lists (regex, replacement) pairs applied to every string of both transcripts
before they are compared: only values that differ between two direct runs as well
(clock readings, random ids, hashes of commits made during the session). Keep them
narrow: each names what it masks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# --- fixtures ----------------------------------------------------------------------

DOCS = {
    "README.md": "# Field notes\n\nThis folder holds the notes of the spring survey of the river Aln.\n\n"
    "- `survey.csv`: counts per station\n- `notes.txt`: the diary\n- `plan.json`: next season\n",
    "notes.txt": "Day 1. Water was clear, 11 degrees. We counted 14 herons at station 3.\n"
    "Day 2. Rain in the morning; the east bank path is flooded past the old mill.\n"
    "Day 3. Replaced the gauge at station 5. Reading 0.42 m at noon.\n",
    "survey.csv": "station,species,count\n1,heron,4\n2,kingfisher,1\n3,heron,14\n4,otter,2\n5,dipper,3\n",
    "plan.json": json.dumps({"season": "autumn", "stations": [1, 2, 3, 4, 5], "lead": "R. Okafor"}, indent=2) + "\n",
    "reports/summary.md": "## Summary\n\nHeron numbers are up on last year; otters seen twice.\n",
}

HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Aln river survey</title></head>
<body>
<h1>Aln river survey, spring</h1>
<p>The survey counted birds and mammals at five stations along the river over three days.</p>
<h2>Results</h2>
<table><tr><th>Station</th><th>Species</th><th>Count</th></tr>
<tr><td>1</td><td>Heron</td><td>4</td></tr><tr><td>3</td><td>Heron</td><td>14</td></tr>
<tr><td>4</td><td>Otter</td><td>2</td></tr></table>
<p>See the <a href="/method.html">method</a> page for how counts were taken.</p>
</body></html>
"""
METHOD_PAGE = """<!DOCTYPE html><html><head><title>Method</title></head><body>
<h1>Method</h1><p>Two observers walked each bank for one hour at dawn and wrote down every animal seen.</p>
</body></html>
"""
ROBOTS = "User-agent: *\nAllow: /\n"

JS_CODE = "const total = [4, 1, 14, 2, 3].reduce((a, b) => a + b, 0);\nconsole.log(`total: ${total}`);\n"
# Code written with glob's own API, as glob's README (read through filesystem)
# shows it. In together.py, where filesystem is read first, the README's
# `glob.sync` in this code is a value of another server's result: a name of code
# written as code (the flow `taint.code_name`, allowed by default), not data leaving.
GLOB_CODE = (
    'const { glob } = require("{interop_npm}/glob");\n'
    'console.log(glob.sync("*.md", { cwd: "{interop_npm}/glob" }).sort().join(","));\n'
)
JS_UNUSED = "function count(list) {\n  const unused = 3;\n  return list.length;\n}\ncount([1, 2]);\n"
ESLINT_CONFIG = 'export default [{ files: ["**/*.js"], rules: { "no-unused-vars": "error", semi: "error" } }];\n'

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Survey Team",
    "GIT_AUTHOR_EMAIL": "survey@example.org",
    "GIT_COMMITTER_NAME": "Survey Team",
    "GIT_COMMITTER_EMAIL": "survey@example.org",
    "GIT_AUTHOR_DATE": "2026-03-01T10:00:00Z",
    "GIT_COMMITTER_DATE": "2026-03-01T10:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


# Real long documents of npm packages pinned by tests/interop/package-lock.json
# (dependencies of the pinned servers and SDK; installed in .interop), copied
# into the filesystem server's folder: a README says "replaced with" in one section
# and names `node_modules` in another, which the tool-transfer check once held;
# and together.py's one session reads them and then runs code through code-runner,
# which the taint control once blocked (the README had labelled `console.log`).
# Where run.py finds the interop pieces (PORTCULLIS_INTEROP_DIR, else .interop).
INTEROP_NPM = Path(os.environ.get("PORTCULLIS_INTEROP_DIR") or Path(__file__).resolve().parents[2] / ".interop") / "node_modules"
REAL_DOCS = {
    "glob-README.md": "glob/README.md",  # glob@13.0.7, 44 KB
    "chalk-readme.md": "chalk/readme.md",  # chalk@5.6.2, 12 KB
}


def write_docs(d: Path) -> None:
    for rel, text in DOCS.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel, src in REAL_DOCS.items():
        (d / rel).write_bytes((INTEROP_NPM / src).read_bytes())


def make_pdf(path: Path, lines: list[str]) -> None:
    """A small real PDF (one page, Helvetica text), written byte by byte."""
    text = "BT /F1 12 Tf 72 720 Td 16 TL " + " ".join(f"({l}) '" for l in lines) + " ET"
    stream = zlib.compress(text.encode("latin-1"))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (Survey report) /Author (Survey Team) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))


def git(d: Path, *args: str) -> None:
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", *args], cwd=d, env=env, check=True, capture_output=True)


def git_repo(d: Path) -> None:
    """A real repository with history and a dirty tree: a modified tracked file, a
    staged new file and an untracked file."""
    repo = d / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# survey-tools\n\nScripts for the river survey.\n")
    (repo / "count.py").write_text("def total(counts):\n    return sum(counts)\n")
    git(repo, "add", "README.md", "count.py")
    git(repo, "commit", "-q", "-m", "Add survey scripts")
    (repo / "stations.txt").write_text("1 2 3 4 5\n")
    git(repo, "add", "stations.txt")
    git(repo, "commit", "-q", "-m", "List the stations")
    git(repo, "branch", "autumn")
    (repo / "count.py").write_text("def total(counts):\n    return sum(counts)\n\n\ndef mean(counts):\n    return sum(counts) / len(counts)\n")
    (repo / "species.txt").write_text("heron\nkingfisher\notter\ndipper\n")
    git(repo, "add", "species.txt")
    (repo / "todo.txt").write_text("check gauge at station 5\n")


def sqlite_db(d: Path) -> None:
    con = sqlite3.connect(d / "survey.db")
    con.executescript(
        "CREATE TABLE counts (station INTEGER, species TEXT, count INTEGER);"
        "INSERT INTO counts VALUES (1,'heron',4),(2,'kingfisher',1),(3,'heron',14),(4,'otter',2),(5,'dipper',3);"
    )
    con.commit()
    con.close()


# --- the servers -------------------------------------------------------------------


@dataclass
class Server:
    name: str  # short name used in the table and file names
    package: str  # npm or PyPI package name
    ecosystem: str  # "npm" | "pypi"
    command: list[str]  # {node}, {npm}/PKG/FILE, {mcp2}/{mcp1} (venv bin dirs), {data}
    steps: list[tuple] = field(default_factory=list)
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd_data: bool = True  # run the server with its data dir as working directory
    normalize: list[tuple[str, str]] = field(default_factory=list)
    # Normalize inside base64 `blob` fields too (decoded as UTF-8 text, patterns applied):
    # for servers whose binary resources embed a clock reading.
    decode_blobs: bool = False
    note: str = ""  # what the session covers, for the README table


def C(tool: str, args: dict[str, Any] | None = None) -> tuple:
    return ("call", tool, args or {})


def R(uri: str) -> tuple:
    return ("read", uri)


def P(name: str, args: dict[str, Any] | None = None) -> tuple:
    return ("prompt", name, args or {})


NODE = "{node}"
ISO_TIME = (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?", "<time>")
UUID = (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>")


def setup_docs(d: Path) -> None:
    write_docs(d)


def setup_pdf(d: Path) -> None:
    make_pdf(d / "report.pdf", ["Aln river survey: spring report", "Heron numbers are up on last year.", "Otters were seen twice at station 4."])


def setup_eslint(d: Path) -> None:
    (d / "eslint.config.js").write_text(ESLINT_CONFIG)
    (d / "count.js").write_text(JS_UNUSED)
    (d / "ok.js").write_text("export const total = (list) => list.reduce((a, b) => a + b, 0);\n")


def setup_git(d: Path) -> None:
    git_repo(d)


SERVERS: list[Server] = [
    # ---------------- npm ----------------
    Server(
        "everything", "@modelcontextprotocol/server-everything", "npm",
        [NODE, "{interop_npm}/@modelcontextprotocol/server-everything/dist/index.js"],
        steps=[
            C("echo", {"message": "The survey starts at dawn."}),
            C("get-sum", {"a": 14, "b": 28}),
            C("get-annotated-message", {"messageType": "success", "includeImage": True}),
            C("get-tiny-image"),
            C("get-structured-content", {"location": "New York"}),
            C("get-resource-links", {"count": 2}),
            C("get-resource-reference", {"resourceType": "Text", "resourceId": 3}),
            C("gzip-file-as-resource", {"name": "notes.txt.gz", "data": "data:text/plain;base64,SGVyb25zIGNvdW50ZWQ6IDE0Lg==", "outputType": "resource"}),
            C("trigger-sampling-request", {"prompt": "Name one river bird.", "maxTokens": 20}),
            R("demo://resource/static/document/architecture.md"),
            R("demo://resource/dynamic/text/1"),
            R("demo://resource/dynamic/blob/2"),
            P("simple-prompt"),
            P("args-prompt", {"city": "Alnwick", "state": "Northumberland"}),
            P("resource-prompt", {"resourceType": "Text", "resourceId": "2"}),
        ],
        # Its dynamic resources say when they were made ("created at 10:58:29 PM").
        normalize=[ISO_TIME, (r"created at \d{1,2}:\d{2}:\d{2} [AP]M", "created at <time>")],
        decode_blobs=True,
        note="echo, sum, annotated message with image, image, structured content, resource links and references, gzip resource, sampling; static and dynamic resources; three prompts",
    ),
    Server(
        "filesystem", "@modelcontextprotocol/server-filesystem", "npm",
        [NODE, "{interop_npm}/@modelcontextprotocol/server-filesystem/dist/index.js", "{data}"],
        setup=setup_docs,
        steps=[
            C("list_allowed_directories"),
            C("list_directory", {"path": "{data}"}),
            C("directory_tree", {"path": "{data}"}),
            C("read_text_file", {"path": "{data}/notes.txt"}),
            C("read_multiple_files", {"paths": ["{data}/README.md", "{data}/survey.csv"]}),
            C("search_files", {"path": "{data}", "pattern": "*.md"}),
            C("write_file", {"path": "{data}/reports/autumn.md", "content": "## Autumn\n\nPlanned for October.\n"}),
            C("edit_file", {"path": "{data}/notes.txt", "edits": [{"oldText": "11 degrees", "newText": "eleven degrees"}]}),
            C("read_text_file", {"path": "{data}/notes.txt", "head": 2}),
            C("read_text_file", {"path": "{data}/glob-README.md"}),
            C("read_text_file", {"path": "{data}/chalk-readme.md"}),
        ],
        normalize=[(r'"(modified|created|accessed)": "[^"]*"', r'"\1": "<time>"'), (r"(modified|created|accessed): .*", r"\1: <time>")],
        note="list, tree, read, read many, search, write, edit of a folder of documents; read two real package READMEs",
    ),
    Server(
        "memory", "@modelcontextprotocol/server-memory", "npm",
        [NODE, "{npm}/@modelcontextprotocol/server-memory/dist/index.js"],
        env={"MEMORY_FILE_PATH": "{data}/memory.jsonl"},
        steps=[
            C("create_entities", {"entities": [
                {"name": "Aln", "entityType": "river", "observations": ["flows through Alnwick", "clear water in spring"]},
                {"name": "Station 3", "entityType": "site", "observations": ["14 herons counted"]},
            ]}),
            C("create_relations", {"relations": [{"from": "Station 3", "to": "Aln", "relationType": "is on"}]}),
            C("add_observations", {"observations": [{"entityName": "Aln", "contents": ["flooded east bank on day 2"]}]}),
            C("search_nodes", {"query": "heron"}),
            C("open_nodes", {"names": ["Aln"]}),
            C("read_graph"),
            R("memory://knowledge-graph"),
        ],
        note="entities, relations, observations, search, open, read graph",
    ),
    Server(
        "sequential-thinking", "@modelcontextprotocol/server-sequential-thinking", "npm",
        [NODE, "{npm}/@modelcontextprotocol/server-sequential-thinking/dist/index.js"],
        env={"DISABLE_THOUGHT_LOGGING": "true"},
        steps=[
            C("sequentialthinking", {"thought": "Count the herons at each station first.", "nextThoughtNeeded": True, "thoughtNumber": 1, "totalThoughts": 2}),
            C("sequentialthinking", {"thought": "Station 3 has the most herons, 14 of 18.", "nextThoughtNeeded": False, "thoughtNumber": 2, "totalThoughts": 2}),
        ],
        note="two thoughts",
    ),
    Server(
        "pdf", "@modelcontextprotocol/server-pdf", "npm",
        [NODE, "{npm}/@modelcontextprotocol/server-pdf/dist/index.js", "--stdio", "{data}/report.pdf"],
        setup=setup_pdf,
        steps=[
            C("list_pdfs"),
            C("read_pdf_bytes", {"url": "{data}/report.pdf", "offset": 0, "byteCount": 64}),
        ],
        note="list and read a local PDF",
    ),
    Server(
        "pdf-reader", "@sylphx/pdf-reader-mcp", "npm",
        [NODE, "{npm}/@sylphx/pdf-reader-mcp/dist/index.js"],
        setup=setup_pdf,
        steps=[
            C("read_pdf", {"sources": [{"path": "{data}/report.pdf"}], "include_full_text": True, "include_metadata": True, "include_page_count": True}),
        ],
        normalize=[(r"D:\d{14}Z?", "<pdfdate>")],
        note="text, metadata and page count of a local PDF",
    ),
    Server(
        "hello-world", "mcp-hello-world", "npm",
        [NODE, "{npm}/mcp-hello-world/build/stdio.js"],
        steps=[
            C("echo", {"message": "good morning"}),
            C("add", {"a": 4, "b": 14}),
            C("debug"),
            R("hello://world"),
            R("greeting://Ada"),
            P("helpful-assistant"),
        ],
        note="echo, add, debug; a resource, a template read; a prompt",
    ),
    Server(
        "eslint", "@eslint/mcp", "npm",
        [NODE, "{npm}/@eslint/mcp/src/mcp-cli.js"],
        setup=setup_eslint,
        steps=[
            C("lint-files", {"filePaths": ["{data}/count.js"]}),
            C("lint-files", {"filePaths": ["{data}/ok.js"]}),
        ],
        note="lint a file with problems and a clean one (flat config in the folder)",
    ),
    Server(
        "code-runner", "mcp-server-code-runner", "npm",
        [NODE, "{npm}/mcp-server-code-runner/dist/cli.js"],
        steps=[
            C("run-code", {"code": JS_CODE, "languageId": "javascript"}),
            C("run-code", {"code": "print(sum([4, 1, 14, 2, 3]))", "languageId": "python"}),
            C("run-code", {"code": GLOB_CODE, "languageId": "javascript"}),
        ],
        note="run a JavaScript and a Python snippet, and JavaScript written with glob's API (its README is filesystem's)",
    ),
    Server(
        "git-mcp-server", "@cyanheads/git-mcp-server", "npm",
        [NODE, "{npm}/@cyanheads/git-mcp-server/dist/index.js"],
        setup=setup_git,
        env={**GIT_ENV, "MCP_LOG_LEVEL": "error", "GIT_SIGN_COMMITS": "false"},
        steps=[
            C("git_set_working_dir", {"path": "{data}/repo"}),
            C("git_status", {}),
            C("git_log", {"maxCount": 5}),
            C("git_diff", {}),
            C("git_branch", {"mode": "list"}),
            C("git_show", {"object": "HEAD"}),
            R("git://working-directory"),
        ],
        normalize=[ISO_TIME, (r"\b\d{2,3}ms\b", "<ms>")],
        note="set working dir, status, log, diff, branches, show on a dirty repository",
    ),
    Server(
        "calc-mcp", "@coo-quack/calc-mcp", "npm",
        [NODE, "{npm}/@coo-quack/calc-mcp/dist/index.js"],
        steps=[
            C("math", {"expression": "(4 + 1 + 14 + 2 + 3) / 5"}),
            C("hash", {"input": "heron", "algorithm": "sha256"}),
            C("base64", {"input": "otter", "action": "encode"}),
            C("date", {"action": "diff", "date": "2026-03-01", "date2": "2026-06-01"}),
            C("convert", {"value": 10, "from": "km", "to": "mi"}),
            C("regex", {"pattern": "\\d+", "text": "14 herons, 2 otters", "action": "match", "flags": "g"}),
            C("semver", {"action": "compare", "version": "1.2.3", "version2": "1.10.0"}),
            C("count", {"text": "Water was clear, 11 degrees."}),
        ],
        note="math, hash, base64, date diff, unit conversion, regex, semver, count",
    ),
    Server(
        "time-mcp", "time-mcp", "npm",
        [NODE, "{npm}/time-mcp/dist/index.js"],
        steps=[
            C("convert_time", {"sourceTimezone": "Europe/London", "targetTimezone": "Asia/Tokyo", "time": "2026-03-01 09:30:00"}),
            C("days_in_month", {"date": "2026-02-01"}),
            C("get_week_year", {"date": "2026-03-01"}),
            C("get_timestamp", {"time": "2026-03-01 09:30:00"}),
        ],
        note="time zone conversion, days in month, week of year, timestamp of a date",
    ),
    Server(
        "sequentialthinking-tools", "mcp-sequentialthinking-tools", "npm",
        [NODE, "{npm}/mcp-sequentialthinking-tools/dist/index.js"],
        steps=[
            C("sequentialthinking_tools", {"thought": "Read the survey file before counting.", "next_thought_needed": False, "thought_number": 1, "total_thoughts": 1, "available_mcp_tools": ["read_file"]}),
        ],
        note="one thought with a tool recommendation list",
    ),
    Server(
        "context7", "@upstash/context7-mcp", "npm",
        [NODE, "{npm}/@upstash/context7-mcp/dist/index.js"],
        note="listing only: every tool queries the Context7 web service",
    ),
    Server(
        "github", "@modelcontextprotocol/server-github", "npm",
        [NODE, "{npm}/@modelcontextprotocol/server-github/dist/index.js"],
        note="listing only: every tool calls the GitHub API (starts without a token)",
    ),
    Server(
        "chart", "@antv/mcp-server-chart", "npm",
        [NODE, "{npm}/@antv/mcp-server-chart/build/index.js"],
        note="listing only: charts are rendered by a remote service",
    ),
    # ---------------- PyPI ----------------
    Server(
        "git", "mcp-server-git", "pypi",
        ["{mcp2}/mcp-server-git", "--repository", "{data}/repo"],
        setup=setup_git,
        env=GIT_ENV,
        steps=[
            C("git_status", {"repo_path": "{data}/repo"}),
            C("git_diff_unstaged", {"repo_path": "{data}/repo"}),
            C("git_diff_staged", {"repo_path": "{data}/repo"}),
            C("git_log", {"repo_path": "{data}/repo", "max_count": 5}),
            C("git_branch", {"repo_path": "{data}/repo", "branch_type": "local"}),
            C("git_diff", {"repo_path": "{data}/repo", "target": "autumn"}),
            C("git_show", {"repo_path": "{data}/repo", "revision": "HEAD"}),
            C("git_add", {"repo_path": "{data}/repo", "files": ["todo.txt"]}),
            C("git_commit", {"repo_path": "{data}/repo", "message": "Add the gauge check"}),
            C("git_status", {"repo_path": "{data}/repo"}),
        ],
        note="status (dirty tree), unstaged/staged diffs, log, branches, diff to a branch, show, add, commit",
    ),
    Server(
        "fetch", "mcp-server-fetch", "pypi",
        # The local site is on 127.0.0.1, which the server refuses unless told.
        ["{mcp2}/mcp-server-fetch", "--allow-private-ips"],
        # readabilipy (its HTML extractor) runs `npm install` into its own package dir on
        # every call when it finds `node` on PATH and no node_modules: it hangs here (no
        # cache, the registry slow). Without node on PATH it uses its Python extractor,
        # as on a machine without Node.
        env={"PATH": "{mcp2}"},
        steps=[
            C("fetch", {"url": "{web}/index.html"}),
            C("fetch", {"url": "{web}/index.html", "raw": True, "max_length": 400}),
            C("fetch", {"url": "{web}/method.html"}),
            P("fetch", {"url": "{web}/index.html"}),
        ],
        note="fetch a local HTML page as Markdown and raw, a second page; the fetch prompt",
    ),
    Server(
        "time", "mcp-server-time", "pypi",
        ["{mcp2}/mcp-server-time", "--local-timezone=Europe/London"],
        steps=[
            C("convert_time", {"source_timezone": "Europe/London", "time": "09:30", "target_timezone": "America/New_York"}),
            C("convert_time", {"source_timezone": "Asia/Tokyo", "time": "18:00", "target_timezone": "Europe/Berlin"}),
            C("get_current_time", {"timezone": "Europe/Paris"}),
        ],
        normalize=[ISO_TIME, (r'"day_of_week": "\w+"', '"day_of_week": "<day>"'), (r'"is_dst": (true|false)', '"is_dst": <dst>')],
        note="two conversions and the current time (clock values masked)",
    ),
    Server(
        "excel", "excel-mcp-server", "pypi",
        ["{mcp2}/excel-mcp-server", "stdio"],
        env={"EXCEL_FILES_PATH": "{data}"},
        setup=setup_docs,
        steps=[
            C("create_workbook", {"path": "{data}/survey.xlsx"}),
            C("write_range", {"path": "{data}/survey.xlsx", "sheet": "Sheet1", "at": "A1", "rows": [["station", "species", "count"], [1, "heron", 4], [3, "heron", 14], [4, "otter", 2]]}),
            C("read_range", {"path": "{data}/survey.xlsx", "sheet": "Sheet1"}),
            C("describe_workbook", {"path": "{data}/survey.xlsx"}),
            C("find_cells", {"path": "{data}/survey.xlsx", "query": "heron"}),
        ],
        note="create a workbook, write, read, describe, find cells",
    ),
    Server(
        "word", "office-word-mcp-server", "pypi",
        ["{mcp2}/word_mcp_server"],
        steps=[
            C("create_document", {"filename": "{data}/report.docx", "title": "Survey report", "author": "Survey Team"}),
            C("add_heading", {"filename": "{data}/report.docx", "text": "Spring survey", "level": 1}),
            C("add_paragraph", {"filename": "{data}/report.docx", "text": "Heron numbers are up on last year; otters were seen twice."}),
            C("get_document_text", {"filename": "{data}/report.docx"}),
            C("get_document_outline", {"filename": "{data}/report.docx"}),
            C("find_text_in_document", {"filename": "{data}/report.docx", "text_to_find": "otters"}),
        ],
        normalize=[ISO_TIME, (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?(\+\d{2}:\d{2})?", "<time>")],
        note="create a .docx, heading, paragraph, text, outline, find",
    ),
    Server(
        "duckduckgo", "duckduckgo-mcp-server", "pypi",
        ["{mcp2}/duckduckgo-mcp-server"],
        note="listing only: every tool queries DuckDuckGo or fetches a web page",
    ),
    Server(
        "motherduck", "mcp-server-motherduck", "pypi",
        ["{mcp2}/mcp-server-motherduck", "--db-path", "{data}/survey.duckdb", "--read-write"],
        steps=[
            C("execute_query", {"sql": "CREATE TABLE counts AS SELECT * FROM (VALUES (1, 'heron', 4), (3, 'heron', 14), (4, 'otter', 2)) t(station, species, n)"}),
            C("execute_query", {"sql": "SELECT species, sum(n) AS total FROM counts GROUP BY species ORDER BY species"}),
            C("list_tables", {}),
        ],
        note="create a table in a local DuckDB file, aggregate, list tables",
    ),
    Server(
        "aws-documentation", "awslabs.aws-documentation-mcp-server", "pypi",
        ["{mcp2}/awslabs.aws-documentation-mcp-server"],
        env={"FASTMCP_LOG_LEVEL": "ERROR"},
        note="listing only: every tool fetches docs.aws.amazon.com",
    ),
    Server(
        "sqlite", "mcp-server-sqlite", "pypi",
        ["{mcp1}/mcp-server-sqlite", "--db-path", "{data}/survey.db"],
        setup=sqlite_db,
        steps=[
            C("list_tables"),
            C("describe_table", {"table_name": "counts"}),
            C("read_query", {"query": "SELECT species, SUM(count) AS total FROM counts GROUP BY species ORDER BY species"}),
            C("write_query", {"query": "INSERT INTO counts VALUES (6, 'heron', 2)"}),
            C("read_query", {"query": "SELECT COUNT(*) AS n FROM counts"}),
            C("append_insight", {"insight": "Herons are the most counted species."}),
            R("memo://insights"),
            P("mcp-demo", {"topic": "river survey"}),
        ],
        note="list, describe, aggregate, insert, count; the insights memo; the demo prompt",
    ),
    Server(
        "calculator", "mcp-server-calculator", "pypi",
        ["{mcp1}/mcp-server-calculator"],
        steps=[C("calculate", {"expression": "(4 + 1 + 14 + 2 + 3) / 5"}), C("calculate", {"expression": "2 ** 10 - 24"})],
        note="two expressions",
    ),
    Server(
        "duckdb", "mcp-server-duckdb", "pypi",
        ["{mcp1}/mcp-server-duckdb", "--db-path", "{data}/survey.duckdb"],
        steps=[
            C("query", {"query": "CREATE TABLE counts (station INTEGER, species VARCHAR, n INTEGER)"}),
            C("query", {"query": "INSERT INTO counts VALUES (1, 'heron', 4), (3, 'heron', 14), (4, 'otter', 2)"}),
            C("query", {"query": "SELECT species, sum(n) AS total FROM counts GROUP BY species ORDER BY species"}),
        ],
        note="create, insert, aggregate in a local DuckDB file",
    ),
    Server(
        "cli", "cli-mcp-server", "pypi",
        ["{mcp1}/cli-mcp-server"],
        setup=setup_docs,
        env={"ALLOWED_DIR": "{data}", "ALLOWED_COMMANDS": "ls,cat,wc,head", "ALLOWED_FLAGS": "-l,-n,-1", "COMMAND_TIMEOUT": "20"},
        steps=[
            C("show_security_rules"),
            C("run_command", {"command": "ls -1"}),
            C("run_command", {"command": "wc -l survey.csv"}),
            C("run_command", {"command": "head -n 2 notes.txt"}),
        ],
        note="security rules; ls, wc, head in a folder of documents",
    ),
    Server(
        "powerpoint", "office-powerpoint-mcp-server", "pypi",
        ["{mcp1}/ppt_mcp_server"],
        steps=[
            C("create_presentation", {"id": "survey"}),
            C("add_slide", {"layout_index": 1, "title": "Spring survey", "presentation_id": "survey"}),
            C("save_presentation", {"file_path": "{data}/survey.pptx", "presentation_id": "survey"}),
            C("get_presentation_info", {"presentation_id": "survey"}),
        ],
        note="create a deck, add a slide, save, info",
    ),
    Server(
        "jcodemunch", "jcodemunch-mcp", "pypi",
        ["{mcp1}/jcodemunch-mcp"],
        env={"JCODEMUNCH_HOME": "{data}/home", "CODE_INDEX_PATH": "{data}/index"},
        steps=[C("jcodemunch_guide"), C("menu", {"limit": 5}), R("munch://runtime/identity")],
        # Its identity resource names its process: pid, start time, a random instance id.
        normalize=[ISO_TIME, UUID, (r'"pid":\d+', '"pid":<pid>')],
        note="guide, menu, identity resource",
    ),
    Server(
        "arxiv", "arxiv-mcp-server", "pypi",
        ["{mcp1}/arxiv-mcp-server", "--storage-path", "{data}/papers"],
        steps=[C("list_papers"), C("list_watches")],
        note="local calls only (stored papers, watches): search and download reach arxiv.org",
    ),
]
