"""The errors of task sources: each message names the source, the row and the field, and says what to do."""


class DatasetError(ValueError):
    """A dataset that cannot be found, read or trusted; the message says what to do."""


class TaskFormatError(DatasetError):
    """A task file or row that is not in the format it claims (the message names file, row and field)."""
