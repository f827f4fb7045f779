"""A tiny image file's bytes (a PNG header: enough for the checks that read a type and a size)."""

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
