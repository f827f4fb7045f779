"""The diff panel's highlighting: each file's language colours its code, changed lines are tinted
for the theme's background, and a theme switch redraws it."""

from __future__ import annotations

from codeagent.tui.diff_panel import TINTS, diff_content
from tests.support.tui import PATCH, settle, sync
from tests.support.tui import screen_app as make_app

OTHER = """diff --git a/notes.unknownext b/notes.unknownext
--- a/notes.unknownext
+++ b/notes.unknownext
@@ -1 +1 @@
-def old
+raise new
"""


def styles_at(content, needle: str, nth: int = 0):
    start = -1
    for _ in range(nth + 1):
        start = content.plain.index(needle, start + 1)
    return [span.style for span in content.spans if span.start <= start < span.end]


def luminance(color) -> float:
    return (0.2126 * color.r + 0.7152 * color.g + 0.0722 * color.b) / 255


def test_code_is_coloured_by_its_language_and_changed_lines_are_tinted():
    for dark in (True, False):
        content = diff_content(PATCH + OTHER, dark=dark)
        keyword, = styles_at(content, "raise ValueError")  # an added line of a .py file
        name, = styles_at(content, "quantity > line")
        assert keyword.foreground is not None and keyword.foreground != name.foreground
        assert keyword.background == name.background is not None  # the whole line tinted
        assert (luminance(keyword.background) < 0.3) == dark  # dark tint on a dark theme, light on a light one
        context = styles_at(content, "line = self._lines[sku]")  # an unchanged line: coloured, not tinted
        assert all(style.background is None for style in context)
        plain, = styles_at(content, "raise new")  # a language nobody knows: tinted, not coloured
        assert plain.foreground is None and plain.background is not None
        assert styles_at(content, "@@ -18,5")[0].foreground is not None
    assert TINTS[True] != TINTS[False]


@sync
async def test_the_panel_follows_the_theme():
    app, session = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        app._set_patch(PATCH)
        await settle(pilot)
        body = app.diff._body
        dark_tint = styles_at(body.visual, "raise ValueError")[0].background
        app.theme = "textual-light"
        await settle(pilot)
        light_tint = styles_at(body.visual, "raise ValueError")[0].background
        assert luminance(dark_tint) < 0.3 < 0.7 < luminance(light_tint)
