"""The stack's idle cost, recomputed from the synthesized template on every run, is the figure the
documentation states (docs/cost.md, docs/deploy.md): the page cannot go stale."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from infra import cost

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_template_prices_without_an_unpriced_resource(template):
    idle = cost.idle_cost(template)
    kinds = {item.price.key for item in idle.items}
    # The stack's idle bill: SnapStart caches, alarms, the dashboard, PITR and table storage
    assert kinds == {"snapstart_cache", "alarm_metric", "dashboard", "pitr", "table_storage"}
    cached_gb = sum(
        item.quantity / cost.SECONDS_PER_MONTH
        for item in idle.items
        if item.price.key == "snapstart_cache"
    )
    memory = sum(
        Decimal(r["Properties"].get("MemorySize", 128)) / 1024
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "SnapStart" in r["Properties"]
    )
    assert cached_gb == memory > 0


def test_docs_cost_states_the_figure_the_template_gives(template):
    idle = cost.idle_cost(template)
    page = (DOCS / "cost.md").read_text()
    assert cost.render(idle) in page, "python -m infra.cost prints the table docs/cost.md shows"
    assert cost.render_prices() in page  # every price with its source and the date it was read


def test_docs_deploy_states_the_snapstart_cache_figure_not_small_and_fixed(template):
    idle = cost.idle_cost(template)
    page = " ".join((DOCS / "deploy.md").read_text().split())
    assert "small and fixed" not in page
    cache = idle.quantity("snapstart_cache") * cost.PRICES["snapstart_cache"].usd
    assert cost.dollars(cache) in page
    assert "cost.md" in page
