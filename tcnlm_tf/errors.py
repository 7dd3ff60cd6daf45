"""User-facing errors and the one way command-line entry points report them.

Anything a user can cause (a missing corpus, a malformed line, an invalid flag combination)
raises :class:`UserError` with a one-line message that says what was wrong, where, and what
to do. Command-line ``main`` functions are wrapped with :func:`exit_on_user_error`, which
prints ``error: <message>`` to stderr and exits with status 2 instead of a traceback.
"""
from __future__ import annotations

import errno
import functools
import sys
from typing import Callable, TypeVar

EXIT_USER_ERROR = 2
#: filesystem errors a user fixes (space, permissions, a path that is a file or read-only):
#: reported as one line naming the path, like a UserError
FILESYSTEM_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                     errno.ENOTDIR, errno.EISDIR, errno.EEXIST}

F = TypeVar("F", bound=Callable[..., object])


class UserError(Exception):
    """An error caused by input or flags, reported to the user as one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def exit_on_user_error(main: F) -> F:
    """Decorate a CLI ``main`` so a :class:`UserError` becomes one stderr line and exit 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(EXIT_USER_ERROR) from None
        except OSError as err:
            if err.errno not in FILESYSTEM_ERRNOS:
                raise
            where = f" {err.filename}" if err.filename else ""
            print(f"error: cannot write{where}: {err.strerror}; free space, fix the "
                  "permissions or choose another --runs-dir/--output-dir; a run's newest "
                  "complete checkpoint is kept for --resume", file=sys.stderr)
            raise SystemExit(EXIT_USER_ERROR) from None
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise SystemExit(130) from None

    return wrapper  # type: ignore[return-value]
