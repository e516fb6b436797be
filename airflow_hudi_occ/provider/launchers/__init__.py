"""How a write's job is launched: spark-submit (``spark_submit.py``), a Java Hudi job
(``java.py``), the engine's job as a Spark Connect client (``connect.py``), the user's own operator on their platform (``external.py``); the interface the
attempt loop (``provider/attempt_loop.py``) drives them through is ``base.py``."""
