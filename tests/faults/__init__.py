"""``python -m tests.faults``: the fault harness. Every file the project writes is tried with
a full disk, a kill mid-write, a read-only folder and damage before the next read; every
file it reads back is tried truncated, as garbage, in a valid format with the wrong
contents and as an earlier version wrote it. Each case runs as the command line runs it, on
copies of a small workspace of tiny runs, and ends in one of: ``one-line`` (one
``error:`` line, nothing good damaged), ``correct`` (exit 0 with the right outputs),
``vague one-line`` (one line that names neither the file nor its folder), ``lost or
silently wrong`` (a good file changed, missing or half-written, debris left behind, a wrong
result reported as success, or a next normal command that no longer works), ``hang`` and
``traceback``.

Modules: :mod:`~tests.faults.cases` (the categories and the choice of cases; their
definitions in ``cases_read``, ``cases_write`` and ``cases_older``), :mod:`~tests.faults.
readers` (the commands that read a file back and how their results are judged),
:mod:`~tests.faults.workspace` (the tiny runs), :mod:`~tests.faults.harness` (running and
judging one case), :mod:`~tests.faults.outcomes` (the classifier), :mod:`~tests.faults.files`
(digests, damage, debris), :mod:`~tests.faults.mounts` (full and read-only folders),
:mod:`~tests.faults.inject` (faults inside the process), :mod:`~tests.faults.killer` (a
command that kills itself mid-write) and :mod:`~tests.faults.report`.
"""
