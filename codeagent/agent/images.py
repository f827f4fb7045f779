"""Images the user attaches (`--image`, a path pasted in the TUI) to a message.

A message carries an image as a one-line marker, `[image sha256:HEX image/png 12345 bytes]`; the bytes
are kept once, by hash, in the trajectory store's `images/` folder. So the trajectory records the
image by hash, type and size (not megabytes of base64 in every saved message), a resumed session
finds it again, and only the request sent to the model holds the bytes: `inline()` turns a user
message's markers into OpenAI/litellm content parts (text, then `image_url` data URLs).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..models.tokens import message_text
from ..private_dirs import ensure_private

MAX_BYTES = 5 * 1024 * 1024  # the smallest per-image limit of the big providers (Anthropic: 5 MB)
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MARKER = re.compile(r"\[image sha256:([0-9a-f]{64}) (image/(?:png|jpeg|gif|webp)) (\d+) bytes\]")


class ImageError(ValueError):
    """A file that cannot be attached (one line, for the user)."""


@dataclass(frozen=True)
class StoredImage:
    sha256: str
    media_type: str
    size: int

    @property
    def marker(self) -> str:
        return f"[image sha256:{self.sha256} {self.media_type} {self.size} bytes]"


def sniff(data: bytes) -> str | None:
    """The image type from the file's first bytes (not from its name)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_dir(store_root: str | Path) -> Path:
    return Path(store_root) / "images"


def store_image(path: str | Path, store_root: str | Path) -> StoredImage:
    """Check a file the user gave and keep its bytes by hash; ImageError says what is wrong."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise ImageError(f"{path}: no such file" if not source.exists() else f"{path}: not a regular file")
    size = source.stat().st_size
    if size > MAX_BYTES:
        raise ImageError(f"{path}: {size / 1024 / 1024:.1f} MiB, more than the {MAX_BYTES // 1024 // 1024} MiB "
                         "an image may have; scale it down")
    data = source.read_bytes()[: MAX_BYTES + 1]
    media_type = sniff(data)
    if media_type is None:
        raise ImageError(f"{path}: not a PNG, JPEG, GIF or WebP image")
    image = StoredImage(hashlib.sha256(data).hexdigest(), media_type, len(data))
    folder = image_dir(store_root)
    ensure_private(folder)
    target = folder / f"{image.sha256}.{EXTENSIONS[media_type]}"
    if not target.exists():
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    return image


def attach(text: str, images: list[StoredImage]) -> str:
    return "\n".join([text.rstrip(), *(image.marker for image in images)]) if images else text


def inline(messages: list[dict], store_root: str | Path) -> list[dict]:
    """The request's copy of the messages: a user message with image markers becomes content parts.
    A marker whose bytes are missing or altered stays text, with a note saying so."""
    result = []
    for message in messages:
        text = message_text(message.get("content")) if message.get("role") == "user" else ""
        found = MARKER.findall(text)
        if not found:
            result.append(message)
            continue
        parts: list[dict] = []
        for sha256, media_type, _size in dict.fromkeys(found):
            data = _load(image_dir(store_root) / f"{sha256}.{EXTENSIONS[media_type]}", sha256)
            if data is None:
                text += f"\n(the image {sha256[:12]} is not available any more)"
                continue
            url = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        result.append({**message, "content": [{"type": "text", "text": text}, *parts]})
    return result


def _load(path: Path, sha256: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256 else None
