"""Run a sweep, and the sweep protocol both processes share: the parameter table and plan (``params``, ``plan``),
the event stream (``events``), the rows a test starts from (``rows``), the worker client and the session that
commits each row (``client``, ``job_client``, ``session``), and ``sweep_setup``, what the CLI and the window
share to start one. The feature packages (calibrate, choose, quality, quantize, remote) build on it.
"""
