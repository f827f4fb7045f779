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


class SandboxDead(SandboxError):
    """The sandbox's container or shell is gone and could not be brought back."""
