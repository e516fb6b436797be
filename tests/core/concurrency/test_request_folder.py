"""The request folder both admission and write windows keep beside the timeline."""

from dataclasses import dataclass

from airflow_hudi_occ.core.concurrency.request_folder import RequestFolder
from airflow_hudi_occ.core.table.table import Table


@dataclass
class Req:
    request_id: str
    partitions: list


def test_requests_round_trip_in_id_order_and_the_folder_goes_with_the_last(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    folder = RequestFolder("demo", Req)
    late, early = Req(folder.new_id(2000.0), ["b"]), Req(folder.new_id(1000.0), ["a"])
    folder.save(table, late)
    folder.save(table, early)
    assert folder.all(table) == [early, late]  # ids sort by creation time
    assert folder.load(table, late.request_id) == late
    (tmp_path / "t" / ".hoodie" / ".aux" / "occ" / "demo" / "torn.json").write_text("{not json")
    assert folder.all(table) == [early, late]  # a torn file reads as absent
    folder.withdraw(table, "torn")
    folder.withdraw(table, early.request_id)
    assert folder.all(table) == [late]
    folder.withdraw(table, late.request_id)
    folder.withdraw(table, late.request_id)  # twice: nothing to do
    assert folder.all(table) == []
    assert not (tmp_path / "t" / ".hoodie" / ".aux" / "occ" / "demo").exists()  # no empty folder left


def test_a_save_whose_folder_vanished_under_it_makes_it_again(tmp_path, monkeypatch):
    """A concurrent withdrawal may remove the empty folder between a save's makedirs and its
    file; the save makes it again instead of failing the write."""
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    folder = RequestFolder("demo", Req)
    real_write, calls = table.storage.write, []

    def vanishing_write(path, data):
        calls.append(path)
        if len(calls) == 1:
            raise FileNotFoundError(path)  # what open() says once the folder is gone
        return real_write(path, data)

    monkeypatch.setattr(table.storage, "write", vanishing_write)
    req = Req(folder.new_id(), ["a"])
    folder.save(table, req)
    assert len(calls) == 2 and folder.load(table, req.request_id) == req
