"""The demo ERP: order look-up, a logged delivery-date change with validation, e-mail."""

from __future__ import annotations

import json
import sqlite3
from datetime import date, timedelta

import pytest
from django.test import override_settings

from agentlab.tools.builtin import erp
from agentlab.tools.registry import builtin_tools

LOCMEM = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}


pytestmark = pytest.mark.usefixtures("own_var_dir")


def test_specs_are_erp_and_mark_side_effects():
    tools = builtin_tools()
    assert {tools[n].category for n in ("query_order", "update_delivery_date", "send_email")} \
        == {"erp"}
    assert not tools["query_order"].side_effects
    assert tools["update_delivery_date"].side_effects and tools["send_email"].side_effects


def test_demo_db_has_sixty_orders(tmp_path):
    erp.connect().close()
    conn = sqlite3.connect(tmp_path / "demo" / "erp.sqlite3")
    ids = [r[0] for r in conn.execute("SELECT order_id FROM orders ORDER BY order_id")]
    assert ids[0] == "SO-1001" and ids[-1] == "SO-1060" and len(ids) == 60
    assert conn.execute("SELECT COUNT(*) FROM delivery_change_log").fetchone()[0] == 0


@pytest.mark.parametrize("spelling", ["SO-1001", "1001", "so-1001", " SO 1001 "])
async def test_query_order_tolerates_spellings(ex, spelling):
    result = await ex.run("query_order", {"order_id": spelling})
    assert result.ok, result.observation
    order = json.loads(result.output)
    assert order["order_id"] == "SO-1001"
    assert {"customer", "email", "status", "delivery_date"} <= order.keys()


async def test_query_order_unknown(ex):
    result = await ex.run("query_order", {"order_id": "SO-9999"})
    assert not result.ok and "SO-1001" in result.observation


def _open_order(tmp_path) -> str:
    erp.connect().close()
    conn = sqlite3.connect(tmp_path / "demo" / "erp.sqlite3")
    oid = conn.execute("SELECT order_id FROM orders WHERE status != 'delivered' "
                       "ORDER BY order_id").fetchone()[0]
    conn.close()
    return oid


async def test_update_writes_the_change_log(ex, tmp_path):
    oid = _open_order(tmp_path)
    before = json.loads((await ex.run("query_order", {"order_id": oid})).output)
    new = (date.today() + timedelta(days=90)).isoformat()
    result = await ex.run("update_delivery_date",
                          {"order_id": oid, "new_date": new, "reason": "supplier delay"})
    assert result.ok, result.observation
    conn = sqlite3.connect(tmp_path / "demo" / "erp.sqlite3")
    log = conn.execute("SELECT order_id, old_date, new_date, reason, changed_at "
                       "FROM delivery_change_log").fetchall()
    assert len(log) == 1
    assert log[0][:4] == (oid, before["delivery_date"], new, "supplier delay") and log[0][4]
    assert conn.execute("SELECT delivery_date FROM orders WHERE order_id = ?",
                        (oid,)).fetchone()[0] == new
    after = json.loads((await ex.run("query_order", {"order_id": oid})).output)
    assert after["delivery_date"] == new and after["delivery_changes"][0]["reason"] == \
        "supplier delay"


@pytest.mark.parametrize(("new_date", "reason", "message"), [
    ((date.today() - timedelta(days=1)).isoformat(), "late", "in the past"),
    ("2026-13-45", "late", "not an ISO date"),
    ("next tuesday", "late", "not an ISO date"),
    ((date.today() + timedelta(days=5)).isoformat(), "   ", "reason is required"),
])
async def test_update_rejects_bad_input_and_changes_nothing(ex, tmp_path, new_date, reason,
                                                            message):
    oid = _open_order(tmp_path)
    result = await ex.run("update_delivery_date",
                          {"order_id": oid, "new_date": new_date, "reason": reason})
    assert not result.ok and message in result.observation
    conn = sqlite3.connect(tmp_path / "demo" / "erp.sqlite3")
    assert conn.execute("SELECT COUNT(*) FROM delivery_change_log").fetchone()[0] == 0


@pytest.mark.django_db
async def test_send_email_uses_djangos_backend(ex):
    from django.core import mail

    with override_settings(MAILERS=LOCMEM):
        mail.outbox = []
        result = await ex.run("send_email", {"to": "ops@example.com", "subject": "Delay",
                                             "body": "SO-1001 moves to July."})
        assert result.ok, result.observation
        assert "ops@example.com" in result.observation
        assert len(mail.outbox) == 1
        sent = mail.outbox[0]
        assert sent.to == ["ops@example.com"] and sent.subject == "Delay"
        assert sent.body == "SO-1001 moves to July."


@pytest.mark.parametrize("address", ["nobody", "a@b", "a b@example.com", "x@@example.com",
                                     "x@example..com", ".x@example.com", "x@-example.com",
                                     "ops@example.com\nBcc: evil@example.com"])
@pytest.mark.django_db
async def test_send_email_rejects_bad_addresses(ex, address):
    from django.core import mail

    with override_settings(MAILERS=LOCMEM):
        mail.outbox = []
        result = await ex.run("send_email", {"to": address, "subject": "x", "body": "y"})
        assert not result.ok and "not a valid e-mail address" in result.observation
        assert mail.outbox == []
