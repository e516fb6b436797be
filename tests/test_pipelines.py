"""The stage order of an instant is written in two places only (docs/architecture.md, "The
commit pipeline"): the write pipeline ``core/commit/pipeline.py`` (begin, inflight, commit or
abort; the re-commit of a dead writer's staged instant) and the scheduled-instant pipeline
``core/services/scheduled.py`` (adopt, inflight, commit or abort). Every engine and service
(the Arrow writers, Spark's engine, clustering and compaction on Arrow or Spark) supplies
stages to one of them and never calls a transaction's stage methods itself.

Checked on the source (AST), for the whole package: a call ``x.<stage>(...)`` of one of
:data:`STAGES` anywhere else fails, naming the file and the line. The transaction's own
module may call its own methods on ``self`` (``commit`` moves a requested instant to inflight
first; ``__exit__`` aborts): that is the transaction, not a caller ordering its stages.
"""

from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "airflow_hudi_occ"

#: a transaction's stage methods: who calls them decides the order of an instant's life
#: (``commit_metadata``, a re-commit's completion, is not listed: the timeline's reader has the
#: same name; the ``take_over`` before it is, and only the write pipeline calls it)
STAGES = frozenset({"begin", "adopt", "take_over", "start_inflight", "commit", "abort"})
#: the two pipelines
PIPELINES = ("core/commit/pipeline.py", "core/services/scheduled.py")
#: modules that define transactions: their calls on ``self`` are the transaction's own
TRANSACTIONS = ("core/commit/transaction.py",)


def stage_calls(source: str) -> list[tuple[int, str, str]]:
    """``(line, receiver, stage)`` of every call of a stage method in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STAGES:
            out.append((node.lineno, ast.unparse(node.func.value), node.func.attr))
    return out


def misplaced(rel: str, source: str) -> list[str]:
    """The stage calls of module ``rel`` (path under the package) that break the rule."""
    if rel in PIPELINES:
        return []
    own = rel in TRANSACTIONS
    return [f"airflow_hudi_occ/{rel}:{line}: {recv}.{stage}(...) outside the two pipelines"
            for line, recv, stage in stage_calls(source) if not (own and recv == "self")]


def test_only_the_two_pipelines_call_a_transactions_stages():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        bad += misplaced(rel, path.read_text())
    assert not bad, ("a transaction's stages are called only by core/commit/pipeline.py and "
                     "core/services/scheduled.py; supply a stage to a pipeline instead:\n" + "\n".join(bad))


def test_the_pipelines_are_where_the_stages_are_called():
    """Not vacuous: the pipelines do drive every stage the rule reserves for them."""
    called = {rel: {stage for _l, _r, stage in stage_calls((PKG / rel).read_text())} for rel in PIPELINES}
    assert {"begin", "take_over", "start_inflight", "commit", "abort"} <= called[PIPELINES[0]]
    assert {"adopt", "start_inflight", "commit"} <= called[PIPELINES[1]]


def test_a_service_ordering_its_own_stages_is_caught():
    """The check fails on what the services did before they ran through the pipeline."""
    by_hand = """
def execute(tx, instant):
    plan = tx.adopt(instant)
    try:
        tx.start_inflight(data=b"")
        return tx.commit(write(plan))
    except BaseException as e:
        tx.abort(reason=str(e), error=e)
        raise
"""
    found = misplaced("spark/clustering.py", by_hand)
    assert [f.split(": ", 1)[1] for f in found] == [
        f"tx.{s}(...) outside the two pipelines" for s in ("adopt", "start_inflight", "commit", "abort")]
    # the transaction's own module may call itself, but not another transaction
    own = "def commit(self):\n    self.start_inflight()\n    other.abort()\n"
    assert [f.split(": ", 1)[1] for f in misplaced("core/commit/transaction.py", own)] == [
        "other.abort(...) outside the two pipelines"]
