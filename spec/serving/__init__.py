"""Serving the Space: the race between the two methods, visitors and the line of races, the presets
the page offers. Built on the decoding side; knows nothing about the UI library that renders it.

A visitor's race passes through these modules in this order:
- `requests`: the visitor's values, checked, become a RaceRequest for one of the `presets`;
- `scheduler`: one computation per distinct race, in line; its worker checks the prompt (`limits`),
  loads the pair (`loading`), runs the `race` (two `lanes` taking turns, judged by the `verdict`)
  and writes each step into the race's `recording`, kept for replay once done (`store`);
- `playback`: one viewer's view of that recording, at the race's own pace;
- `numbers`: the race as JSON, for the API (and `python -m spec race --json`).
`phases` names where a race stands and how a visitor sees it. Beside the race: `sessions` (each
visitor's Stop), `warmup` (before the first visitor), `audience` (the room view), `settings`,
`examples` and `prepare`.
"""
