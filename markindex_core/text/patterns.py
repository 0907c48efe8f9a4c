"""Text patterns the indexer and the search both recognise."""

from __future__ import annotations

import re

# A law article's opening: `第十二条`, possibly bold. Passages group an article with its clauses;
# search keeps an article's citation to itself (its neighbour is another article).
LAW_ARTICLE = re.compile(r"^\s*(?:\*\*)?第[一二三四五六七八九十百千零〇两\d]+条")
