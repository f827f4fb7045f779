"""The sandbox's error types: each message says what happened and what to do."""


class SandboxError(RuntimeError):
    """Base class for every sandbox failure a user can act on."""


class DockerUnavailable(SandboxError):
    pass


class ImageMissing(SandboxError):
    pass


class ImageBuildError(SandboxError):
    pass


class WorkspaceError(SandboxError):
    """The repository could not be turned into a workspace (bad path, unknown commit, disk full)."""


class CloneFailed(WorkspaceError):
    """A repository given by URL could not be cloned (offline, a typo, no access)."""


class SandboxDead(SandboxError):
    """The sandbox's container or shell is gone and could not be brought back."""


class PatchTooLarge(SandboxError):
    """The workspace's diff is over the size the caller would take; it was not read."""


def too_large_message(limit: int | None) -> str:
    return (f"the patch is over the cap of {limit:,} bytes (limits.max_patch_bytes); it was not read or "
            "stored. Raise the cap (--set limits.max_patch_bytes=N) if the change is meant to be that large")
