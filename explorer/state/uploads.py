"""Uploaded files kept on disk, keyed by their graph's content hash, so that a reload, a second tab or a
shared link (``?model=<hash>``) on the same server finds them again.

Where: ``$REMAT_UPLOAD_DIR`` when set, else ``$XDG_CACHE_HOME/remat-explorer/uploads`` (``XDG_CACHE_HOME``
defaults to ``~/.cache``). Each upload is one file, ``<hash>.upload``: a line of JSON (the file's name, how
it was read, its size and SHA-256) followed by the file's bytes, written to a temporary file and renamed,
so that a reader never sees half a file. Reading an entry marks it used (its modification time).

Bounded: at most :data:`MAX_STORE_BYTES` and :data:`MAX_STORE_ENTRIES`; after each upload the least
recently used entries go first until both hold. A damaged entry (unreadable header, wrong size or
checksum) is removed and reported as such; the user uploads the file again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from remat_core import GraphError

LOG = logging.getLogger(__name__)

UPLOAD_DIR_VARIABLE = "REMAT_UPLOAD_DIR"
MAX_STORE_BYTES = 2 * 2**30
"""The store's size limit (2 GiB, at least 32 uploads of the largest size the explorer reads)."""
MAX_STORE_ENTRIES = 256
SUFFIX = ".upload"
FORMAT = "remat-explorer-upload"
STALE_INCOMING_SECONDS = 3600
_KEY = re.compile(r"^[0-9a-f]{64}$")
_MAX_HEADER_BYTES = 64 * 2**10


def is_upload_key(text: str) -> bool:
    """Whether ``text`` has the shape of a content hash (64 lowercase hex digits)."""
    return bool(_KEY.match(text))


def default_upload_dir() -> Path:
    """``$REMAT_UPLOAD_DIR``, else ``$XDG_CACHE_HOME/remat-explorer/uploads`` (``~/.cache`` by default)."""
    if os.environ.get(UPLOAD_DIR_VARIABLE):
        return Path(os.environ[UPLOAD_DIR_VARIABLE]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "remat-explorer" / "uploads"


@dataclass(frozen=True)
class StoredUpload:
    """An uploaded file and how it was read (see :func:`explorer.state.models.model_from_upload`)."""

    name: str
    data: bytes
    add_backward: bool
    level: str


class UploadStore:
    """Uploads on disk by content hash, bounded in bytes and entries (least recently used out first)."""

    def __init__(self, root: Path, max_bytes: int = MAX_STORE_BYTES, max_entries: int = MAX_STORE_ENTRIES):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.max_entries = max_entries

    def path(self, key: str) -> Path:
        if not is_upload_key(key):
            raise GraphError(f"{key!r} is not an upload's content hash (64 hexadecimal digits)")
        return self.root / f"{key}{SUFFIX}"

    def put(self, key: str, upload: StoredUpload) -> bool:
        """Keep ``upload`` under ``key``; False (nothing kept) when it alone is larger than the store.

        Raises
        ------
        OSError
            When the folder cannot be written (the caller says the upload lasts for this tab only).
        """
        header = json.dumps({"format": FORMAT, "name": upload.name, "add_backward": upload.add_backward,
                             "level": upload.level, "size": len(upload.data),
                             "sha256": hashlib.sha256(upload.data).hexdigest()}).encode() + b"\n"
        if len(header) + len(upload.data) > self.max_bytes:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.path(key)
        handle, temporary = tempfile.mkstemp(dir=self.root, prefix=".incoming-", suffix=SUFFIX)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(header)
                out.write(upload.data)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.evict(keep=key)
        return True

    def get(self, key: str) -> StoredUpload | None:
        """The upload kept under ``key`` (marked as used), or None when there is none.

        Raises
        ------
        GraphError
            For a damaged entry (removed, so that the next upload of the file replaces it).
        """
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            upload = _parse(raw)
        except ValueError as e:
            LOG.warning("removing the damaged stored upload %s: %s", path, e)
            path.unlink(missing_ok=True)
            raise GraphError(f"the upload stored as {key[:12]}… on this server is damaged ({e}); upload the file "
                             f"again") from None
        try:
            os.utime(path)
        except FileNotFoundError:  # evicted meanwhile by another session: it was read whole all the same
            pass
        return upload

    def keys(self) -> list[str]:
        """The keys kept, least recently used first."""
        return [p.name[: -len(SUFFIX)] for p in self._entries()]

    def evict(self, keep: str | None = None) -> None:
        """Remove the least recently used entries (never ``keep``) until the bounds hold, and what an
        interrupted upload left behind an hour ago or more."""
        for leftover in self.root.glob(f".incoming-*{SUFFIX}"):
            if _mtime(leftover) < time.time() - STALE_INCOMING_SECONDS:
                leftover.unlink(missing_ok=True)
        entries = self._entries()
        sizes = {p: _size(p) for p in entries}
        total, count = sum(sizes.values()), len(entries)
        for path in entries:
            if total <= self.max_bytes and count <= self.max_entries:
                break
            if keep is not None and path.name == f"{keep}{SUFFIX}":
                continue
            path.unlink(missing_ok=True)
            total, count = total - sizes[path], count - 1

    def _entries(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        found = [p for p in self.root.iterdir() if p.suffix == SUFFIX and is_upload_key(p.name[: -len(SUFFIX)])]
        return sorted(found, key=_mtime)


def _parse(raw: bytes) -> StoredUpload:
    """An entry's bytes back into the upload; ValueError saying what is wrong with them."""
    end = raw.find(b"\n", 0, _MAX_HEADER_BYTES)
    if end < 0:
        raise ValueError("no header line")
    try:
        header = json.loads(raw[:end])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("the header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("the header is not an upload's")
    data = raw[end + 1:]
    if header.get("size") != len(data) or header.get("sha256") != hashlib.sha256(data).hexdigest():
        raise ValueError("its bytes do not match the size and checksum recorded with them")
    name, add_backward, level = header.get("name"), header.get("add_backward"), header.get("level")
    if not isinstance(name, str) or not isinstance(add_backward, bool) or not isinstance(level, str):
        raise ValueError("the header lacks the file's name or how it was read")
    return StoredUpload(name, data, add_backward, level)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def upload_store() -> UploadStore:
    """The store at :func:`default_upload_dir` with the default bounds."""
    return UploadStore(default_upload_dir())
