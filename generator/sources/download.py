"""HTTP downloads with timeouts, retries with backoff, a progress bar, and no partial files.

A download is written to ``<name>.part`` beside its destination and renamed into place only
when it is complete (the byte count matches ``Content-Length`` when the server sends one), so a
broken or interrupted transfer never leaves a file that a later run would use. A download larger
than ``max_bytes`` (announced or received) is stopped and refused: a llama.cpp archive is about
25 MB, an sdist about 60 MB.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter
from tqdm import tqdm
from urllib3.util.retry import Retry

from generator.errors import SourceError
from generator.progress import live

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
_CHUNK = 1 << 16
MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024


def make_session(retries: int = 3, backoff_s: float = 0.5) -> requests.Session:
    """A session that retries connection errors and 429/5xx answers with exponential backoff."""
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=backoff_s,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD"}),
        raise_on_status=False,
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = "llama-bindgen"
    return session


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 error chain, short enough for one line."""
    inner: BaseException = exc
    while True:
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    text = str(inner).split(": ", 1)[-1] if "Errno" in str(inner) else str(inner)
    return text if len(text) <= 160 else text[:157] + "..."


def download(
    url: str,
    dest: Path,
    session: requests.Session | None = None,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
) -> Path:
    """Download ``url`` to ``dest`` atomically; raise :class:`SourceError` on any failure."""
    sess = session or make_session()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with sess.get(url, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)) as resp:
            if resp.status_code != 200:
                raise SourceError(f"GET {url}: HTTP {resp.status_code}")
            length_header = resp.headers.get("Content-Length")
            expected = int(length_header) if length_header and length_header.isdigit() else None
            if expected is not None and expected > max_bytes:
                raise SourceError(
                    f"GET {url}: {expected} bytes announced, over the {max_bytes} limit"
                )
            received = 0
            with (
                part.open("wb") as fh,
                tqdm(
                    total=expected,
                    unit="B",
                    unit_scale=True,
                    desc=dest.name,
                    file=sys.stderr,
                    disable=not live(),
                    leave=False,
                ) as bar,
            ):
                for chunk in resp.iter_content(_CHUNK):
                    received += len(chunk)
                    if received > max_bytes:
                        raise SourceError(f"GET {url}: more than {max_bytes} bytes, refused")
                    fh.write(chunk)
                    bar.update(len(chunk))
            if expected is not None and received != expected:
                raise SourceError(f"GET {url}: transfer ended after {received} of {expected} bytes")
        os.replace(part, dest)
    except requests.ConnectionError as exc:
        raise SourceError(f"GET {url}: cannot connect ({_root_cause(exc)})") from exc
    except requests.RequestException as exc:
        raise SourceError(f"GET {url}: {type(exc).__name__}: {_root_cause(exc)}") from exc
    finally:
        part.unlink(missing_ok=True)
    return dest
