"""Running sweeps: the parameter table and plan, the event stream, the worker client, the session."""
