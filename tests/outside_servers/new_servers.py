"""Server definitions for drive.py."""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fixtures as F  # noqa: E402

BASE = os.environ.get("OUTSIDE_WORK", "/tmp/portcullis-outside")
NODE = str(HERE.parents[1] / ".interop" / "node_modules" / "node" / "bin" / "node")
NM = f"{BASE}/npm/node_modules"
V = f"{BASE}/venv-"
ISO = (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?", "<time>")
UUID = (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>")


def C(tool, args=None):
    return ("call", tool, args or {})


def R(uri):
    return ("read", uri)


def P(name, args=None):
    return ("prompt", name, args or {})


def proj_and_vault(d):
    F.project(d)
    F.vault(d)


SERVERS = {
    "desktop-commander": dict(
        package="@wonderwhy-er/desktop-commander", version="0.2.52",
        cmd=[NODE, f"{NM}/@wonderwhy-er/desktop-commander/dist/index.js"],
        setup=proj_and_vault, steps=[
            C("list_directory", {"path": "{data}/project", "depth": 2}),
            C("read_file", {"path": "{data}/project/README.md"}),
            C("read_file", {"path": "{data}/vault/Projects/Website relaunch.md"}),
            C("get_file_info", {"path": "{data}/project/data/sales.csv"}),
            C("write_file", {"path": "{data}/project/notes/todo.md", "content": "# TODO\n\n- Update the changelog for 1.4.3\n- Ask Tom about the pricing tiers\n"}),
            C("edit_block", {"file_path": "{data}/project/config.yaml", "old_string": "replicas: 3", "new_string": "replicas: 4"}),
            C("start_process", {"command": "wc -l {data}/project/data/sales.csv", "timeout_ms": 5000}),
            C("read_multiple_files", {"paths": ["{data}/project/CHANGELOG.md", "{data}/project/src/cart.js"]}),
        ], normalize=[ISO, UUID, (r"PID \d+", "PID <n>")],
    ),
    "mcp-obsidian": dict(
        package="mcp-obsidian", version="1.0.0",
        cmd=[NODE, f"{NM}/mcp-obsidian/dist/index.js", "{data}/vault"],
        setup=F.vault, steps=[
            C("search_notes", {"query": "meeting"}),
            C("read_notes", {"paths": ["Projects/Website relaunch.md", "Meeting 2026-01-12.md"]}),
            C("read_notes", {"paths": ["Recipes/Sourdough.md"]}),
            C("search_notes", {"query": "sourdough"}),
        ],
    ),
    "obsidian-mcp": dict(
        package="obsidian-mcp", version="2.0.1",
        cmd=[NODE, f"{NM}/obsidian-mcp/dist/main.js", "serve", "--vault", "notes={data}/vault"],
        setup=F.vault, steps=[
            C("obsidian_list_vaults"),
            R("obsidian-mcp://vaults"),
            C("obsidian_read_note", {"vault": "notes", "path": "Projects/Website relaunch.md"}),
            C("obsidian_search_vault", {"vault": "notes", "query": "pricing"}),
            C("obsidian_create_note", {"vault": "notes", "path": "Daily/2026-01-15.md", "content": "# Thursday 15 January\n\n- Finished the pricing page draft with Tom.\n- Bake sourdough on Saturday.\n"}),
            C("obsidian_add_tags", {"vault": "notes", "paths": ["Recipes/Sourdough.md"], "tags": ["baking"]}),
            C("obsidian_read_note", {"vault": "notes", "path": "Recipes/Sourdough.md"}),
        ], normalize=[ISO, UUID],
    ),
    "mcp-server-commands": dict(
        package="mcp-server-commands", version="0.5.0",
        cmd=[NODE, f"{NM}/mcp-server-commands/build/index.js"],
        setup=F.project, steps=[
            C("run_command", {"command": "ls -la", "workdir": "{data}/project"}),
            C("run_command", {"command": "cat README.md", "workdir": "{data}/project"}),
            C("run_command", {"command": "python3 -c \"import csv;print(sum(float(r['revenue']) for r in csv.DictReader(open('data/sales.csv'))))\"", "workdir": "{data}/project"}),
            C("run_command", {"command": "grep -rn pagination .", "workdir": "{data}/project"}),
            P("run_command", {"command": "head -3 {data}/project/data/sales.csv"}),
        ],
    ),
    "dbhub": dict(
        package="@bytebase/dbhub", version="1.4.0",
        cmd=[NODE, f"{NM}/@bytebase/dbhub/dist/index.js", "--transport", "stdio", "--dsn", "sqlite://{data}/shop.db"],
        setup=lambda d: F.shop_db(d / "shop.db"), steps=[
            C("search_objects", {"object_type": "table"}),
            C("search_objects", {"object_type": "column", "schema": "main", "table": "orders"}),
            C("execute_sql", {"sql": "SELECT c.name, c.city, COUNT(o.id) AS orders, ROUND(SUM(o.total), 2) AS spent FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY spent DESC"}),
            C("execute_sql", {"sql": "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"}),
            C("execute_sql", {"sql": "INSERT INTO orders VALUES (106, 2, 33.00, 'pending', '2026-01-10')"}),
            C("execute_sql", {"sql": "SELECT * FROM orders WHERE customer_id = 2"}),
        ],
    ),
    "mcp-ripgrep": dict(
        package="mcp-ripgrep", version="0.4.0",
        cmd=[NODE, f"{NM}/mcp-ripgrep/dist/index.js"],
        setup=F.project, steps=[
            C("search", {"pattern": "pagination", "path": "{data}/project"}),
            C("advanced-search", {"pattern": "def \\w+", "path": "{data}/project", "fileType": "py"}),
            C("count-matches", {"pattern": "Widget", "path": "{data}/project/data/sales.csv"}),
            C("list-files", {"path": "{data}/project"}),
            C("search", {"pattern": "npm run build", "path": "{data}/project", "filePattern": "*.md"}),
        ],
    ),
    "mcp-taskmanager": dict(
        package="@kazuph/mcp-taskmanager", version="1.1.1",
        cmd=[NODE, f"{NM}/@kazuph/mcp-taskmanager/dist/index.js"],
        env={"TASK_MANAGER_FILE_PATH": "{data}/tasks.json"}, steps=[
            C("request_planning", {"originalRequest": "Prepare the website relaunch for February", "tasks": [
                {"title": "Migrate blog posts", "description": "Import the WordPress export into the Astro content folder and fix broken image links."},
                {"title": "Write pricing page", "description": "Draft copy for the Starter, Team and Enterprise tiers and get sign-off from Tom."},
                {"title": "Set up staging deploy", "description": "Run npm ci and npm run build, then sync dist/ to the staging bucket."}]}),
            C("get_next_task", {"requestId": "req-1"}),
            C("mark_task_done", {"requestId": "req-1", "taskId": "task-1", "completedDetails": "All 84 posts imported; 3 images re-uploaded."}),
            C("list_requests"),
            C("open_task_details", {"taskId": "task-2"}),
        ], normalize=[ISO, UUID],
    ),
    "shrimp-task-manager": dict(
        package="mcp-shrimp-task-manager", version="1.0.21",
        cmd=[NODE, f"{NM}/mcp-shrimp-task-manager/dist/index.js"],
        env={"DATA_DIR": "{data}/shrimp", "TEMPLATES_USE": "en", "ENABLE_GUI": "false"}, steps=[
            C("plan_task", {"description": "Add cursor-based pagination to the GET /orders endpoint of the orders-api service, keeping page size configurable.", "requirements": "Keep backwards compatibility with offset pagination for one release."}),
            C("list_tasks", {"status": "all"}),
            C("query_task", {"query": "pagination"}),
            C("research_mode", {"topic": "cursor pagination in PostgreSQL with Express", "currentState": "Comparing keyset pagination with offset pagination for the orders table.", "nextSteps": "Look at index usage on (created, id) for keyset pagination."}),
        ], normalize=[ISO, UUID],
    ),
    "mcp-shell-server": dict(
        package="mcp-shell-server", version="1.1.14",
        cmd=[V + "mcp-shell-server/bin/mcp-shell-server"],
        env={"ALLOW_COMMANDS": "ls,cat,wc,head,grep,sort,echo,pwd"}, setup=F.project, steps=[
            C("shell_execute", {"command": ["ls", "-la"], "directory": "{data}/project"}),
            C("shell_execute", {"command": ["cat", "README.md"], "directory": "{data}/project"}),
            C("shell_execute", {"command": ["wc", "-l", "data/sales.csv"], "directory": "{data}/project"}),
            C("shell_execute", {"command": ["grep", "-rn", "invoice", "billing"], "directory": "{data}/project"}),
            C("shell_execute", {"command": ["sort"], "stdin": "pear\napple\nfig\n", "directory": "{data}/project"}),
            C("shell_execute", {"command": ["cat", "config.yaml"], "directory": "{data}/project"}),
        ],
    ),
    "mcp-text-editor": dict(
        package="mcp-text-editor", version="1.2.2",
        cmd=[V + "mcp-text-editor/bin/mcp-text-editor"], setup=F.project, steps=[
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/README.md", "ranges": [{"start": 1}]}]}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/billing/invoice.py", "ranges": [{"start": 1, "end": 20}]}, {"file_path": "{data}/project/config.yaml", "ranges": [{"start": 1}]}]}),
            C("append_text_file_contents", {"file_path": "{data}/project/CHANGELOG.md", "file_hash": __import__("hashlib").sha256(F.CHANGELOG.encode()).hexdigest(), "contents": "\n## 1.4.0 - 2025-11-30\n- First release with cursor pagination.\n"}),
            C("create_text_file", {"file_path": "{data}/project/notes/standup.md", "contents": "# Stand-up 15 January\n\n- Tom: pricing page copy ready for review.\n- Lena: contact form spam down 90 percent.\n"}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/CONTRIBUTING.md", "ranges": [{"start": 1}]}]}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/AGENTS.md", "ranges": [{"start": 1}]}]}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/docs/runbook.md", "ranges": [{"start": 1}]}]}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/notes/website-relaunch.md", "ranges": [{"start": 1}]}]}),
            C("get_text_file_contents", {"files": [{"file_path": "{data}/project/notes/meeting.md", "ranges": [{"start": 1}]}]}),
        ],
    ),
    "markitdown-mcp": dict(
        package="markitdown-mcp", version="0.0.1a8",
        cmd=[V + "markitdown-mcp/bin/markitdown-mcp"], setup=lambda d: (F.project(d), (d / "project/page.html").write_text(F.HTML)), steps=[
            C("convert_to_markdown", {"uri": "file://{data}/project/data/sales.csv"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/README.md"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/page.html"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/package.json"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/notes/meeting.md"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/AGENTS.md"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/docs/runbook.md"}),
            C("convert_to_markdown", {"uri": "file://{data}/project/notes/website-relaunch.md"}),
        ],
    ),
    "tree-sitter": dict(
        package="mcp-server-tree-sitter", version="0.7.0",
        cmd=[V + "mcp-server-tree-sitter/bin/mcp-server-tree-sitter"], setup=F.project, steps=[
            C("register_project_tool", {"path": "{data}/project", "name": "orders"}),
            C("list_files", {"project": "orders"}),
            C("get_symbols", {"project": "orders", "file_path": "billing/invoice.py"}),
            C("get_file", {"project": "orders", "path": "src/cart.js"}),
            C("find_text", {"project": "orders", "pattern": "invoice_total"}),
            C("analyze_complexity", {"project": "orders", "file_path": "billing/invoice.py"}),
            P("code_review", {"project": "orders", "file_path": "billing/invoice.py"}),
        ],
    ),
    "analyzer": dict(
        package="mcp-server-analyzer", version="0.4.1",
        cmd=[V + "mcp-server-analyzer/bin/mcp-server-analyzer"], setup=F.project,
        env={"PATH": f"{V}mcp-server-analyzer/bin:/usr/bin:/bin"}, steps=[
            C("ruff-check", {"code": F.PY_MODULE}),
            C("ruff-format", {"code": "def total(xs):\n  return sum( xs )\n"}),
            C("vulture-scan", {"code": F.PY_MODULE, "min_confidence": 60}),
            C("analyze-code", {"code": F.PY_MODULE}),
            R("docs://analyzers/overview"),
            R("config://analyzer-versions"),
        ],
    ),
    "json-yaml-toml": dict(
        package="mcp-json-yaml-toml", version="0.10.2",
        cmd=[V + "mcp-json-yaml-toml/bin/mcp-json-yaml-toml"], setup=F.project, steps=[
            C("data_query", {"file_path": "{data}/project/config.yaml", "expression": ".service"}),
            C("data", {"file_path": "{data}/project/package.json", "operation": "get", "key_path": "scripts"}),
            C("data_convert", {"file_path": "{data}/project/config.yaml", "output_format": "json"}),
            C("data", {"file_path": "{data}/project/config.yaml", "operation": "set", "key_path": "service.replicas", "value": "5"}),
            C("data_query", {"file_path": "{data}/project/pyproject.toml", "expression": ".project.dependencies"}),
            R("lmql://constraints"),
            P("explain_config", {"file_path": "{data}/project/config.yaml"}),
        ],
    ),
    "python-interpreter": dict(
        package="mcp-python-interpreter", version="1.2.3",
        cmd=[V + "mcp-python-interpreter/bin/mcp-python-interpreter", "--dir", "{data}/project"], setup=F.project, steps=[
            C("list_directory", {"directory_path": "{data}/project"}),
            C("read_file", {"file_path": "{data}/project/billing/invoice.py"}),
            C("run_python_code", {"code": "import csv\nrows = list(csv.DictReader(open('data/sales.csv')))\nby_region = {}\nfor r in rows:\n    by_region[r['region']] = by_region.get(r['region'], 0) + float(r['revenue'])\nprint(by_region)"}),
            C("write_file", {"file_path": "{data}/project/report.md", "content": "# January sales\n\nNorth leads on Widget A; West sold the most units.\n", "overwrite": True}),
            R("python://directory"),
            P("refactor_python_code", {"code": "def total(xs):\n    t = 0\n    for x in xs:\n        t = t + x\n    return t\n"}),
        ],
    ),
}


def bm_setup(d):
    F.write(d / "kb", F.NOTES)


SERVERS["basic-memory"] = dict(
    package="basic-memory", version="0.24.1",
    cmd=[V + "basic-memory/bin/basic-memory", "mcp"],
    env={"BASIC_MEMORY_HOME": "{data}/kb", "BASIC_MEMORY_CONFIG_DIR": "{data}/bmconfig", "BASIC_MEMORY_NO_PROMOS": "1"},
    setup=bm_setup, steps=[
        C("write_note", {"title": "Stand-up 15 January", "directory": "Daily", "content": "# Stand-up 15 January\n\n- Tom: pricing page copy ready for review.\n- Lena: contact form spam down 90 percent.\n- [decision] Launch date stays 15 February #website\n\n## Relations\n- relates_to [[Website relaunch]]\n", "tags": ["standup"]}),
        C("read_note", {"identifier": "Daily/stand-up-15-january"}),
        C("grep", {"pattern": "pricing"}),
        C("search_notes", {"query": "sourdough", "search_type": "text"}),
        C("read_content", {"path": "Recipes/Sourdough.md"}),
        C("list_directory", {"dir_name": "/", "depth": 2}),
        R("memory://ai_assistant_guide"),
        R("memory://man/search-notes(3)"),
        R("memory://man/write-note(3)"),
        P("search_knowledge_base", {"query": "pricing"}),
    ], normalize=[ISO, UUID],
)


def sweep_setup(d):
    F.write(d / "project", F.SWEEP_DOCS)


SERVERS["text-editor-sweep"] = dict(
    package="mcp-text-editor", version="1.2.2",
    cmd=[V + "mcp-text-editor/bin/mcp-text-editor"], setup=sweep_setup,
    steps=[C("get_text_file_contents", {"files": [{"file_path": "{data}/project/" + k, "ranges": [{"start": 1}]}]}) for k in F.SWEEP_DOCS],
)
SERVERS["markitdown-sweep"] = dict(
    package="markitdown-mcp", version="0.0.1a8",
    cmd=[V + "markitdown-mcp/bin/markitdown-mcp"], setup=sweep_setup,
    steps=[C("convert_to_markdown", {"uri": "file://{data}/project/" + k}) for k in F.SWEEP_DOCS],
)

SERVERS["dbhub-tickets"] = dict(
    package="@bytebase/dbhub", version="1.4.0",
    cmd=[NODE, f"{NM}/@bytebase/dbhub/dist/index.js", "--transport", "stdio", "--dsn", "sqlite://{data}/support.db"],
    setup=lambda d: F.tickets_db(d / "support.db"),
    steps=[
        C("execute_sql", {"sql": "SELECT id, customer, subject, status FROM tickets ORDER BY id"}),
        C("execute_sql", {"sql": "SELECT id, body FROM tickets WHERE id = 4821"}),
        C("execute_sql", {"sql": "SELECT id, body FROM tickets WHERE id = 4822"}),
        C("execute_sql", {"sql": "SELECT id, body FROM tickets WHERE id = 4823"}),
        C("execute_sql", {"sql": "SELECT id, body FROM tickets WHERE id = 4824"}),
        C("execute_sql", {"sql": "SELECT id, body FROM tickets WHERE id = 4825"}),
        C("execute_sql", {"sql": "SELECT * FROM tickets WHERE status = 'open'"}),
    ],
)


def vault_sweep_setup(d):
    v = F.vault(d)
    F.write(v, {"Sweep/" + k.replace("/", "_") + ".md": t for k, t in F.SWEEP_DOCS.items()})
    F.write(v, {"Sweep/" + k.replace("/", "_") + ".md": t for k, t in F.EXTRA_DOCS.items()})


SERVERS["mcp-obsidian-sweep"] = dict(
    package="mcp-obsidian", version="1.0.0",
    cmd=[NODE, f"{NM}/mcp-obsidian/dist/index.js", "{data}/vault"],
    setup=vault_sweep_setup,
    steps=[C("read_notes", {"paths": ["Sweep/" + k.replace("/", "_") + ".md"]}) for k in list(F.SWEEP_DOCS) + list(F.EXTRA_DOCS)]
          + [C("read_notes", {"paths": [k]}) for k in F.NOTES],
)
