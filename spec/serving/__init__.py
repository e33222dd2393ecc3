"""Serving the Space: the race between the two methods, visitors and the waiting room, the presets
the page offers. Built on the decoding side; knows nothing about the UI library that renders it."""
