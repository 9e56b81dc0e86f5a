"""Token counts measured once with the embedded model's tokenizer, for the window tests."""

from __future__ import annotations

import json

# Real counts from the embedded model's tokenizer (SmolLM2, llama-cpp-python /extras/tokenize);
# tests/test_window.py checks the estimate against them; tests/test_llm_client_embedded.py
# checks the same against the running server.
MEASURED = [
    ("The quick brown fox jumps over the lazy dog while the weather in Paris stays mild and "
     "sunny. " * 20, 381),
    (json.dumps([{"city": "Paris", "temp_c": 21.5, "humidity": 0.63, "id": 1234567 + i,
                  "tags": ["a", "b"]} for i in range(30)]), 1471),
    ("Les élèves étudient l'histoire de la Révolution française à l'école près de chez moi. "
     * 20, 721),
    ("天气预报说明天北京会下雨，请带好雨伞。我们一起去图书馆看书吧。" * 30, 1800),
    ("Погода в Москве сегодня хорошая, светит солнце и дует лёгкий ветер. " * 20, 1021),
    ("SELECT c.name, SUM(o.total) AS revenue FROM customers c JOIN orders o ON o.customer_id = "
     "c.id WHERE o.created_at >= '2024-01-01' GROUP BY c.name ORDER BY revenue DESC LIMIT 10;\n"
     * 10, 680),
    ("0123456789" * 200, 2000),
]
