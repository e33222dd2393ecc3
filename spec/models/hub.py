"""The Hugging Face Hub, or a server that speaks its HTTP API (a mirror named by HF_ENDPOINT):
downloading a model's files (or finding them in the local cache) with progress, and asking whether
it can be reached at all."""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from spec.errors import Cancelled, ModelError
from spec.models.embedded import DEFAULT_REF
from spec.models.export import IR_XML
from spec.progress import Phase, ProgressFn, phase

StopFn = Callable[[], bool]  # True once nobody waits for the work any more

# huggingface_hub sends some requests (the repo's file list) with no timeout at all: a Hub that
# stops answering would hang a download for ever. Requests that set none get these seconds.
REQUEST_TIMEOUT_SECONDS = 10.0


def endpoint() -> str:
    """Where models come from: HF_ENDPOINT (a mirror), or https://huggingface.co."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def hub_name() -> str:
    """The Hub as messages name it: "the Hugging Face Hub", or the mirror HF_ENDPOINT names."""
    from huggingface_hub import constants

    return "the Hugging Face Hub" if endpoint() == constants._HF_DEFAULT_ENDPOINT else f"the Hub at {endpoint()}"


def reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub at `endpoint()` answers from here (HF_HUB_OFFLINE=1 counts as no).

    Any HTTP answer counts, even an error status: the server is there. The endpoint's own scheme,
    host and port are used, so a mirror on http://host:8080 is asked where it listens.
    """
    import httpx
    from huggingface_hub import constants

    if constants.is_offline_mode():
        return False
    try:
        httpx.head(endpoint() + "/", timeout=timeout)  # the home page: cheap to answer, even for a mirror
        return True
    except (httpx.HTTPError, ValueError):  # no answer in time, refused, or an endpoint that is no URL
        return False


def cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds `repo_id` (its config.json), so it works offline."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an id the cache cannot even look up is not cached
        return False


@dataclass(frozen=True)
class RepoFiles:
    """What the Hub says a model repository holds, before any of it is downloaded."""

    sizes: dict[str, int]  # top-level file -> bytes
    parameters: dict[str, int] | None  # dtype -> count, read by the Hub from safetensors headers; None if it gives none


def files(repo_id: str) -> RepoFiles:
    """Ask the Hub for `repo_id`'s files and their sizes (and its safetensors parameter count):
    one request, nothing downloaded. Offline, or with the Hub out of reach, the cached snapshot's
    files are weighed instead (the download then uses that snapshot too).
    Raises ModelError with the same sentences as `download`."""
    import httpx
    from huggingface_hub import HfApi, constants, snapshot_download

    def cached() -> RepoFiles:
        snapshot = Path(snapshot_download(repo_id, local_files_only=True))
        return RepoFiles({p.name: p.stat().st_size for p in snapshot.iterdir() if p.is_file()}, None)

    _bound_request_timeouts()
    with _sentences(repo_id, "asking about"):
        if constants.is_offline_mode():
            return cached()
        try:
            info = HfApi().model_info(repo_id, files_metadata=True, timeout=REQUEST_TIMEOUT_SECONDS)
        except (httpx.ConnectError, httpx.TimeoutException):  # the Hub out of reach: a cached copy is weighed, as it is used
            return cached()
        sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or () if "/" not in s.rfilename}
        parameters = getattr(info.safetensors, "parameters", None) or None
        return RepoFiles(sizes, dict(parameters) if parameters else None)


def download(repo_id: str, report: ProgressFn, only: list[str] | None = None, stopped: StopFn | None = None) -> Path:
    """Download (or find in the Hugging Face cache) the files of `repo_id` this app needs (`only`
    these, when the caller already chose them).

    A download cut off part-way resumes where it stopped (huggingface_hub asks for the rest with a
    Range header, up to five times); a Hub that stops answering for HF_HUB_DOWNLOAD_TIMEOUT seconds
    on each of those tries ends in a ModelError, never a hang. huggingface_hub keeps no partial file
    between calls: a later call downloads the file again from its start. Once `stopped()` says
    nobody waits for it any more, it stops with Cancelled at its next chunk.
    """
    from huggingface_hub import constants, snapshot_download

    _bound_request_timeouts()
    with _sentences(repo_id, "downloading"):
        with phase(report, f"Downloading {repo_id}") as progress:
            return Path(
                snapshot_download(repo_id, allow_patterns=only if only is not None else _files_to_fetch(repo_id),
                                  tqdm_class=_reporting_tqdm(progress, stopped), etag_timeout=constants.HF_HUB_ETAG_TIMEOUT)
            )


@contextlib.contextmanager
def _sentences(repo_id: str, doing: str) -> Iterator[None]:
    """huggingface_hub's and the network's errors as the sentence a user can act on (ModelError)."""
    import httpx
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        yield
    except GatedRepoError as e:
        raise ModelError(
            f"{repo_id} is gated: accept its license on {endpoint()}/{repo_id} and set HF_TOKEN "
            "to a read token of that account."
        ) from e
    except RepositoryNotFoundError as e:
        raise ModelError(
            f"{hub_name()} has no model {repo_id} (or it is private): check the spelling, set HF_TOKEN if it is "
            f"private, or use {DEFAULT_REF}."
        ) from e
    except LocalEntryNotFoundError as e:
        if constants.is_offline_mode():
            raise ModelError(
                f"{repo_id} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it: "
                f"set HF_HUB_OFFLINE=0 on a machine with network access, or use {DEFAULT_REF}."
            ) from e
        raise ModelError(
            f"Could not reach {hub_name()} to download {repo_id}, and it is not cached: check the "
            f"network connection, or use {DEFAULT_REF}."
        ) from e
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        if status in (401, 403):
            raise ModelError(
                f"{hub_name()} refused access to {repo_id} (HTTP {status}): set HF_TOKEN to a valid read token "
                "and accept the model's license on its page."
            ) from e
        raise ModelError(f"{hub_name()} failed while {doing} {repo_id} (HTTP {status}): try again later.") from e
    except httpx.TimeoutException as e:
        if doing != "downloading":
            raise ModelError(f"Could not reach {hub_name()} to ask about {repo_id}: it did not answer in time; "
                             "try again later.") from e
        raise ModelError(
            f"{hub_name()} stopped answering while {repo_id} was downloading: try again later "
            "(HF_HUB_DOWNLOAD_TIMEOUT sets how many seconds of silence give up a try)."
        ) from e
    except (httpx.HTTPError, OSError) as e:
        raise ModelError(
            f"{doing.capitalize()} {repo_id} from {hub_name()} failed ({type(e).__name__}): check the network connection "
            "and free disk space, then try again."
        ) from e


_bounded = False
_bounding = threading.Lock()  # two first downloads at once: one installs, and never closes the other's client


def _bound_request_timeouts() -> None:
    """Give every huggingface_hub request a timeout (once per process): its default HTTP client has
    none, and some calls (the repo's file list) pass none."""
    global _bounded
    with _bounding:
        if not _bounded:
            _install_bounded_client()
            _bounded = True


def _install_bounded_client() -> None:
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    def fill_timeouts(request) -> None:
        timeouts = request.extensions.get("timeout", {})
        request.extensions["timeout"] = {
            kind: REQUEST_TIMEOUT_SECONDS if seconds is None else seconds
            for kind, seconds in {"connect": None, "read": None, "write": None, "pool": None, **timeouts}.items()
        }

    def bounded_client():
        client = default_client_factory()
        client.event_hooks["request"].append(fill_timeouts)
        return client

    set_client_factory(bounded_client)


def _files_to_fetch(repo_id: str) -> list[str] | None:
    """The files of `repo_id` to download, or None (let snapshot_download decide) when the Hub
    cannot be asked, e.g. offline: the cached snapshot is then used as it is."""
    from huggingface_hub import HfApi, constants

    if constants.is_offline_mode():
        return None
    try:
        return pick_files(HfApi().list_repo_files(repo_id))
    except Exception:  # snapshot_download meets the same problem and reports it properly
        return None


def pick_files(files: list[str]) -> list[str]:
    """The top-level files this app uses: the IR if there is one, else one format of weights.

    Repos often carry ONNX, GGUF or Flax copies, or both .bin and .safetensors weights, which
    would multiply the download.
    """
    foreign = (".onnx", ".onnx_data", ".gguf", ".msgpack", ".h5", ".tflite", ".ot", ".pth", ".pt", ".ckpt")
    files = [f for f in files if "/" not in f and not f.endswith(foreign)]
    if IR_XML in files:
        return [f for f in files if not f.endswith((".safetensors", ".bin")) or f.startswith("openvino_")]
    if any(f.endswith(".safetensors") for f in files):
        return [f for f in files if not f.endswith(".bin")]
    return files


def _reporting_tqdm(progress: Phase, stopped: StopFn | None = None) -> type:
    """A tqdm class that forwards snapshot_download's byte count to `progress` instead of drawing,
    and stops the download (Cancelled, raised in the thread that downloads) once `stopped()`."""
    from tqdm.auto import tqdm

    class ReportingTqdm(tqdm):
        def __init__(self, *args, **kwargs):
            self._counts_bytes = kwargs.get("unit") == "B"  # the other bar counts files
            self._last_percent = -1
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> None:
            if not (self._counts_bytes and n):  # the files bar: updated from a done callback, where raising only logs
                return
            if stopped is not None and stopped():  # in the thread that downloads: it stops there
                raise Cancelled("nobody waits for this download any more")
            self.n += n
            # huggingface_hub grows `total` as each file starts, so the fraction can step back.
            fraction = min(self.n / self.total, 1.0) if self.total else None
            percent = int(fraction * 100) if fraction is not None else None
            if percent != self._last_percent:  # one call per percent, not per network chunk
                self._last_percent = percent
                progress.update(fraction)

    return ReportingTqdm
