"""Reusable harnesses for this project's tests and for users' own tests (kazoo-style):
a real ZooKeeper server (:mod:`.zookeeper`), Java Hudi fixture tables and the independent
``hudi`` (hudi-rs) reader as an oracle (:mod:`.tables`)."""
