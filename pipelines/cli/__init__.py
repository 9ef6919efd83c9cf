"""The ``zerda-rechunk`` command: arguments, pipeline options, the launch and the end-of-run summary."""
