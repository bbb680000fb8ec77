"""The subscription feed (``service/feed.py``) against a model list: appends, records taken
back, retention, and reopening after a crash that left records of batches that never
committed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from upkeep.service.feed import Feed

ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sets(st.sampled_from("abc"), min_size=1),
              st.integers(-2, 2)),
    st.tuples(st.just("take_back")),
    st.tuples(st.just("reopen"), st.booleans()),  # whether the last batch did not commit
), max_size=40)


@settings(max_examples=60)
@given(ops=ops, retention=st.integers(1, 6))
def test_feed_equals_a_model(tmp_path_factory, ops, retention) -> None:
    """The feed keeps a suffix of the committed records, at least the last ``retention``;
    its horizon lies between the dropped records and the kept ones, and ``since`` is exact
    from the horizon on."""
    path = tmp_path_factory.mktemp("feed") / "feed.log"
    feed = Feed(path, 0, retention)
    model: list[tuple[int, dict]] = []  # every committed record, none dropped
    batch, appended = 0, False
    for op in ops:
        if op[0] == "append":
            batch += 1
            changes = {s: [((batch, s), op[2] or 1)] for s in sorted(op[1])}
            feed.append(batch, changes)
            model.append((batch, changes))
        elif op[0] == "take_back" and appended:  # right after its append (a failed log write)
            feed.take_back(batch)
            model.pop()
            batch -= 1
        elif op[0] == "reopen":
            # commits are sequential: only the record appended last can lack its batch
            committed = batch - 1 if appended and op[1] else batch
            feed.close()
            feed = Feed(path, committed, retention)
            model = [r for r in model if r[0] <= committed]
            batch = committed
        appended = op[0] == "append"
        kept = feed.records
        assert len(kept) >= min(len(model), retention)
        assert kept == model[len(model) - len(kept):]
        dropped = model[:len(model) - len(kept)]
        assert all(b <= feed.horizon for b, _ in dropped)
        assert all(b > feed.horizon for b, _ in kept)
        for sub in "abc":
            for after in range(feed.horizon, batch + 1):
                assert list(feed.since(sub, after)) == [
                    (b, c[sub]) for b, c in model if b > after and sub in c]
    feed.close()
