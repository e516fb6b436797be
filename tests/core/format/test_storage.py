"""create-if-absent, implemented truthfully per backend (or refused)."""

import contextlib
import multiprocessing as mp
import os
import socket
import threading
import time

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_hudi_occ.core.errors import ConfigError, StorageError, StorageUnavailableError
from airflow_hudi_occ.core.format.object_store import ObjectStore
from airflow_hudi_occ.core.format.storage import S3_CLIENT_DEFAULTS, S3FS_RETRIES, Storage
from airflow_hudi_occ.testing.unreachable import refusing_port, silent_listener


class NoConditionalWritesFS(MemoryFileSystem):
    """A backend with no atomic create-if-absent (like plain HTTP or an old object store)."""
    protocol = "nocas"
    store = {}
    pseudo_dirs = [""]


fsspec.register_implementation("nocas", NoConditionalWritesFS, clobber=True)


def test_local_create_if_absent_is_exclusive_and_whole(tmp_path):
    s = Storage(str(tmp_path))
    p = s.path("a", "b.commit")
    s.create_if_absent(p, b"one")
    with pytest.raises(FileExistsError):
        s.create_if_absent(p, b"two")
    assert open(p, "rb").read() == b"one"
    assert [n for n in os.listdir(os.path.dirname(p)) if n.endswith(".tmp")] == []


def _race(path, data, q):
    s = Storage(os.path.dirname(path))
    try:
        s.create_if_absent(path, data)
        q.put(data)
    except FileExistsError:
        q.put(None)


def test_local_create_if_absent_between_processes(tmp_path):
    ctx = mp.get_context("spawn")
    for round_ in range(2):
        path = str(tmp_path / f"x{round_}")
        q = ctx.Queue()
        procs = [ctx.Process(target=_race, args=(path, f"p{i}".encode() * 1000, q)) for i in range(4)]
        for p in procs:
            p.start()
        outcomes = [q.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        winners = [o for o in outcomes if o is not None]
        assert len(winners) == 1
        assert open(path, "rb").read() == winners[0]


def test_memory_backend(tmp_path):
    s = Storage("memory://tbl-test")
    s.create_if_absent(s.path("f"), b"1")
    with pytest.raises(FileExistsError):
        s.create_if_absent(s.path("f"), b"2")
    assert s.read(s.path("f")) == b"1"


def test_backend_without_conditional_writes_is_refused():
    s = Storage("nocas://tbl")
    with pytest.raises(StorageError) as e:
        s.create_if_absent(s.path("x.commit"), b"data")
    assert e.value.protocol == "nocas" and "lock provider" in e.value.remedy
    assert not s.fs.exists(s.path("x.commit"))
    # ...unless the caller declares that a lock serialises every create
    locked = Storage("nocas://tbl", assume_locked_creates=True)
    locked.create_if_absent(locked.path("x.commit"), b"data")
    with pytest.raises(FileExistsError):
        locked.create_if_absent(locked.path("x.commit"), b"again")


@pytest.mark.parametrize("key", ["x.commit", "412/x.commit"], ids=["key", "partition-412"])
def test_an_s3_store_without_conditional_writes_is_refused_whatever_digits_its_answer_holds(
        s3_client, key, monkeypatch):
    """A store answering If-None-Match with 501 is refused naming the store, never taken for
    "the file exists" (a 412) because the answer's text holds a 412: obstore names the
    request's elapsed time ("in 103.412756ms", which once made a CI run read a 501 as a lost
    race), and a key may lie in a partition called 412. Declared, the create goes on."""
    import obstore
    from obstore import exceptions as ox
    from airflow_hudi_occ.testing.s3 import S3Server
    real_put = obstore.put

    def put_answered_in_412ms(*args, **kwargs):
        try:
            return real_put(*args, **kwargs)
        except ox.GenericError as e:
            text = str(e)
            assert "status code: 501" in text  # the store's own refusal, reworded only in its time
            raise ox.GenericError(text.replace(" in ", " in 103.412756ms, not ", 1)) from e

    monkeypatch.setattr(obstore, "put", put_answered_in_412ms)
    with S3Server(conditional_writes=False) as server:
        server.create_bucket("lake")
        s = Storage("s3://lake/t", server.storage_options)
        with pytest.raises(StorageError) as e:
            s.create_if_absent(s.path(key), b"data")
        assert not isinstance(e.value, FileExistsError)
        assert "does not support conditional writes" in e.value.message and "501" in e.value.message
        assert "assume_locked_creates" in e.value.remedy
        assert s.walk_files(s.path()) == []
        locked = Storage("s3://lake/t", {**server.storage_options, "assume_locked_creates": True})
        locked.create_if_absent(locked.path(key), b"data")
        assert s.read(s.path(key)) == b"data"
        with pytest.raises(FileExistsError):
            locked.create_if_absent(locked.path(key), b"again")
        assert s.read(s.path(key)) == b"data"


# -- object stores that refuse or never answer ---------------------------------------------------


def _refusing_endpoint() -> str:
    return f"http://127.0.0.1:{refusing_port()}"


@pytest.fixture
def silent_endpoint():
    """Accepts connections, never answers: what a hung store or proxy looks like."""
    with silent_listener() as port:
        yield f"http://127.0.0.1:{port}"


def _s3(endpoint: str, **options) -> Storage:
    return Storage("s3://bucket/t", {"endpoint_url": endpoint, "key": "k", "secret": "s", **options})


@pytest.fixture(params=["obstore", "s3fs"])
def s3_client(request, monkeypatch):
    """Each S3 test runs with either client sending the requests: obstore
    (``format/object_store``, where the options allow) and s3fs (options only botocore
    takes, or obstore not installed)."""
    if request.param == "s3fs":
        monkeypatch.setattr(ObjectStore, "for_s3", classmethod(lambda cls, options: None))
    return request.param


#: what each client names a refused connection and a silent store
_REFUSED = {"obstore": "ConnectionRefusedByStoreError", "s3fs": "EndpointConnectionError"}
_SILENT = {"obstore": "StoreTimeoutError", "s3fs": "ReadTimeoutError"}


def test_s3_gets_bounded_client_timeouts_that_the_user_may_override():
    storage = _s3(_refusing_endpoint())
    assert storage.fs.config_kwargs == S3_CLIENT_DEFAULTS and storage.fs.retries == S3FS_RETRIES
    mine = _s3(_refusing_endpoint(), config_kwargs={"read_timeout": 120})
    assert mine.fs.config_kwargs == {**S3_CLIENT_DEFAULTS, "read_timeout": 120}
    assert Storage("s3://bucket/t", {"key": "k", "secret": "s"}).storage_options == {"key": "k", "secret": "s"}


@pytest.mark.parametrize("key", ["client_kwargs", "config_kwargs", "s3_additional_kwargs"])
def test_keyword_argument_options_must_be_mappings(key):
    """Issue 40: a string (JSON text) where s3fs wants keyword arguments reached s3fs, which
    failed at the first call with `'str' object has no attribute 'copy'`. Refused at once,
    naming the key and the type, never the value (it may hold a credential)."""
    with pytest.raises(ConfigError) as exc:
        Storage("s3://bucket/t", {key: '{"aws_secret_access_key": "s3cr3t"}'})
    assert exc.value.key == key and f"storage option {key!r} must be an object" in exc.value.message
    assert "s3cr3t" not in str(exc.value) and "JSON object" in exc.value.remedy
    assert Storage("s3://bucket/t", {key: {}, "anon": True}).storage_options[key] == {}


def test_a_storage_option_the_backend_does_not_take_is_named():
    """s3fs hands unknown options to its session and fails at the first call with a raw
    `TypeError: AioSession.__init__() got an unexpected keyword argument` (the CLI called it
    a bug in hudi-occ); now a ConfigError naming the key, the closest name s3fs takes."""
    storage = Storage("s3://bucket/t", {"endpont_url": "http://127.0.0.1:1", "anon": True})
    with pytest.raises(ConfigError) as exc:
        storage.read(storage.path(".hoodie", "hoodie.properties"))
    assert exc.value.key == "endpont_url"
    assert exc.value.message.startswith("the s3 store does not take the storage option 'endpont_url'")
    assert exc.value.remedy.startswith("did you mean 'endpoint_url'?")


def test_a_refusing_endpoint_is_storage_unavailable_naming_it(s3_client):
    endpoint = _refusing_endpoint()
    storage = _s3(endpoint)
    assert (storage.objects is not None) == (s3_client == "obstore")
    start = time.monotonic()
    with pytest.raises(StorageUnavailableError) as exc:
        storage.read(storage.path(".hoodie", "hoodie.properties"))
    assert time.monotonic() - start < 30
    assert exc.value.endpoint == endpoint and exc.value.cause == _REFUSED[s3_client]
    assert isinstance(exc.value, ConnectionError), "callers treating storage OSErrors as transient still do"
    assert f"the s3 store at {endpoint} did not answer (bucket/t/.hoodie/hoodie.properties)" in str(exc.value)
    with pytest.raises(StorageUnavailableError):  # writes go through the same boundary
        storage.create_if_absent(storage.path("x"), b"1")


@pytest.mark.slow  # 42 s; the default run proves the same path with a 1 s read timeout
# (tests/cli/test_app.py::test_a_silent_store_fails_within_its_read_timeout) and that the
# defaults reach botocore (test_s3_gets_bounded_client_timeouts_that_the_user_may_override)
def test_a_silent_endpoint_fails_within_the_default_bound(silent_endpoint, s3_client):
    """The defaults, not a test-sized timeout: 2 s3fs tries x 2 botocore attempts x 10 s read
    timeout, about 42 s measured (botocore's and s3fs's own defaults: 415 s); obstore: 2
    attempts of a 20 s request."""
    storage = _s3(silent_endpoint)
    start = time.monotonic()
    with pytest.raises(StorageUnavailableError) as exc:
        storage.exists(storage.path(".hoodie", "hoodie.properties"))
    took = time.monotonic() - start
    assert took < 60, f"took {took:.0f}s"
    assert exc.value.endpoint == silent_endpoint and exc.value.cause == _SILENT[s3_client]


def test_a_local_error_is_not_mistaken_for_an_unanswering_store(tmp_path):
    with pytest.raises(FileNotFoundError):
        Storage(str(tmp_path)).read(str(tmp_path / "missing"))


def test_an_answer_that_is_not_http_is_storage_unavailable_too(s3_client):
    """A store (or proxy) that answers garbage: a misbehaving store, not a bug of ours."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def answer_garbage():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn = server.accept()[0]
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"this is not HTTP\r\n\r\n")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        storage = _s3(endpoint)
        with pytest.raises(StorageUnavailableError) as exc:
            storage.read(storage.path("x"))
        assert f"the s3 store at {endpoint} gave no answer the client could read (bucket/t/x)" in str(exc.value)
    finally:
        stop.set()
        thread.join(2)
        server.close()


def test_an_empty_folder_goes_and_a_folder_with_a_file_stays(tmp_path):
    st = Storage(str(tmp_path))
    st.write(st.path("a", "f"), b"x")
    st.makedirs(st.path("b"))
    assert st.delete_dir_if_empty(st.path("a")) is False and (tmp_path / "a" / "f").exists()
    assert st.delete_dir_if_empty(st.path("b")) is True and not (tmp_path / "b").exists()
    assert st.delete_dir_if_empty(st.path("b")) is False  # already gone: nothing to do


# -- base paths with characters no one sees (issue 40) ------------------------------------------

INVISIBLE = ["t ", "t\n", "t\t", " t", "t\r", "t\x00", "t\x1b", "lake /t"]


@pytest.mark.parametrize("name", INVISIBLE)
def test_a_base_path_with_an_invisible_character_is_refused_showing_it(tmp_path, name):
    """``'t '`` and ``'t\\n'`` were created and written silently; opening ``'t'`` then said
    "no table" and no message quoted the path. Now create, open and the writers' storage
    refuse it before any folder exists, the path shown by ``repr()`` so the character is."""
    from airflow_hudi_occ.core.errors import InvalidTablePathError
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.testing.tables import tree_snapshot

    path = str(tmp_path / name)
    before = tree_snapshot(tmp_path)
    t0 = time.monotonic()
    for attempt in (lambda: Table.create(path, "t", record_key_fields=["k"]), lambda: Table.open(path),
                    lambda: Storage(path), lambda: Storage(f"memory://{name}")):
        with pytest.raises(InvalidTablePathError) as e:
            attempt()
        assert repr(path) in str(e.value) or repr(f"memory://{name}") in str(e.value)
        assert "remove the character" in e.value.remedy
    print(f"refused in {time.monotonic() - t0:.3f} s")
    assert tree_snapshot(tmp_path) == before


def test_base_paths_people_can_see_are_taken(tmp_path):
    from airflow_hudi_occ.core.table.table import Table

    for name in ("my table", "t", "tàble", "t.v2"):
        Table.create(str(tmp_path / name), "t", record_key_fields=["k"])
        assert Table.open(str(tmp_path / name) + "/").config.name == "t"


@pytest.mark.parametrize("where", ["local", "s3", "s3.s3fs"])
def test_one_listing_gives_each_files_size_and_modification_time(tmp_path, where, monkeypatch):
    """``list_sizes`` and ``list_mtimes``: files only (no folders), a missing folder is empty;
    on S3 the times are the store's (one-second resolution), near our clock."""
    from airflow_hudi_occ.testing.s3 import S3Server
    with contextlib.ExitStack() as stack:
        if where == "local":
            storage = Storage(str(tmp_path / "t"))
        else:
            if where == "s3.s3fs":
                monkeypatch.setattr(ObjectStore, "for_s3", classmethod(lambda cls, options: None))
            s3 = stack.enter_context(S3Server())
            s3.create_bucket("listed")
            storage = Storage("s3://listed/t", s3.storage_options)
            assert (storage.objects is None) == (where == "s3.s3fs")
        folder = storage.path("f")
        storage.write(storage.path("f", "a"), b"12345")
        storage.write(storage.path("f", "sub", "c"), b"1")
        before = time.time()
        storage.write(storage.path("f", "b"), b"")
        assert storage.list_sizes(folder) == {"a": 5, "b": 0}
        times = storage.list_mtimes(folder)
        assert set(times) == {"a", "b"}
        assert before - 2 <= times["b"] <= time.time() + 2
        assert storage.list_sizes(storage.path("none")) == storage.list_mtimes(storage.path("none")) == {}


@pytest.mark.parametrize("value", ["2026-11-30T02:41:16.583Z", "2026-11-30T02:41:16Z",
                                   "2026-11-30T02:41:16.583000+00:00", "2026-11-30T03:41:16+01:00",
                                   "Mon, 30 Nov 2026 02:41:16 GMT", "1796006476", 1796006476.5])
def test_s3_timestamps_read_quickly_are_the_instants_botocore_reads(value):
    from botocore.utils import parse_timestamp
    from airflow_hudi_occ.core.format.storage import s3_timestamp
    ours, theirs = s3_timestamp(value), parse_timestamp(value)
    assert ours == theirs and ours.utcoffset() == theirs.utcoffset(), (ours, theirs)


def test_an_s3_client_parses_listing_times_with_the_quick_parser():
    """The table's S3 client is made with :func:`s3_timestamp` as its parser (dateutil's was a
    fifth of a writer's CPU, issue 43), and a listing's times read with it are the store's."""
    from airflow_hudi_occ.core.format.storage import s3_timestamp
    from airflow_hudi_occ.testing.s3 import S3Server
    with S3Server() as s3:
        s3.create_bucket("quick")
        storage = Storage("s3://quick/t", {**s3.storage_options, "skip_instance_cache": True})
        before = time.time()
        storage.write(storage.path("f", "a"), b"1")
        assert before - 2 <= storage.list_mtimes(storage.path("f"))["a"] <= time.time() + 2
        # botocore makes a parser per answer from its endpoint's factory
        assert storage.fs.s3._endpoint._response_parser_factory._defaults["timestamp_parser"] is s3_timestamp


@pytest.mark.parametrize("where", ["local", "memory"])
def test_concurrently_runs_every_call_and_raises_the_first_error_after_all(tmp_path, where):
    """``Storage.concurrently``: results in the calls' order; a failing call does not stop the
    others (the clean-up after a commit deletes the heartbeat whatever the markers do); on an
    object store the calls overlap (here: each waits for all the others to have started)."""
    storage = Storage(str(tmp_path / "t") if where == "local" else f"memory://{tmp_path.name}/t")
    ran = []
    assert storage.concurrently([lambda i=i: i * 2 for i in range(4)]) == [0, 2, 4, 6]

    def boom():
        raise FileNotFoundError("first")
    with pytest.raises(FileNotFoundError, match="first"):
        storage.concurrently([boom, lambda: ran.append("second"), lambda: ran.append("third")])
    assert sorted(ran) == ["second", "third"]
    if where == "memory":  # not local: each call on its own thread, all at once
        started = threading.Barrier(3, timeout=10)
        assert storage.concurrently([lambda i=i: (started.wait(), i)[1] for i in range(3)]) == [0, 1, 2]


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_call_started_ahead_answers_later_and_raises_where_it_is_taken(tmp_path, where):
    """``Storage.ahead``: on an object store the call runs while the caller goes on (here it
    finishes only once the caller has moved on: it waits for an event set after ``ahead``
    returned); locally it has run by the time ``ahead`` returns. Its error is raised by
    ``result()``, on the caller's thread, not when it happened."""
    storage = Storage(str(tmp_path / "t") if where == "local" else f"memory://{tmp_path.name}/t")
    went_on = threading.Event()
    if where == "memory":  # it can finish only after the caller went on
        started = storage.ahead(lambda: went_on.wait(10))
    else:  # it has run before the caller goes on
        started = storage.ahead(went_on.is_set)
    went_on.set()
    assert started.result() is (where == "memory")

    def boom():
        raise FileNotFoundError("the call's own error")
    failed = storage.ahead(boom)
    with pytest.raises(FileNotFoundError, match="the call's own error"):
        failed.result()


def _read_in_fork(storage_options, path, out):
    storage = Storage("s3://forked/t", storage_options)
    out.put((storage.objects is None, storage.read(storage.path(path))))


def test_a_process_forked_after_obstore_was_used_sends_through_s3fs():
    """obstore's runtime does not survive a fork: a child's first request through it waits
    forever (measured with obstore 0.12). A child of a process that used it sends through
    s3fs instead, and reads what the parent wrote."""
    import multiprocessing
    from airflow_hudi_occ.testing.s3 import S3Server
    with S3Server() as s3:
        s3.create_bucket("forked")
        parent = Storage("s3://forked/t", s3.storage_options)
        assert parent.objects is not None
        parent.write(parent.path("p"), b"from the parent")
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_read_in_fork, args=(s3.storage_options, "p", out))
        child.start()
        child.join(60)
        if child.is_alive():
            child.kill()
            pytest.fail("the forked child's request never returned")
        assert child.exitcode == 0
        assert out.get(timeout=5) == (True, b"from the parent")
        assert parent.objects is not None, "the parent keeps its client"
