"""A test Hub: a local HTTP server that speaks the part of the Hugging Face Hub's API that
huggingface_hub's `snapshot_download` uses, so the project downloads from it through HF_ENDPOINT
exactly as it would from huggingface.co or a mirror.

It serves folders the tests build (an OpenVINO IR, a Transformers checkpoint) as repos, and repos
that only claim their files' sizes (`claim`: a 150 GB model in 30 shards costs nothing to serve):
- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: the repo's info, with its
  commit sha and file list (siblings); with `?blobs=true` (`model_info(files_metadata=True)`) each
  file's size (and its LFS pointer for weights), and for safetensors weights the parameter count
  per dtype the Hub reads from their headers (`safetensors.parameters`, `.total`);
- `GET /api/models/{repo}/tree/{rev}`: the file list as `list_repo_files` reads it;
- `HEAD` / `GET /{repo}/resolve/{rev}/{file}`: the file, with ETag, X-Repo-Commit and
  Content-Length; a large file (weights, kept in LFS on the Hub) is a redirect that carries its
  X-Linked-Etag and X-Linked-Size, to where its bytes are served; a `Range: bytes=N-` request is
  answered 206 with the rest.

And it misbehaves on demand: a gated repo (401 without a token, 403 with one, X-Error-Code
GatedRepo), a missing one (404, X-Error-Code RepoNotFound), a file cut off after N bytes once (the
connection closes, so the client must resume with Range), and a file that stops after N bytes and
never sends more, or a repo whose info never comes (the client must give up). It listens on 127.0.0.1, on a free port.
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

_API = re.compile(r"^/api/models/(?P<repo>[^/?]+/[^/?]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/?]+))?/?(?:\?.*)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>[^?]+)(?:\?.*)?$")
_CDN = re.compile(r"^/cdn/(?P<repo>[^/]+/[^/]+)/(?P<file>[^?]+)(?:\?.*)?$")  # where large files are redirected
LARGE_FILES = (".bin", ".safetensors")  # kept in LFS on the Hub: `resolve` answers with a redirect


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str  # the commit every revision of this repo resolves to
    gated: bool = False
    claimed: dict[str, int] = field(default_factory=dict)  # files listed with a size but no bytes (zeros if fetched)
    bytes_per_second: float | None = None  # how fast a claimed file's zeros are sent (None: as fast as they go)
    parameters: dict[str, int] | None = None  # dtype -> count, as the Hub reads it from safetensors headers

    def size(self, name: str) -> int:
        return len(self.files[name]) if name in self.files else self.claimed[name]


_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def _safetensors_parameters(files: dict[str, bytes]) -> dict[str, int] | None:
    """What the Hub shows as a repo's `safetensors.parameters`: its tensors' elements per dtype."""
    counts: dict[str, int] = {}
    for name, data in files.items():
        if not name.endswith(".safetensors"):
            continue
        try:
            (length,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8:8 + length])
        except (struct.error, ValueError):  # the Hub gives no count for a file it cannot read
            continue
        for tensor, info in header.items():
            if tensor != "__metadata__":
                elements = 1
                for dim in info["shape"]:
                    elements *= dim
                counts[info["dtype"]] = counts.get(info["dtype"], 0) + elements
    return counts or None


@dataclass
class Fault:
    after_bytes: int  # the file's bytes sent before it goes wrong (an answer to a Range request sends fewer)
    times: int | None  # how many GETs it spoils (None: every one)
    stall: bool  # True: stop sending and wait; False: close the connection


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorized: bool


class TestHub:
    """`with TestHub() as hub: hub.add("owner/name", folder); ... hub.url`"""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.faults: dict[tuple[str, str], Fault] = {}
        self.requests: list[Request] = []
        self._release = threading.Event()  # wakes stalled answers when the server stops
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="test hub", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo_id: str, folder: Path, gated: bool = False) -> str:
        """Serve the top-level files of `folder` as `repo_id`; returns its commit sha."""
        files = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}
        digest = hashlib.sha1(repo_id.encode())
        for name, data in files.items():
            digest.update(name.encode() + hashlib.sha256(data).digest())
        self.repos[repo_id] = Repo(files, digest.hexdigest(), gated, parameters=_safetensors_parameters(files))
        return self.repos[repo_id].sha

    def claim(self, repo_id: str, sizes: dict[str, int], parameters: dict[str, int] | None = None,
              files: dict[str, bytes] | None = None, bytes_per_second: float | None = None) -> str:
        """Serve `repo_id` listing files of the given `sizes` that it never has to hold (a GET of one
        streams zeros, at `bytes_per_second` if given), beside small real `files` (a config.json);
        `parameters` (dtype -> count) is what the Hub would read from the safetensors headers."""
        files = dict(files or {})
        digest = hashlib.sha1(repo_id.encode() + json.dumps(sorted(sizes.items())).encode())
        self.repos[repo_id] = Repo(files, digest.hexdigest(), claimed=dict(sizes), parameters=parameters,
                                   bytes_per_second=bytes_per_second)
        return self.repos[repo_id].sha

    def cut_off(self, repo_id: str, filename: str, after_bytes: int, times: int = 1) -> None:
        """The next `times` GETs of the file close the connection at byte `after_bytes` of the file."""
        self.faults[(repo_id, filename)] = Fault(after_bytes, times, stall=False)

    def stall(self, repo_id: str, filename: str | None, after_bytes: int = 0) -> None:
        """Every GET of the file stops at byte `after_bytes` of the file and sends nothing more, without
        closing; with `filename` None, the repo's info and file list never answer."""
        self.faults[(repo_id, filename)] = Fault(after_bytes, None, stall=True)

    def mend(self) -> None:
        """No more faults: the server behaves again."""
        self.faults.clear()

    def gets(self, filename: str) -> list[Request]:
        """The GETs of `filename` so far, in order."""
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + filename)]

    def __enter__(self) -> "TestHub":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _fault(self, repo_id: str, filename: str) -> Fault | None:
        with self._lock:
            fault = self.faults.get((repo_id, filename))
            if fault is None or fault.times == 0:
                return None
            if fault.times is not None:
                fault.times -= 1
            return fault


def _handler(hub: TestHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args) -> None:  # quiet: pytest shows failures, not access logs
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            authorized = self.headers.get("Authorization", "").startswith("Bearer ")
            with hub._lock:
                hub.requests.append(Request(self.command, self.path, self.headers.get("Range"), authorized))
            if api := _API.match(self.path):
                self._api(api["repo"], api["kind"], body)
            elif resolve := _RESOLVE.match(self.path):
                self._resolve(resolve["repo"], resolve["file"], authorized, body)
            elif cdn := _CDN.match(self.path):
                self._file(cdn["repo"], cdn["file"], body)
            else:
                self._error(404, "EntryNotFound", body)

        def _repo(self, repo_id: str, body: bool) -> Repo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", body)
            return repo

        def _api(self, repo_id: str, kind: str | None, body: bool) -> None:
            if hub._fault(repo_id, None):
                hub._release.wait()  # until the server stops: the client must give up first
                return
            repo = self._repo(repo_id, body)
            if repo is None:
                return
            names = [*repo.files, *repo.claimed]
            if kind == "tree":
                info = [{"type": "file", "path": name, "size": repo.size(name), "oid": self._oid(repo, name)} for name in names]
            else:  # like the Hub, a gated repo's info is public; its files are not
                info = {"id": repo_id, "modelId": repo_id, "sha": repo.sha, "private": False,
                        "gated": "manual" if repo.gated else False, "siblings": [{"rfilename": n} for n in names]}
                if parse_qs(urlsplit(self.path).query).get("blobs", [""])[0].lower() == "true":
                    info["siblings"] = [self._blob(repo, name) for name in names]
                if repo.parameters:
                    info["safetensors"] = {"parameters": repo.parameters, "total": sum(repo.parameters.values())}
            self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)

        @staticmethod
        def _oid(repo: Repo, name: str) -> str:
            return hashlib.sha1(repo.files[name] if name in repo.files else name.encode()).hexdigest()

        def _blob(self, repo: Repo, name: str) -> dict:
            """A file as `?blobs=true` lists it: its size, and for weights (in LFS) the pointer's."""
            sibling = {"rfilename": name, "blobId": self._oid(repo, name), "size": repo.size(name)}
            if name.endswith(LARGE_FILES):
                sha256 = hashlib.sha256(repo.files[name] if name in repo.files else name.encode()).hexdigest()
                sibling["lfs"] = {"sha256": sha256, "size": repo.size(name), "pointerSize": 134}
            return sibling

        def _resolve(self, repo_id: str, filename: str, authorized: bool, body: bool) -> None:
            repo = self._repo(repo_id, body)
            if repo is None:
                return
            if repo.gated:
                self._error(403 if authorized else 401, "GatedRepo", body)
                return
            if filename in repo.claimed:
                self._claimed(repo, filename, body)
                return
            data = repo.files.get(filename)
            if data is None:
                self._error(404, "EntryNotFound", body)
                return
            if filename.endswith(LARGE_FILES):  # as the Hub does for LFS files: the file's own headers, then a redirect
                headers = {"Location": f"{hub.url}/cdn/{repo_id}/{filename}", "X-Repo-Commit": repo.sha,
                           "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"', "X-Linked-Size": str(len(data)),
                           "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}
                self._send(302, b"", headers, body)
                return
            self._file(repo_id, filename, body, {"X-Repo-Commit": repo.sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})

        def _claimed(self, repo: Repo, filename: str, body: bool) -> None:
            """A file the repo only claims: its headers, then zeros until the client stops reading."""
            size = repo.claimed[filename]
            self.send_response(200)
            for name, value in {"Content-Length": str(size), "X-Repo-Commit": repo.sha, "ETag": f'"{self._oid(repo, filename)}"',
                                "Content-Type": "application/octet-stream"}.items():
                self.send_header(name, value)
            self.end_headers()
            chunk, sent = bytes(64 * 1024 if repo.bytes_per_second is None else 16 * 1024), 0
            while body and sent < size and not hub._release.is_set():
                try:
                    self.wfile.write(chunk[:size - sent])
                    self.wfile.flush()
                except OSError:  # the client stopped reading
                    return
                sent += len(chunk)
                if repo.bytes_per_second:
                    hub._release.wait(len(chunk) / repo.bytes_per_second)

        def _file(self, repo_id: str, filename: str, body: bool, headers: dict[str, str] | None = None) -> None:
            """The file's bytes, or the rest of them from a `Range: bytes=N-`, with the faults asked for."""
            data = hub.repos[repo_id].files[filename]
            headers = {**(headers or {}), "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            start = 0
            if (asked := re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))) and body:
                start = int(asked[1])
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            fault = hub._fault(repo_id, filename) if body else None
            # A fault strikes at its byte of the file, wherever this answer starts.
            self._send(206 if start else 200, data[start:], headers, body, fault and max(fault.after_bytes - start, 0), fault)

        def _error(self, status: int, code: str, body: bool) -> None:
            message = json.dumps({"error": code}).encode()
            self._send(status, message, {"X-Error-Code": code, "Content-Type": "application/json"}, body)

        def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool, good_bytes: int | None = None,
                  fault: Fault | None = None) -> None:
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(name, value)
            self.end_headers()
            if not body:
                return
            if fault is None:
                self.wfile.write(data)
                return
            self.wfile.write(data[:good_bytes])
            self.wfile.flush()
            if fault.stall:
                hub._release.wait()  # until the server stops: the client must give up first
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # the client sees the body end early

    return Handler
