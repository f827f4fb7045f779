"""The patch after each of the agent's changes, newest last: what /undo steps back through."""

from __future__ import annotations

from dataclasses import dataclass

from ... import patches
from ...events import Event, Finished, PatchChanged


@dataclass(frozen=True)
class Change:
    """One change of the agent's: the patch before and after it (`step` None: not from a step)."""

    step: int | None
    before: str
    after: str

    @property
    def files(self) -> list[str]:
        return changed_files(self.before, self.after)


class PatchHistory:
    def __init__(self, patch: str = ""):
        self._patches: list[tuple[int | None, str]] = []
        self.reset(patch)

    def reset(self, patch: str = "") -> None:
        """Start over from `patch` (a new task, a resumed or selected one): nothing to undo."""
        self._patches = [(None, patch)]
        self.undone = 0  # changes undone since (a second /undo is told apart from no change at all)

    @property
    def current(self) -> str:
        return self._patches[-1][1]

    @property
    def can_undo(self) -> bool:
        return len(self._patches) > 1

    def observe(self, event: Event, steps: int) -> None:
        """Record the patch a step left (`steps`: how many have started)."""
        if isinstance(event, PatchChanged):
            self._patches.append((event.step, event.patch))
        elif isinstance(event, Finished) and event.patch != self.current:
            self._patches.append((max(steps - 1, 0), event.patch))

    def last_change(self) -> Change:
        (step, after), (_, before) = self._patches[-1], self._patches[-2]
        return Change(step, before, after)

    def drop_last(self) -> None:
        """Forget the last change (it was undone); the one before is current again."""
        if self.can_undo:
            self._patches.pop()
            self.undone += 1


def changed_files(before: str, after: str) -> list[str]:
    """The files whose part of the patch differs between two patches."""
    old, new = _file_sections(before), _file_sections(after)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def _file_sections(patch: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            files = patches.files(line)
            current = sections.setdefault(files[-1] if files else line, [])
        if current is not None:
            current.append(line)
    return {name: "".join(lines) for name, lines in sections.items()}
