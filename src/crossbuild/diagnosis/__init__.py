"""Diagnoses read from a build system's own records (issue 36): which call failed, where, what it looked for and
which of the project's switches govern it, whatever words the failure was printed in. Readers only: they run
nothing; the tool layer runs the build system again with its record on and hands the files here."""
