"""What the experiment's scripts share: a file's SHA-256, and the decision records
of `portcullis eval` (run 0, scored)."""
import hashlib
import json


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def decisions(paths):
    """Each scored decision record of the first pass over the corpus, in file order."""
    for path in paths:
        with open(path) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("kind") == "decision" and r.get("run") == 0 and r.get("outcome") == "ok":
                    yield r
