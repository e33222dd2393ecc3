"""Tools people run to check the Space itself, each `python -m bench.tools.NAME` (`--help` for options).

- `served`: what serving costs a race, each lane served through the page against the same run alone;
- `workshop`: a workshop arriving at the page, how long each visitor waits and how each race ends;
- `soak`: clients racing through the queue for minutes, nothing lost, memory bounded;
- `examples`: the page's examples raced as the page races them;
- `image`: the Docker image built and run as a Space runs it, its size and start-up;
- `screenshot`: the README's picture, from the real page.

`served_app` is what they share: the app started on a free port, its page's settings, a race asked for as a click asks.
"""
