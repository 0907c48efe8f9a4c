"""Every tunable of the terminal app, in one place (the core's own defaults stay in its config)."""

from __future__ import annotations

TUI_POLL_SECONDS = 1.0  # how often the app checks PRAGMA data_version for commits by others
TUI_WRITER_POLL_SECONDS = 2.0  # how often it checks whether a daemon holds the writer lock
TUI_DRIFT_POLL_SECONDS = 30.0  # how often, with no daemon, it compares the folder with the index
TUI_SEARCH_PAUSE_SECONDS = 0.15  # typing pause before a live search runs
TUI_SEARCH_LIMIT = 30
TUI_PREVIEW_MAX_LINES = 300  # preview window; the next one loads as the reader scrolls down
TUI_PREVIEW_LINE_CHARS = 5000  # a longer line is cut in the preview (wrapping 1 MB froze the UI)
TUI_FOLDER_PAGE = 500  # tree entries added per folder page ("… N more" loads the next)
TUI_FOLDER_VIEW_PAGE = 100  # documents per page of the folder view ("… N more" loads the next)
# A search hit's snippet: at most this many rows of at most this many cells (CJK: 2 a character),
# so one long line or unbroken Chinese run cannot push the other hits out of the list.
TUI_SNIPPET_ROWS = 2
TUI_SNIPPET_COLUMNS = 60
