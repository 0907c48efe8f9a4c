"""Words that carry no topic in a question, dropped from queries (never from the index)."""

from __future__ import annotations

ENGLISH = frozenset(
    """
a about above after again against all also am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
down during each either else ever every few for from further get gets got had hadn't has hasn't have
haven't having he her here hers herself him himself his how i if in into is isn't it it's its itself
just let's me might more most much must mustn't my myself need needs no nor not now of off on once
only or other ought our ours ourselves out over own same shall shan't she should shouldn't so some
such than that that's the their theirs them themselves then there there's these they this those
through to too under until up upon us very via was wasn't we were weren't what what's when where
which while who whom whose why will with within without won't would wouldn't you your yours yourself
yourselves s t d ll m re ve e.g i.e etc
tell explain describe happen happens happened way ways say says said use used using one ones
may might whether still even already also anyone someone something anything else instead actually really
""".split()
)

CHINESE = frozenset(
    """
的 了 是 在 和 与 或 及 等 吗 呢 吧 啊 呀 哪 哪些 哪个 哪里 什么 什么样 怎么 怎么样 怎样 如何 为什么 为何 是否
是不是 有没有 能不能 可不可以 会不会 多少 几 几个 要 会 能 可以 有 没有 一个 一些 这 那 这个 那个 这些 那些 就 也 都
还 被 把 对 为 从 以 于 之 其 而 并 但 又 再 即 则 若 如果 因为 所以 因此 我 你 他 她 它 我们 你们 他们 自己 该 此
时候 的话 一般 一下 里 上 下 中 后 前 吗 么 呗 嘛 请问 需要 应该 应当 得 地 着 过 给 让 向 由 之后 之前 以后 以前
多久 多长 多大 多远 多高 多重 怎么办 哪一个 哪种 哪家 谁 还是 呢 就是 那么 这么 这样 那样
""".split()
)


def is_stopword(word: str) -> bool:
    return word in ENGLISH or word in CHINESE
