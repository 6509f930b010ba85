"""A real git server on loopback for the repository tests: `git http-backend` (smart HTTP,
the protocol GitHub and every other host speak) behind a small HTTP server that checks HTTP
Basic credentials the way GitHub does for tokens (any user name, the token as password).

Repositories under `forbidden/` answer 403 to everyone; a missing repository gets
http-backend's own 404. `GitServer.tokens` are the tokens accepted. Every token seen is
kept, so tests can check which one a clone used."""

import base64
import os
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def git(*args, cwd=None):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


class GitServer:
    def __init__(self, tokens: set):
        self.tokens = tokens
        self.seen_tokens = []
        self.paths = []
        self.root = tempfile.mkdtemp(prefix="mast-git-")
        backend = os.path.join(git("--exec-path"), "git-http-backend")
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def refuse(self, status, extra=()):
                self.send_response(status)
                for k, v in extra:
                    self.send_header(k, v)
                self.send_header("content-length", "0")
                self.end_headers()

            def handle_git(self):
                outer.paths.append(self.path)
                auth = self.headers.get("authorization", "")
                given = None
                if auth.startswith("Basic "):
                    given = base64.b64decode(auth[6:]).decode().partition(":")[2]
                    outer.seen_tokens.append(given)
                if given not in outer.tokens:
                    return self.refuse(401, [("WWW-Authenticate", 'Basic realm="git"')])
                path, _, query = self.path.partition("?")
                if path.startswith("/forbidden/"):
                    return self.refuse(403)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                env = dict(os.environ, GIT_PROJECT_ROOT=outer.root, GIT_HTTP_EXPORT_ALL="1",
                           PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                           CONTENT_TYPE=self.headers.get("content-type", ""),
                           CONTENT_LENGTH=str(len(body)), REMOTE_USER="token", REMOTE_ADDR="127.0.0.1",
                           GATEWAY_INTERFACE="CGI/1.1", HTTP_GIT_PROTOCOL=self.headers.get("git-protocol", ""))
                out = subprocess.run([backend], input=body, env=env, capture_output=True).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode().split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.strip().split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = handle_git
            do_POST = handle_git

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def make_repo(self, name: str) -> dict:
        """A bare repository `name` with two commits on `main` and a `feature` branch; the
        commit ids by role."""
        work = tempfile.mkdtemp(prefix="mast-git-work-")
        git("init", "-q", "-b", "main", work)
        with open(os.path.join(work, "README"), "w") as f:
            f.write("first version\n")
        git("add", ".", cwd=work)
        git("commit", "-q", "-m", "one", cwd=work)
        first = git("rev-parse", "HEAD", cwd=work)
        with open(os.path.join(work, "README"), "w") as f:
            f.write("second version\n")
        git("commit", "-q", "-am", "two", cwd=work)
        second = git("rev-parse", "HEAD", cwd=work)
        git("checkout", "-q", "-b", "feature", first, cwd=work)
        with open(os.path.join(work, "feature.txt"), "w") as f:
            f.write("on the feature branch\n")
        git("add", ".", cwd=work)
        git("commit", "-q", "-m", "feature", cwd=work)
        bare = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        git("clone", "-q", "--bare", work, bare)
        git("symbolic-ref", "HEAD", "refs/heads/main", cwd=bare)
        return {"first": first, "second": second, "url": f"{self.base}/{name}"}

    def close(self):
        self.httpd.shutdown()
