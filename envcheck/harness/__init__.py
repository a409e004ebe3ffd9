"""The one way envcheck starts a child: a Python target through ``spawn``, any other program through
``command.run``. Kept empty: the child imports it first, without site-packages for the NVML child."""
