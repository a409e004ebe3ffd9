"""The one way envcheck starts a child: a Python target through ``spawn`` (spawn.py, its protocol in
messages.py), any other program through ``command.run``. Kept empty: the child imports this package
before anything else, without site-packages in the NVML child's case."""
