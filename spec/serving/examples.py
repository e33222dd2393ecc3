"""The page's examples: coding tasks for the default pair, each labelled with what it shows.

Prompt lookup shines when the answer copies the prompt, the draft model where it writes anew. They
are what a workshop clicks, so the server races them before anyone asks (preheating) and replays
them (spec.serving.scheduler).
"""
from __future__ import annotations

EXAMPLES: list[tuple[str, str]] = [  # (label: what it shows, prompt); measured in docs/benchmarks.md
    (
        "Rewrite SQL: the names carry over",
        "Rewrite this SQL query to use a JOIN instead of the subquery. Keep the column names and reply with the "
        "query only.\n\n"
        "SELECT orders.order_id, orders.order_date, orders.total_amount, orders.status, orders.shipping_city\n"
        "FROM orders\n"
        "WHERE orders.customer_id IN (\n"
        "    SELECT customers.customer_id\n"
        "    FROM customers\n"
        "    WHERE customers.country = 'Germany' AND customers.signup_date >= '2024-01-01'\n"
        ")\n"
        "AND orders.status <> 'cancelled'\n"
        "ORDER BY orders.order_date DESC, orders.total_amount DESC;\n",
    ),
    (
        "Rename a variable: the answer copies the code",
        "Rename the variable `tmp` to `subtotal` everywhere in this function. Reply with the whole function.\n\n"
        "def invoice_total(items, tax_rate, discount=0.0):\n"
        "    tmp = 0.0\n"
        "    for item in items:\n"
        "        price = item[\"price\"] * item[\"quantity\"]\n"
        "        if item.get(\"taxable\", True):\n"
        "            price += price * tax_rate\n"
        "        tmp += price\n"
        "    if discount:\n"
        "        tmp -= tmp * discount\n"
        "    return round(tmp, 2)\n",
    ),
    (
        "Add docstrings: most of the answer is the input",
        "Add a one-line docstring to each function. Reply with the complete code.\n\n"
        "def celsius_to_fahrenheit(celsius):\n"
        "    return celsius * 9 / 5 + 32\n\n\n"
        "def fahrenheit_to_celsius(fahrenheit):\n"
        "    return (fahrenheit - 32) * 5 / 9\n\n\n"
        "def kelvin_to_celsius(kelvin):\n"
        "    return kelvin - 273.15\n",
    ),
    (
        "Fix a bug: a small change in copied code",
        "This function should return the average of the numbers, but it is wrong. Fix it and reply with the "
        "corrected function.\n\n"
        "def average(numbers):\n"
        "    total = 0\n"
        "    for i in range(1, len(numbers)):\n"
        "        total += numbers[i]\n"
        "    return total / len(numbers)\n",
    ),
    (
        "Class to dataclass: same fields, new form",
        "Convert this class to a Python dataclass; keep its method as it is. Reply with the code only.\n\n"
        "class Order:\n"
        "    def __init__(self, order_id, customer, items, shipping_address, discount=0.0, shipped=False):\n"
        "        self.order_id = order_id\n"
        "        self.customer = customer\n"
        "        self.items = items\n"
        "        self.shipping_address = shipping_address\n"
        "        self.discount = discount\n"
        "        self.shipped = shipped\n\n"
        "    def total(self):\n"
        "        subtotal = sum(item.price * item.quantity for item in self.items)\n"
        "        return subtotal * (1 - self.discount)\n",
    ),
    (
        "Open question: the 0.5B draft model drafts",
        "What is the difference between a list and a tuple in Python? Explain when to use each.",
    ),
]
